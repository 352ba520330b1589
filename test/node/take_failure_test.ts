import assert from "node:assert/strict";
import { takeFailure } from "../../src/node/policies.ts";
import { HeldElsewhere, MalformedRecord, TakeNotAllowed } from "../../src/cluster/ownership.ts";
import { BucketUnavailable } from "../../src/bucket/errors.ts";

const KEY = "owners/default/counter/a";

Deno.test("takeFailure: a held actor is 503 naming its holder, a bad record 500, anything else 503", () => {
  const record = {
    version: 1 as const,
    node: "b",
    process: "p",
    generation: 4n,
    state: "held" as const,
    at: 0,
  };
  const held = takeFailure(new HeldElsewhere(KEY, record));
  assert.equal(held.status, 503);
  assert.equal(held.heldBy, "b");
  assert.match(held.message, /^the actor is held by another node: .*held by node b.*; retry$/);
  assert.deepEqual(takeFailure(new MalformedRecord(KEY, "not JSON")), {
    kind: "failed",
    status: 500,
    message: `${KEY}: malformed ownership record: not JSON`,
  });
  const other = {
    kind: "failed",
    status: 503,
    message: "the bucket did not answer while taking the actor; retry",
  };
  assert.deepEqual(
    takeFailure(new BucketUnavailable(`GET ${KEY}: timed out`, { ambiguous: false })),
    other,
  );
  assert.deepEqual(takeFailure(new TakeNotAllowed(KEY)), other);
});

Deno.test("takeFailure: an error is told by its class, not by its name", () => {
  const named = Object.assign(new Error("x"), { name: "HeldElsewhere", record: { node: "b" } });
  const outcome = takeFailure(named);
  assert.equal(outcome.status, 503);
  assert.equal(outcome.heldBy, undefined);
  assert.equal(takeFailure(Object.assign(new Error("y"), { name: "MalformedRecord" })).status, 503);
});
