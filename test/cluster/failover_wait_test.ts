import assert from "node:assert/strict";
import { FailoverWaits, KEPT_CHECK_MS, type WaitOutcome } from "../../src/cluster/failover_wait.ts";
import { seededRandom } from "../../src/bucket/random.ts";
import { FakeClock } from "../bucket/fake_clock.ts";

function waits(clock: FakeClock, counted: WaitOutcome[]) {
  return new FailoverWaits({
    clock,
    random: seededRandom(7),
    maxWaitMs: 25_000,
    maxKept: 10,
    count: (outcome) => counted.push(outcome),
  });
}

Deno.test("a kept request is answered when a look hands it on", async () => {
  const clock = new FakeClock();
  const counted: WaitOutcome[] = [];
  let looks = 0;
  const kept = waits(clock, counted).keep(
    "default/counter/a",
    undefined,
    () =>
      Promise.resolve(++looks < 4 ? { wait: true } : { wait: false, outcome: "served", value: 1 }),
    () => 0,
  );
  const took = await clock.runUntilSettled(kept);
  assert.equal(await kept, 1);
  assert.equal(looks, 4);
  // A first look within the first second, then one a second.
  assert.ok(took >= 3 * KEPT_CHECK_MS && took < 4 * KEPT_CHECK_MS, `took ${took} ms`);
  assert.deepEqual(counted, ["served"]);
});

Deno.test("a look still reading when the wait runs out ends the wait at its bound", async () => {
  const clock = new FakeClock();
  const counted: WaitOutcome[] = [];
  // Each look waits on a bucket read that answers after 30 s (a silent
  // call), unless the wait's end stops it first.
  const look = (waitEnds: AbortSignal) =>
    new Promise<{ wait: true }>((resolve) => {
      const read = clock.setTimer(30_000, () => resolve({ wait: true }));
      waitEnds.addEventListener("abort", () => {
        read.cancel();
        resolve({ wait: true });
      }, { once: true });
    });
  const kept = waits(clock, counted).keep("default/counter/a", undefined, look, (o) => o);
  const took = await clock.runUntilSettled(kept);
  assert.equal(await kept, "timeout");
  assert.equal(took, 25_000);
  assert.deepEqual(counted, ["timeout"]);
});

Deno.test("the node's stop answers every kept request at once", async () => {
  const clock = new FakeClock();
  const counted: WaitOutcome[] = [];
  const node = waits(clock, counted);
  const kept = node.keep(
    "default/counter/a",
    undefined,
    () => Promise.resolve({ wait: true }),
    (o) => o,
  );
  await clock.advance(3_000);
  node.stop();
  assert.equal(await kept, "stopping");
  assert.equal(node.kept, 0);
  const refused = await node.keep(
    "default/counter/b",
    undefined,
    () => Promise.resolve({ wait: true }),
    (o) => o,
  );
  assert.equal(refused, "over_cap");
  assert.deepEqual(counted, ["stopping", "over_cap"]);
});
