import assert from "node:assert/strict";
import { FakeClock } from "../bucket/fake_clock.ts";
import { MemoryBucket } from "../../src/bucket/memory.ts";
import type { PutOptions } from "../../src/bucket/bucket.ts";
import { createLogger } from "../../src/log.ts";
import { decodeHeartbeat, encodeHeartbeat, type Heartbeat } from "../../src/cluster/heartbeat.ts";
import { leaseTiming } from "../../src/cluster/lease_timing.ts";
import type { HeartbeatDescription } from "../../src/cluster/heartbeat_writes.ts";
import type { NodeLeaseLost } from "../../src/cluster/lease_loss.ts";
import { type LeaseChangeCause, NodeLease } from "../../src/cluster/node_lease.ts";

const KEY = "nodes/a";
const TOKEN = "0123456789abcdef";
const timing = leaseTiming();

const description: HeartbeatDescription = {
  address: "http://a:8080",
  readsSecrets: false,
  takesMoved: true,
  version: "0.3.0",
  state: "serving",
};

/** A put as the bucket received it, and how it ended. */
interface PutRecord {
  at: number;
  heartbeat: Heartbeat;
  options: PutOptions;
  result?: string;
  error?: string;
}

/** A memory bucket that records every put. */
class RecordingBucket extends MemoryBucket {
  readonly puts: PutRecord[] = [];
  constructor(readonly clock: FakeClock) {
    super({ clock });
  }
  /** A write of another writer, not recorded. */
  other(key: string, body: Uint8Array, options: PutOptions = {}) {
    return super.put(key, body, options);
  }
  override async put(key: string, body: Uint8Array, options: PutOptions = {}) {
    const record: PutRecord = {
      at: this.clock.now(),
      heartbeat: decodeHeartbeat(body, key),
      options: { ifMatch: options.ifMatch, ifNoneMatch: options.ifNoneMatch },
    };
    this.puts.push(record);
    try {
      const answer = await super.put(key, body, options);
      record.result = answer.etag;
      return answer;
    } catch (e) {
      record.error = (e as Error).name;
      throw e;
    }
  }
}

/** A lease on a fresh bucket and clock, recording its callbacks and logs. */
function setup() {
  const clock = new FakeClock();
  const t0 = clock.now();
  const bucket = new RecordingBucket(clock);
  const changes: [number, boolean][] = [];
  /** Why each change happened, in order. */
  const causes: LeaseChangeCause[] = [];
  const losses: NodeLeaseLost[] = [];
  const extended: number[] = [];
  const lines: string[] = [];
  const log = createLogger({ level: "debug", sink: (l) => lines.push(l), now: () => clock.now() });
  const lease = new NodeLease({
    bucket,
    clock,
    log,
    nodeId: "a",
    processToken: TOKEN,
    timing,
    describe: () => description,
    onChange: (valid, cause) => {
      changes.push([clock.now() - t0, valid]);
      causes.push(cause);
    },
    onLost: (reason) => losses.push(reason),
    onExtended: (validUntil) => extended.push(validUntil),
  });
  const since = (t: number) => t - t0;
  return { clock, t0, bucket, lease, changes, causes, losses, extended, lines, since };
}

async function stored(bucket: MemoryBucket): Promise<Heartbeat> {
  return decodeHeartbeat((await bucket.get(KEY))!.body, KEY);
}

/** Another node's fence of `nodes/a`: its lines kept, line 5 `fenced b`. */
async function fence(bucket: RecordingBucket): Promise<void> {
  const current = (await bucket.get(KEY))!;
  const heartbeat = decodeHeartbeat(current.body, KEY);
  await bucket.other(KEY, encodeHeartbeat({ ...heartbeat, lease: "fenced", fencedBy: "b" }), {
    ifMatch: current.etag,
  });
}

Deno.test("node lease: written at start, then every period, each If-Match the last ETag", async () => {
  const { clock, t0, bucket, lease, changes, extended, since } = setup();
  await lease.start(undefined);
  assert.equal(lease.valid(), true);
  await clock.advance(9_000);
  assert.deepEqual(bucket.puts.map((p) => since(p.at)), [0, 3_000, 6_000, 9_000]);
  assert.deepEqual(bucket.puts[0].options, { ifMatch: undefined, ifNoneMatch: "*" });
  for (let i = 1; i < bucket.puts.length; i++) {
    assert.deepEqual(bucket.puts[i].options, {
      ifMatch: bucket.puts[i - 1].result,
      ifNoneMatch: undefined,
    });
  }
  for (const put of bucket.puts) {
    assert.equal(put.heartbeat.at, put.at, "line 4 is the clock's now() at the send");
    assert.equal(put.heartbeat.lease, "live");
    assert.equal(put.heartbeat.process, TOKEN);
    assert.equal(put.heartbeat.nodeId, "a");
    assert.equal(put.heartbeat.address, "http://a:8080");
  }
  assert.equal(lease.etag, (await bucket.head(KEY))!.etag);
  assert.equal(lease.validUntil, t0 + 9_000 + timing.validMs);
  // Each landed write told, with the lease's new end.
  assert.deepEqual(extended, [0, 3_000, 6_000, 9_000].map((t) => t0 + t + timing.validMs));
  assert.deepEqual(changes, [[0, true]]);
  assert.equal(lease.validSince, t0);
  lease.close();
});

Deno.test("node lease: the first write is If-Match the ETag the start check read last", async () => {
  const { clock, bucket, lease } = setup();
  const before = await bucket.put(
    KEY,
    encodeHeartbeat({
      ...description,
      format: 2,
      nodeId: "a",
      process: "old-process",
      at: clock.now() - 20_000,
      lease: "released",
    }),
  );
  bucket.puts.length = 0;
  await lease.start({ etag: before.etag });
  assert.deepEqual(bucket.puts[0].options, { ifMatch: before.etag, ifNoneMatch: undefined });
  assert.equal(lease.valid(), true);
  assert.equal((await stored(bucket)).process, TOKEN);
  lease.close();
});

Deno.test("node lease: valid exactly validMs after the first write was sent, not answered", async () => {
  const { clock, t0, bucket, lease, changes } = setup();
  bucket.faults = {
    latencyMs: { min: 400, max: 400 },
    // Every renewal fails: only the first write counts.
    outages: [{ from: t0 + 1_000, until: t0 + 60_000 }],
  };
  await clock.runUntilSettled(lease.start(undefined));
  assert.equal(clock.now(), t0 + 400);
  assert.equal(lease.validUntil, t0 + timing.validMs);
  assert.deepEqual(changes, [[400, true]]);
  assert.equal(lease.validSince, t0 + 400);
  await clock.advance(timing.validMs - 400 - 1);
  assert.equal(lease.valid(), true);
  assert.deepEqual(changes, [[400, true]]);
  await clock.advance(1);
  assert.equal(lease.valid(), false);
  assert.deepEqual(changes, [[400, true], [timing.validMs, false]]);
  lease.close();
});

Deno.test("node lease: an 8 s outage expires it at the moment, a later write renews it", async () => {
  const { clock, t0, bucket, lease, changes, causes, lines, since } = setup();
  bucket.faults = { outages: [{ from: t0 + 1_000, until: t0 + 11_000 }] };
  await lease.start(undefined);
  await clock.advance(7_999);
  assert.equal(lease.valid(), true);
  await clock.advance(1);
  assert.equal(lease.valid(), false, "expired at 8 s by its timer, between two writes");
  assert.deepEqual(changes, [[0, true], [8_000, false]]);
  await clock.advance(4_000);
  assert.deepEqual(bucket.puts.map((p) => [since(p.at), p.error]), [
    [0, undefined],
    [3_000, "BucketUnavailable"],
    [6_000, "BucketUnavailable"],
    [9_000, "BucketUnavailable"],
    [12_000, undefined],
  ]);
  assert.deepEqual(changes, [[0, true], [8_000, false], [12_000, true]]);
  assert.deepEqual(causes, ["landed", "expired", "landed"]);
  assert.equal(lease.valid(), true);
  assert.equal(lease.validSince, t0 + 12_000);
  assert.equal(lease.validUntil, t0 + 12_000 + timing.validMs);
  // The write after the outage is still If-Match the last acknowledged ETag.
  assert.equal(bucket.puts[4].options.ifMatch, bucket.puts[0].result);
  assert.equal(lines.filter((l) => l.includes("WARN  heartbeat write failed")).length, 1);
  assert.ok(lines.some((l) => l.includes("node lease expired")));
  lease.close();
});

Deno.test("node lease: a write without an answer leaves the lease as it was", async () => {
  const { clock, t0, bucket, lease, changes, since } = setup();
  await lease.start(undefined);
  await clock.advance(2_999);
  bucket.faults = { timeoutRate: 1 };
  await clock.advance(1);
  bucket.faults = {};
  await clock.advance(timing.writeTimeoutMs);
  assert.equal(bucket.puts[1].error, "DeadlineExceeded");
  assert.equal(lease.validUntil, t0 + timing.validMs);
  await clock.advance(6_000 - 3_000 - timing.writeTimeoutMs);
  // The next renewal is a period after the silent one was sent, If-Match the same ETag.
  assert.deepEqual(bucket.puts.map((p) => since(p.at)), [0, 3_000, 6_000]);
  assert.equal(bucket.puts[2].options.ifMatch, bucket.puts[0].result);
  assert.equal(lease.validUntil, t0 + 6_000 + timing.validMs);
  assert.deepEqual(changes, [[0, true]]);
  lease.close();
});

Deno.test("node lease: a fence makes the next write fail: onLost once, no write after", async () => {
  const { clock, bucket, lease, changes, causes, losses, since } = setup();
  await lease.start(undefined);
  await clock.advance(4_000);
  await fence(bucket);
  const puts = bucket.puts.length;
  await clock.advance(2_000);
  assert.equal(bucket.puts.at(-1)!.error, "PreconditionFailed");
  assert.equal(losses.length, 1);
  assert.equal(losses[0].kind, "fenced");
  assert.equal(losses[0].heartbeat?.fencedBy, "b");
  assert.equal(losses[0].message, "the node lease nodes/a was lost: node b fenced it");
  assert.equal(losses[0].detail, "node b fenced it");
  assert.deepEqual(changes, [[0, true], [6_000, false]]);
  assert.deepEqual(causes, ["landed", "lost"]);
  assert.equal(lease.valid(), false);
  assert.equal(lease.state, "lost");
  await clock.advance(60_000);
  assert.equal(bucket.puts.length, puts + 1, "no write after the refused one");
  assert.deepEqual(bucket.puts.map((p) => since(p.at)), [0, 3_000, 6_000]);
  assert.equal(losses.length, 1);
  assert.equal((await stored(bucket)).lease, "fenced");
  assert.equal(await lease.release(), false, "nothing to release once lost");
  lease.close();
});

Deno.test("node lease: a deleted heartbeat is lost at the next write", async () => {
  const { clock, bucket, lease, changes, losses } = setup();
  await lease.start(undefined);
  await clock.advance(4_000);
  await bucket.delete(KEY);
  await clock.advance(1_999);
  assert.equal(losses.length, 0);
  await clock.advance(1);
  assert.equal(losses.length, 1);
  assert.equal(losses[0].kind, "deleted");
  assert.deepEqual(changes, [[0, true], [6_000, false]]);
  assert.equal(await bucket.head(KEY), null, "the lease does not recreate it");
  await clock.advance(30_000);
  assert.equal(await bucket.head(KEY), null);
  lease.close();
});

Deno.test("node lease: another process's object refuses the first write", async () => {
  const { clock, bucket, lease, losses, changes } = setup();
  // Written after the check saw no object: the first write's If-None-Match is refused.
  await bucket.put(
    KEY,
    encodeHeartbeat({
      ...description,
      format: 2,
      nodeId: "a",
      process: "other",
      at: clock.now(),
      lease: "live",
      address: "http://elsewhere:8080",
    }),
  );
  await lease.start(undefined);
  assert.equal(losses.length, 1);
  assert.equal(losses[0].kind, "another-writer");
  assert.match(losses[0].message, /process other/);
  assert.match(losses[0].message, /http:\/\/elsewhere:8080/);
  assert.deepEqual(changes, [], "never valid, so no change");
  assert.equal((await stored(bucket)).process, "other");
});

/** A heartbeat of node `a` written by another process. */
function othersHeartbeat(fields: Pick<Heartbeat, "process" | "at" | "lease"> & Partial<Heartbeat>) {
  return encodeHeartbeat({ ...description, format: 2, nodeId: "a", ...fields });
}

/** The previous process's live heartbeat, as the start check saw it last (20 s old). */
async function previousProcess(bucket: RecordingBucket, clock: FakeClock) {
  const at = clock.now() - 20_000;
  const { etag } = await bucket.other(
    KEY,
    othersHeartbeat({ process: "old-process", at, lease: "live" }),
  );
  return { etag, predecessor: { process: "old-process", at } };
}

Deno.test("node lease: a peer's fence of the previous process after the start check does not stop the new one", async () => {
  const { clock, bucket, lease, losses, lines } = setup();
  const checked = await previousProcess(bucket, clock);
  // The check passed on the dead process's heartbeat; node c fences that process before the first write.
  const current = (await bucket.get(KEY))!;
  await bucket.other(
    KEY,
    encodeHeartbeat({ ...decodeHeartbeat(current.body, KEY), lease: "fenced", fencedBy: "c" }),
    { ifMatch: current.etag },
  );
  const fenced = (await bucket.head(KEY))!.etag;
  await lease.start(checked);
  assert.deepEqual(losses, []);
  assert.equal(lease.valid(), true);
  assert.deepEqual(bucket.puts.map((p) => [p.options.ifMatch, p.error]), [
    [checked.etag, "PreconditionFailed"],
    [fenced, undefined],
  ]);
  const now = await stored(bucket);
  assert.equal(now.process, TOKEN);
  assert.equal(now.lease, "live");
  assert.ok(lines.some((l) => l.includes("the previous process's heartbeat was fenced")));
  lease.close();
});

Deno.test("node lease: a fence of another process than the one the start check saw stops the new one", async () => {
  const { clock, bucket, lease, losses } = setup();
  const checked = await previousProcess(bucket, clock);
  await bucket.other(
    KEY,
    othersHeartbeat({ process: "third-process", at: clock.now(), lease: "fenced", fencedBy: "c" }),
  );
  await lease.start(checked);
  assert.equal(losses.length, 1);
  assert.equal(losses[0].kind, "fenced");
  assert.equal(lease.valid(), false);
  assert.equal(bucket.puts.length, 1);
});

Deno.test("node lease: the previous process writing live after the start check stops the new one", async () => {
  const { clock, bucket, lease, losses } = setup();
  const checked = await previousProcess(bucket, clock);
  await bucket.other(
    KEY,
    othersHeartbeat({ process: "old-process", at: clock.now(), lease: "live" }),
  );
  await lease.start(checked);
  assert.equal(losses.length, 1);
  assert.equal(losses[0].kind, "another-writer");
  assert.equal(bucket.puts.length, 1);
});

Deno.test("node lease: release writes released, keeping line 4 of the last live write", async () => {
  const { clock, t0, bucket, lease, changes, causes, since } = setup();
  await lease.start(undefined);
  await clock.advance(4_000);
  const lastLive = bucket.puts.at(-1)!;
  assert.equal(await lease.release(), true);
  const release = bucket.puts.at(-1)!;
  assert.equal(since(release.at), 4_000);
  assert.equal(release.heartbeat.lease, "released");
  assert.equal(release.heartbeat.at, t0 + 3_000);
  assert.equal(release.options.ifMatch, lastLive.result);
  assert.equal((await stored(bucket)).lease, "released");
  assert.equal((await stored(bucket)).at, t0 + 3_000);
  assert.equal(lease.valid(), false);
  assert.equal(lease.state, "released");
  assert.deepEqual(changes, [[0, true], [4_000, false]]);
  assert.deepEqual(causes, ["landed", "released"], "a release is not an expiry");
  const puts = bucket.puts.length;
  await clock.advance(30_000);
  assert.equal(bucket.puts.length, puts, "no renewal after the release");
  lease.close();
});

Deno.test("node lease: release waits for a renewal in flight and keeps its line 4", async () => {
  const { clock, t0, bucket, lease } = setup();
  await lease.start(undefined);
  bucket.faults = { latencyMs: { min: 500, max: 500 } };
  await clock.advance(3_100);
  const released = lease.release();
  assert.equal(await clock.runUntilSettled(released), 900);
  assert.equal(await released, true);
  bucket.faults = {};
  assert.deepEqual(bucket.puts.map((p) => [p.heartbeat.lease, p.at - t0]), [
    ["live", 0],
    ["live", 3_000],
    ["released", 3_500],
  ]);
  assert.equal((await stored(bucket)).at, t0 + 3_000);
  lease.close();
});

Deno.test("node lease: a landed write whose answer was lost is ours: it goes on from it", async () => {
  const { clock, t0, bucket, lease, changes, losses, lines, since } = setup();
  await lease.start(undefined);
  await clock.advance(2_999);
  bucket.faults = { lostAnswerRate: 1 };
  await clock.advance(1);
  bucket.faults = {};
  assert.equal(bucket.puts[1].error, "BucketUnavailable");
  assert.equal((await stored(bucket)).at, t0 + 3_000, "it landed");
  const landed = (await bucket.head(KEY))!.etag;
  const first = bucket.puts[0].result;
  assert.equal(lease.validUntil, t0 + timing.validMs, "an unanswered write does not renew");
  await clock.advance(3_000);
  // The renewal If-Match the first ETag is refused by our own landed write:
  // read back, recognised, sent again If-Match that write's ETag.
  assert.deepEqual(bucket.puts.map((p) => [since(p.at), p.options.ifMatch, p.error]), [
    [0, undefined, undefined],
    [3_000, first, "BucketUnavailable"],
    [6_000, first, "PreconditionFailed"],
    [6_000, landed, undefined],
  ]);
  assert.equal(losses.length, 0);
  assert.deepEqual(changes, [[0, true]]);
  assert.equal(lease.validUntil, t0 + 6_000 + timing.validMs);
  assert.equal((await stored(bucket)).at, t0 + 6_000);
  assert.ok(lines.some((l) => l.includes("answer was lost had landed")));
  await clock.advance(3_000);
  assert.equal(bucket.puts.at(-1)!.error, undefined, "renewals go on");
  lease.close();
});

Deno.test("node lease: a landed write whose answer was lost, then fenced: lost", async () => {
  const { clock, bucket, lease, losses } = setup();
  await lease.start(undefined);
  await clock.advance(2_999);
  bucket.faults = { lostAnswerRate: 1 };
  await clock.advance(1);
  bucket.faults = {};
  await fence(bucket);
  await clock.advance(3_000);
  assert.equal(losses.length, 1);
  assert.equal(losses[0].kind, "fenced");
  assert.equal(bucket.puts.length, 3, "no resend after a fence");
  lease.close();
});

Deno.test("node lease: a lost answer of the release still counts as released on read-back", async () => {
  const { clock, t0, bucket, lease, losses } = setup();
  await lease.start(undefined);
  await clock.advance(2_999);
  bucket.faults = { lostAnswerRate: 1 };
  await clock.advance(1); // the renewal at 3 s lands, its answer lost
  bucket.faults = {};
  // The release is refused by that write, reads it back, and releases from it.
  assert.equal(await lease.release(), true);
  assert.equal(losses.length, 0);
  const heartbeat = await stored(bucket);
  assert.equal(heartbeat.lease, "released");
  assert.equal(heartbeat.at, t0 + 3_000, "line 4 of the landed live write");
  lease.close();
});

Deno.test("node lease: close stops renewals and callbacks", async () => {
  const { clock, bucket, lease, changes } = setup();
  await lease.start(undefined);
  lease.close();
  await clock.advance(30_000);
  assert.equal(bucket.puts.length, 1);
  assert.deepEqual(changes, [[0, true]]);
  assert.equal(lease.valid(), false);
  assert.equal(lease.state, "closed");
});
