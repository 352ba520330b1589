/**
 * The bucket side of `wasmkeep cluster drain | undrain` and `actor move`:
 * which ids are refused (as `cluster status` counts live nodes), what is
 * written or deleted, and the warnings a target that may not take an actor
 * gets. The commands' output, through the real CLI, is in
 * test/node/cli/drain_move_test.ts.
 */
import assert from "node:assert/strict";
import { MemoryBucket } from "../../src/bucket/memory.ts";
import { encodeHeartbeat, type Heartbeat } from "../../src/cluster/heartbeat.ts";
import { ClusterToolRefusal } from "../../src/cluster/fence_forget.ts";
import { drainNode, undrainNode } from "../../src/handover/drain_command.ts";
import { decodeDrainRequest } from "../../src/handover/drain_request.ts";
import { moveActor, parseActorPath } from "../../src/handover/move_command.ts";
import { MOVE_REQUEST_TTL_MS, MoveRequests } from "../../src/handover/move_request.ts";

const NOW = 1_790_000_000_000;
const now = () => NOW;

function heartbeat(nodeId: string, fields: Partial<Heartbeat> = {}): Heartbeat {
  return {
    format: 2,
    nodeId,
    process: `${nodeId}-process`,
    at: NOW - 1000,
    lease: "live",
    address: `http://${nodeId}:8080`,
    app: "acme/shop",
    readsSecrets: false,
    takesMoved: true,
    version: "0.3.0",
    state: "serving",
    ...fields,
  };
}

async function bucketWith(...heartbeats: Heartbeat[]): Promise<MemoryBucket> {
  const bucket = new MemoryBucket();
  for (const h of heartbeats) await bucket.put(`nodes/${h.nodeId}`, encodeHeartbeat(h));
  return bucket;
}

async function refusal(work: Promise<unknown>): Promise<string> {
  const error = await work.then(() => undefined, (e) => e);
  assert.ok(error instanceof ClusterToolRefusal, `refused, not ${error}`);
  return error.message;
}

Deno.test("drain: a live node's request is written; an id no live node has is refused unless forced", async () => {
  const bucket = await bucketWith(
    heartbeat("b"),
    heartbeat("stale", { at: NOW - 10_000 }),
    heartbeat("gone", { lease: "released" }),
    heartbeat("cut", { lease: "fenced", fencedBy: "a" }),
  );
  const done = await drainNode(bucket, "b", { now });
  assert.equal(done.action, "requested");
  assert.equal(done.notLive, undefined);
  assert.equal(done.again, false);
  const written = await bucket.get("drains/b");
  assert.deepEqual(decodeDrainRequest(written!.body, "drains/b"), {
    version: 1,
    node: "b",
    at: NOW,
  });
  assert.equal((await drainNode(bucket, "b", { now })).again, true);

  for (
    const [id, why] of [
      ["typo", "no heartbeat nodes/typo"],
      ["stale", "its heartbeat was last written 10.0s ago"],
      ["gone", "it stopped (its heartbeat is released)"],
      ["cut", "its heartbeat is fenced"],
    ]
  ) {
    const message = await refusal(drainNode(bucket, id, { now }));
    assert.equal(
      message,
      `no live node has the id ${id} (${why}); check the id with wasmkeep cluster status, ` +
        `or give --force to write the request anyway (for a node about to start)`,
    );
    assert.equal(await bucket.head(`drains/${id}`), null, `nothing written for ${id}`);
    const forced = await drainNode(bucket, id, { now, force: true });
    assert.equal(forced.notLive, why);
    assert.ok(await bucket.head(`drains/${id}`), `written with force for ${id}`);
  }
});

Deno.test("drain: a live node that predates draining is written, and said to be", async () => {
  const bucket = await bucketWith(heartbeat("old", { takesMoved: false }), heartbeat("b"));
  assert.equal((await drainNode(bucket, "old", { now })).predatesDraining, true);
  assert.equal((await drainNode(bucket, "b", { now })).predatesDraining, false);
});

Deno.test("undrain: withdraws any request, refuses an id with neither a live node nor a request", async () => {
  const bucket = await bucketWith(heartbeat("b"));
  await drainNode(bucket, "b", { now });
  await drainNode(bucket, "later", { now, force: true });
  assert.equal((await undrainNode(bucket, "b", { now })).action, "withdrawn");
  assert.equal(await bucket.head("drains/b"), null);
  // Live with no request: nothing to do, not an error.
  assert.equal((await undrainNode(bucket, "b", { now })).action, "none");
  // No node answers to it, but its request is withdrawn without --force.
  const later = await undrainNode(bucket, "later", { now });
  assert.equal(later.action, "withdrawn");
  assert.equal(later.notLive, "no heartbeat nodes/later");
  assert.equal(await bucket.head("drains/later"), null);
  assert.match(
    await refusal(undrainNode(bucket, "later", { now })),
    /^no live node has the id later \(no heartbeat nodes\/later\) and there is no drain request drains\/later: nothing withdrawn; .*--force/,
  );
  assert.equal((await undrainNode(bucket, "later", { now, force: true })).action, "none");
});

Deno.test("actor paths: TENANT/CLASS/NAME by the actors' own rules", () => {
  assert.deepEqual(parseActorPath("acme/room/lobby"), {
    tenant: "acme",
    class: "room",
    name: "lobby",
  });
  assert.deepEqual(parseActorPath("default/counter/Alice Smith").name, "Alice Smith");
  for (
    const [path, problem] of [
      ["acme/room", /is not TENANT\/CLASS\/NAME/],
      ["acme/room/a/b", /is not TENANT\/CLASS\/NAME/],
      ["Acme/room/lobby", /the tenant 'Acme' is not a tenant's name/],
      ["acme/Room/lobby", /a class name is lower-case letters/],
      ["acme/room/..", /the name must not be '\.' or '\.\.'/],
      ["acme/room/", /the name is empty/],
      ["acme/room/a\u0000", /control characters/],
    ] as const
  ) {
    assert.throws(
      () => parseActorPath(path),
      (e) => e instanceof RangeError && problem.test(e.message),
    );
  }
});

Deno.test("move: written for a live target, refused for a dead one unless forced, warned for one that may not take it", async () => {
  const bucket = await bucketWith(
    heartbeat("c"),
    heartbeat("draining", { state: "draining" }),
    heartbeat("old", { takesMoved: false }),
    heartbeat("other", { app: "globex/shop" }),
    heartbeat("plain", { app: undefined }),
    heartbeat("dead", { at: NOW - 60_000 }),
  );
  const lobby = { tenant: "acme", class: "room", name: "lobby" };
  const moved = await moveActor(bucket, lobby, "c", { now });
  assert.deepEqual(moved.warnings, []);
  assert.equal(moved.key, "moves/acme/room/lobby");
  assert.deepEqual(moved.request, {
    version: 1,
    actor: lobby,
    to: "c",
    at: NOW,
    expires: NOW + MOVE_REQUEST_TTL_MS,
  });
  assert.deepEqual((await new MoveRequests(bucket).list()).map((m) => m.request), [moved.request]);

  const waits = "the request is written, and the owner keeps acme/room/lobby until node";
  for (
    const [to, why] of [
      ["draining", "it is draining"],
      ["old", "its version does not take moved actors"],
      ["other", "it serves another tenant (globex)"],
      ["plain", "it serves another tenant (default)"],
    ]
  ) {
    const warned = await moveActor(bucket, lobby, to, { now });
    assert.deepEqual(warned.warnings, [
      `node ${to} may not take acme/room/lobby now: ${why}; ${waits} ${to} may take it or the request expires`,
    ]);
    assert.equal((await new MoveRequests(bucket).list())[0].request.to, to);
  }
  // An actor served with --actor (tenant default) may go to a node serving --actor classes.
  const counter = { tenant: "default", class: "counter", name: "a" };
  assert.deepEqual((await moveActor(bucket, counter, "plain", { now })).warnings, []);

  for (const to of ["dead", "nobody"]) {
    assert.match(await refusal(moveActor(bucket, lobby, to, { now })), /^no live node has the id/);
    assert.equal(
      (await new MoveRequests(bucket).list()).find((m) => m.request.to === to),
      undefined,
    );
    const forced = await moveActor(bucket, lobby, to, { now, force: true });
    assert.match(forced.warnings[0], new RegExp(`^node ${to} is not live \\(`));
    assert.equal((await new MoveRequests(bucket).list())[0].request.to, to);
  }
});
