import nodeAssert from "node:assert/strict";
import { assert, AssertionError } from "../src/assert.ts";
import { BucketRequestError, BucketUnavailable, PreconditionFailed } from "../src/bucket/errors.ts";
import { DeadlineExceeded } from "../src/bucket/timers.ts";
import { HeldElsewhere, MalformedRecord, TakeNotAllowed } from "../src/cluster/ownership.ts";
import { NodeLeaseLost } from "../src/cluster/lease_loss.ts";
import { ProtocolError } from "../src/actors/protocol.ts";
import { LocalStore } from "../src/actors/actor_store.ts";
import { ReplicationFailed } from "../src/replication/uploader.ts";
import { HistoryError } from "../src/replication/history.ts";
import { RestoreUnavailable } from "../src/replication/restore.ts";
import { ActorDatabase } from "../src/sqlite/actor_database.ts";
import { describeError } from "../src/describe_error.ts";
import { UsageError } from "../cli/args.ts";

const KEY = "owners/default/counter/a";
const RECORD = {
  version: 1 as const,
  node: "b",
  process: "p",
  generation: 1n,
  state: "held" as const,
  at: 0,
};

/** One of each operational error: what a caller may meet and handle. */
const OPERATIONAL: Error[] = [
  new BucketUnavailable("GET nodes/a: no answer", { ambiguous: false }),
  new BucketRequestError("PUT probe/x: 403 AccessDenied", { status: 403 }),
  new PreconditionFailed(KEY, "ifMatch"),
  new DeadlineExceeded("the deadline passed"),
  new HeldElsewhere(KEY, RECORD),
  new MalformedRecord(KEY, "not JSON"),
  new TakeNotAllowed(KEY),
  new NodeLeaseLost("nodes/a", "fenced"),
  new ProtocolError("a frame without a type"),
  new ReplicationFailed("the upload failed"),
  new HistoryError("gap", "a gap after TXID 3"),
  new RestoreUnavailable("the bucket did not answer"),
  new UsageError("--listen must be HOST:PORT"),
];

Deno.test("assert: returns when the condition holds, raises an AssertionError naming the invariant when not", () => {
  assert(true, "unused");
  assert(1, "unused");
  nodeAssert.throws(() => assert(false, "a hold's generation is positive"), (error) => {
    nodeAssert.ok(error instanceof AssertionError);
    nodeAssert.ok(error instanceof Error);
    nodeAssert.equal(error.name, "AssertionError");
    nodeAssert.equal(error.message, "invariant violated: a hold's generation is positive");
    nodeAssert.equal(describeError(error, "named"), `AssertionError: ${error.message}`);
    return true;
  });
  for (const falsy of [0, "", null, undefined, NaN]) {
    nodeAssert.throws(() => assert(falsy, "held"), AssertionError);
  }
});

Deno.test("AssertionError: no operational error is one, and it is none of them", () => {
  const violation = new AssertionError("x");
  for (const error of OPERATIONAL) {
    nodeAssert.equal(error instanceof AssertionError, false, error.name);
    nodeAssert.equal(violation instanceof (error.constructor as typeof Error), false, error.name);
    nodeAssert.notEqual(error.name, violation.name);
    nodeAssert.equal(error.message.startsWith("invariant violated: "), false, error.name);
  }
  // node:assert's own error shares the name, not the class.
  const theirs = catchOf(() => nodeAssert.ok(false));
  nodeAssert.equal(theirs?.name, "AssertionError");
  nodeAssert.equal(theirs instanceof AssertionError, false);
});

Deno.test("invariants of the code raise AssertionError: a database used against its mode, a local durable write", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const replicated = new ActorDatabase(`${dir}/r.db`);
    const local = new ActorDatabase(`${dir}/l.db`, { mode: "local" });
    try {
      nodeAssert.throws(() => replicated.syncToDisk(), AssertionError);
      nodeAssert.throws(() => local.readPage(1), AssertionError);
      // The local store tells the actor of a disk that failed, never of a bug
      // of ours: that one goes on as what it is.
      const store = new LocalStore();
      nodeAssert.throws(
        () => store.execDurable(replicated, () => replicated.exec("CREATE TABLE t(x)", [])),
        AssertionError,
      );
    } finally {
      replicated.close();
      local.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

function catchOf(run: () => void): Error | undefined {
  try {
    run();
  } catch (error) {
    return error as Error;
  }
  return undefined;
}
