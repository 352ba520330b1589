import assert from "node:assert/strict";
import { LeaseBound } from "../../src/executor/lease_bound.ts";
import { FakeClock } from "../bucket/fake_clock.ts";

Deno.test("lease bound: an event runs before its lease's end, renewed within its epoch, never after a discard-all", async () => {
  const clock = new FakeClock();
  const bound = new LeaseBound(clock);
  bound.received(1, clock.now() + 1000);
  bound.received(2, 0);
  assert.equal(bound.check(1), "valid");
  await clock.advance(1000);
  assert.equal(bound.check(1), "expired", "its lease ended on the wall clock");
  bound.renew(clock.now() + 5000);
  assert.equal(bound.check(1), "valid", "a renewal of the lease it was sent under");
  assert.equal(bound.check(2), "valid", "a node without a lease bounds nothing");
  bound.discardAll();
  assert.equal(bound.check(1), "discarded");
  assert.equal(bound.check(2), "discarded");
  bound.received(3, clock.now() + 100);
  bound.renew(clock.now() + 60_000);
  await clock.advance(200);
  assert.equal(bound.check(3), "valid", "the renewal after the discard counts for the new epoch");
  bound.ended(3);
  assert.equal(bound.has(3), false);
  assert.equal(bound.check(3), "valid", "an event not under way is not bounded here");
});
