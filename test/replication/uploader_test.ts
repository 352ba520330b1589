import assert from "node:assert/strict";
import { AssertionError } from "../../src/assert.ts";
import { BucketUnavailable, PreconditionFailed } from "../../src/bucket/errors.ts";
import { actorPrefix } from "../../src/bucket/keys.ts";
import { MemoryBucket } from "../../src/bucket/memory.ts";
import { setImmediate } from "node:timers";
import { CHECKSUM_FLAG, databaseChecksum } from "../../src/ltx/checksum.ts";
import { decodeLtx } from "../../src/ltx/decoder.ts";
import {
  baseKey,
  decodeBase,
  decodeDeleted,
  deletedKey,
  encodeDeleted,
  walFileKey,
} from "../../src/replication/history.ts";
import {
  ActorUploader,
  type ActorUploaderOptions,
  ReplicationFailed,
  SNAPSHOT_PAGES_PER_TURN,
} from "../../src/replication/uploader.ts";
import { FakeClock } from "../bucket/fake_clock.ts";
import { verifyLtxChainBytes } from "../helpers/ltx_verify.ts";
import {
  chainFrom,
  chainFromNewestSnapshot,
  HandMadeDb,
  LiveDb,
  RecordingLogger,
  SpyBucket,
  storedFiles,
} from "./commits.ts";
import { ACTOR } from "./source_db.ts";

const SNAPSHOT_FAILURES = "wasmkeep_snapshot_upload_failures_total";

/** The spec's wait before a failed periodic snapshot is tried again. */
const SNAPSHOT_RETRY_MS = 30_000;

/** An uploader over a spied memory bucket on a fake clock, and what it reported. */
class Harness {
  readonly clock: FakeClock;
  readonly memory: MemoryBucket;
  readonly bucket: SpyBucket;
  readonly log = new RecordingLogger();
  readonly failures: unknown[] = [];
  readonly counts = new Map<string, number>();
  readonly snapshots: bigint[] = [];
  uploader: ActorUploader;

  constructor(options: Partial<ActorUploaderOptions> & { latencyMs?: number } = {}) {
    this.clock = new FakeClock();
    const { latencyMs, ...overrides } = options;
    this.memory = new MemoryBucket({
      clock: this.clock,
      faults: latencyMs ? { latencyMs: { min: latencyMs, max: latencyMs } } : {},
    });
    this.bucket = new SpyBucket(this.memory);
    this.uploader = this.newUploader(overrides);
  }

  /** Another uploader over the same bucket and clock, reporting here. */
  newUploader(overrides: Partial<ActorUploaderOptions> = {}): ActorUploader {
    return new ActorUploader({
      bucket: this.bucket,
      clock: this.clock,
      log: this.log,
      actor: ACTOR,
      nodeId: "a",
      generation: 1n,
      start: { txid: 0n, checksum: CHECKSUM_FLAG },
      lastSnapshotTxid: 0n,
      onFailure: (error) => this.failures.push(error),
      count: (name, by = 1) => this.counts.set(name, (this.counts.get(name) ?? 0) + by),
      onSnapshot: (txid) => this.snapshots.push(txid),
      ...overrides,
    });
  }

  /** The PUTs sent, as short names ("g1 base", "g1 2-4", "deleted"), in order. */
  puts(): string[] {
    return this.bucket.keys("put").map(short);
  }

  /** Runs the fake clock until `promise` settles; returns how long that took. */
  run(promise: Promise<unknown>): Promise<number> {
    return this.clock.runUntilSettled(promise);
  }

  /** Runs the fake clock until `promise` settles; resolves to its value. */
  async settle<T>(promise: Promise<T>): Promise<T> {
    await this.run(promise);
    return await promise;
  }

  /** Every LTX file of the actor in the bucket (read past any latency). */
  files() {
    return this.settle(storedFiles(this.memory, ACTOR));
  }

  /** An object's bytes (read past any latency). */
  async object(key: string): Promise<Uint8Array> {
    const got = await this.settle(this.memory.get(key));
    assert.ok(got, `${key} is in the bucket`);
    return got.body;
  }
}

/** `g<gen> base`, `g<gen> <min>-<max>` (decimal) or `deleted`. */
function short(key: string): string {
  const rest = key.slice(actorPrefix(ACTOR).length);
  const m = /^wal\/([0-9a-f]{16})\/(?:(base)|([0-9a-f]{16})-([0-9a-f]{16})\.ltx)$/.exec(rest);
  if (!m) return rest;
  const gen = BigInt(`0x${m[1]}`);
  return m[2] ? `g${gen} base` : `g${gen} ${BigInt(`0x${m[3]}`)}-${BigInt(`0x${m[4]}`)}`;
}

/** A periodic snapshot's key: min TXID 1 and max TXID above 1. */
function isPeriodicSnapshot(key: string): boolean {
  const m = /\/0000000000000001-([0-9a-f]{16})\.ltx$/.exec(key);
  return m !== null && BigInt(`0x${m[1]}`) > 1n;
}

const refused = (key: string) =>
  new BucketUnavailable(`PUT ${key}: 503 (test)`, { ambiguous: false, status: 503 });

/** Pushes `n` commits of one page each, each awaited until it landed. */
async function writeLanded(h: Harness, db: HandMadeDb, n: number): Promise<void> {
  for (let i = 0; i < n; i++) {
    const commit = db.commit([1 + (i % Math.max(1, db.size))]);
    h.uploader.push(commit);
    await h.uploader.uploaded(commit.txid);
  }
}

Deno.test("uploader: the base is written once, create-only, before the first file, and says where the hold started", async () => {
  const h = new Harness();
  const db = new HandMadeDb();
  for (const pages of [[1, 2, 3], [2], [3, 4]]) {
    const commit = db.commit(pages);
    h.uploader.push(commit);
    await h.uploader.uploaded(commit.txid);
  }
  assert.deepEqual(h.puts(), ["g1 base", "g1 1-1", "g1 2-2", "g1 3-3"]);
  for (const call of h.bucket.calls.filter((c) => c.op === "put")) {
    assert.equal((call.options as { ifNoneMatch?: string }).ifNoneMatch, "*", call.key);
  }
  const base = decodeBase(await h.object(baseKey(ACTOR, 1n)));
  assert.equal(base.generation, 1n);
  assert.equal(base.txid, 0n);
  assert.equal(base.checksum, CHECKSUM_FLAG);
  assert.equal(base.node, "a");
  assert.equal(h.uploader.landedTxid, 3n);
  assert.deepEqual(h.failures, []);
});

Deno.test("uploader: the first file from an empty database is a snapshot (min 1, pre-apply 0, every page)", async () => {
  const h = new Harness();
  const db = new HandMadeDb();
  const first = db.commit([1, 2, 3]);
  h.uploader.push(first);
  await h.uploader.uploaded(1n);
  const second = db.commit([2]);
  h.uploader.push(second);
  await h.uploader.uploaded(2n);

  const snapshot = decodeLtx(await h.object(walFileKey(ACTOR, 1n, 1n, 1n)));
  assert.equal(snapshot.header.minTxid, 1n);
  assert.equal(snapshot.header.preApplyChecksum, 0n);
  assert.deepEqual(snapshot.pages.map((p) => p.pgno), [1, 2, 3]);
  assert.equal(snapshot.postApplyChecksum, first.postApplyChecksum);
  const next = decodeLtx(await h.object(walFileKey(ACTOR, 1n, 2n, 2n)));
  assert.equal(next.header.preApplyChecksum, first.postApplyChecksum);
  assert.deepEqual(next.pages.map((p) => p.pgno), [2]);
  assert.equal(next.postApplyChecksum, second.postApplyChecksum);
  assert.deepEqual(h.snapshots, [1n]);
});

Deno.test("uploader: a hold that starts from a restored database writes that position as its base and its first file is not a snapshot", async () => {
  const db = new HandMadeDb({ afterTxid: 6n });
  db.commit([1, 2]); // TXID 7, already in the bucket under an earlier generation
  const start = db.position;
  const h = new Harness({ generation: 3n, start, lastSnapshotTxid: 7n });
  const commit = db.commit([2]);
  h.uploader.push(commit);
  await h.uploader.uploaded(8n);
  assert.deepEqual(h.puts(), ["g3 base", "g3 8-8"]);
  const base = decodeBase(await h.object(baseKey(ACTOR, 3n)));
  assert.equal(base.txid, 7n);
  assert.equal(base.checksum, start.checksum);
  const file = decodeLtx(await h.object(walFileKey(ACTOR, 3n, 8n, 8n)));
  assert.equal(file.header.preApplyChecksum, start.checksum);
  assert.deepEqual(file.pages.map((p) => p.pgno), [2]);
});

Deno.test("uploader: a base someone else already wrote gives the actor up: onFailure once, waiters rejected, nothing uploaded", async () => {
  const h = new Harness();
  await h.memory.put(baseKey(ACTOR, 1n), new TextEncoder().encode("{}"));
  const db = new HandMadeDb();
  h.uploader.push(db.commit([1]));
  const waiter = h.uploader.uploaded(1n);
  await assert.rejects(waiter, ReplicationFailed);
  assert.equal(h.failures.length, 1);
  assert.ok(h.failures[0] instanceof ReplicationFailed);
  assert.ok((h.failures[0] as Error).cause instanceof PreconditionFailed);
  assert.ok(h.uploader.failed);

  // Later pushes are ignored: nothing more is sent, no second onFailure.
  const sent = h.bucket.calls.length;
  h.uploader.push(db.commit([1]));
  await h.uploader.settled();
  assert.equal(h.bucket.calls.length, sent);
  assert.deepEqual(h.puts(), ["g1 base"]);
  await assert.rejects(h.uploader.uploaded(2n), ReplicationFailed);
  assert.equal(h.failures.length, 1);
  assert.equal(new TextDecoder().decode(await h.object(baseKey(ACTOR, 1n))), "{}");
});

Deno.test("uploader: a commit that does not follow the last TXID is refused", () => {
  const h = new Harness();
  const db = new HandMadeDb({ afterTxid: 1n });
  assert.throws(() => h.uploader.push(db.commit([1])), (error) => {
    assert.ok(error instanceof AssertionError);
    assert.match(error.message, /does not follow 0/);
    return true;
  });
});

Deno.test("uploader: commits pushed while an upload is in flight coalesce into one file spanning their TXIDs, each page once with its last content", async () => {
  const h = new Harness({ latencyMs: 50 });
  const db = new HandMadeDb();
  const c1 = db.commit([1, 2, 3]);
  h.uploader.push(c1); // its base, then 1-1, are in flight
  const c2 = db.commit([2, 3, 4]);
  const c3 = db.commit([1], 2); // shrinks: pages 3 and 4 go
  const c4 = db.commit([2, 3]); // grows again, page 3 written anew
  for (const c of [c2, c3, c4]) h.uploader.push(c);
  await h.clock.advance(50); // the base landed
  assert.deepEqual(h.puts(), ["g1 base", "g1 1-1"]);
  await h.clock.advance(50); // 1-1 landed, 2-4 in flight
  assert.equal(h.uploader.landedTxid, 1n);
  const c5 = db.commit([4]);
  h.uploader.push(c5); // behind 2-4: a file of its own
  await h.run(h.uploader.uploaded(5n));

  assert.deepEqual(h.puts(), ["g1 base", "g1 1-1", "g1 2-4", "g1 5-5"]);
  const merged = decodeLtx(await h.object(walFileKey(ACTOR, 1n, 2n, 4n)));
  assert.equal(merged.header.minTxid, 2n);
  assert.equal(merged.header.maxTxid, 4n);
  assert.equal(merged.header.commit, 3);
  assert.equal(merged.header.preApplyChecksum, c2.preApplyChecksum);
  assert.equal(merged.postApplyChecksum, c4.postApplyChecksum);
  assert.deepEqual(merged.pages.map((p) => p.pgno), [1, 2, 3]);
  const last = (pgno: number, ...commits: typeof c1[]) =>
    commits.flatMap((c) => c.pages).filter((p) => p.pgno === pgno).at(-1)!.data;
  assert.deepEqual(merged.pages[0].data, last(1, c3));
  assert.deepEqual(merged.pages[1].data, last(2, c4));
  assert.deepEqual(merged.pages[2].data, last(3, c4));

  const files = await h.files();
  const verified = await verifyLtxChainBytes(files.map((f) => f.bytes));
  assert.ok(verified.ok, verified.output);
  assert.deepEqual(verified.image, db.image());
});

Deno.test("uploader: recordDelete drops files queued behind the upload in flight, writes the marker create-only, and the next file is a snapshot", async () => {
  const h = new Harness({ latencyMs: 50 });
  const db = new HandMadeDb();
  h.uploader.push(db.commit([1, 2, 3])); // in flight
  h.uploader.push(db.commit([2])); // queued, never sent
  const waiting = h.uploader.uploaded(2n);
  const deleted = h.uploader.recordDelete(3n);
  await h.run(deleted);
  await waiting; // the delete supersedes TXID 2
  assert.deepEqual(h.puts(), ["g1 base", "g1 1-1", "deleted"]);
  const markerPut = h.bucket.calls.find((c) => c.op === "put" && c.key === deletedKey(ACTOR))!;
  assert.deepEqual(
    { ...markerPut.options, signal: undefined },
    { ifNoneMatch: "*", signal: undefined },
  );
  const marker = decodeDeleted(await h.object(deletedKey(ACTOR)));
  assert.equal(marker.generation, 1n);
  assert.equal(marker.txid, 3n);
  assert.equal(h.uploader.landedTxid, 3n);

  // The database after the delete is empty: the next file starts from nothing.
  const after = new HandMadeDb({ afterTxid: 3n });
  const c4 = after.commit([1, 2]);
  h.uploader.push(c4);
  await h.run(h.uploader.uploaded(4n));
  const c5 = after.commit([2, 3]);
  h.uploader.push(c5);
  await h.run(h.uploader.uploaded(5n));
  assert.deepEqual(h.puts().slice(3), ["g1 1-4", "g1 5-5"]);
  const snapshot = decodeLtx(await h.object(walFileKey(ACTOR, 1n, 1n, 4n)));
  assert.equal(snapshot.header.preApplyChecksum, 0n);
  assert.deepEqual(snapshot.pages.map((p) => p.pgno), [1, 2]);
  const verified = await verifyLtxChainBytes([
    await h.object(walFileKey(ACTOR, 1n, 1n, 4n)),
    await h.object(walFileKey(ACTOR, 1n, 5n, 5n)),
  ]);
  assert.ok(verified.ok, verified.output);
  assert.deepEqual(verified.image, after.image());
  assert.deepEqual(h.failures, []);
});

Deno.test("uploader: a delete over an older generation's marker replaces it conditionally on its ETag", async () => {
  const h = new Harness({ generation: 2n });
  const old = await h.memory.put(
    deletedKey(ACTOR),
    encodeDeleted({ generation: 1n, txid: 5n, node: "b", at: 0 }),
  );
  const db = new HandMadeDb({ afterTxid: 5n });
  h.uploader = h.newUploader({ generation: 2n, start: { txid: 5n, checksum: CHECKSUM_FLAG } });
  h.uploader.push(db.commit([1]));
  await h.uploader.recordDelete(7n);
  const markerPut = h.bucket.calls.find((c) => c.op === "put" && c.key === deletedKey(ACTOR))!;
  assert.equal((markerPut.options as { ifMatch?: string }).ifMatch, old.etag);
  const marker = decodeDeleted(await h.object(deletedKey(ACTOR)));
  assert.equal(marker.generation, 2n);
  assert.equal(marker.txid, 7n);
  assert.deepEqual(h.failures, []);
});

Deno.test("uploader: a delete when a newer generation's marker exists fails: onFailure once, the marker untouched", async () => {
  const h = new Harness({ generation: 2n });
  const newer = encodeDeleted({ generation: 3n, txid: 40n, node: "b", at: 0 });
  await h.memory.put(deletedKey(ACTOR), newer);
  const db = new HandMadeDb();
  h.uploader.push(db.commit([1]));
  await assert.rejects(h.uploader.recordDelete(2n), ReplicationFailed);
  assert.equal(h.failures.length, 1);
  assert.ok(h.failures[0] instanceof ReplicationFailed);
  assert.match((h.failures[0] as Error).message, /generation 3/);
  assert.deepEqual(await h.object(deletedKey(ACTOR)), newer);
  assert.ok(!h.puts().includes("deleted"));
  // Nothing more is uploaded by this hold.
  h.uploader.push(new HandMadeDb({ afterTxid: 2n }).commit([1]));
  await h.uploader.settled();
  assert.ok(!h.puts().includes("g2 1-3"));
  assert.equal(h.failures.length, 1);
});

Deno.test("uploader: a periodic snapshot is due after 64 uploads since the last snapshot, not after 63", async () => {
  const h = new Harness();
  const db = new HandMadeDb();
  h.uploader.push(db.commit([1, 2, 3]));
  await h.uploader.uploaded(1n); // the first file, a snapshot
  assert.equal(h.uploader.snapshotDue(), false);
  await writeLanded(h, db, 63);
  assert.equal(h.uploader.snapshotDue(), false);
  await writeLanded(h, db, 1);
  assert.equal(h.uploader.snapshotDue(), true);

  assert.equal(await h.uploader.snapshot(db.position, db.pageSize, db.size, db.allPages()), true);
  assert.deepEqual(h.snapshots, [1n, 65n]);
  const snapshot = decodeLtx(await h.object(walFileKey(ACTOR, 1n, 1n, 65n)));
  assert.equal(snapshot.header.preApplyChecksum, 0n);
  assert.equal(snapshot.postApplyChecksum, db.position.checksum);
  assert.equal(h.uploader.snapshotDue(), false);
  await writeLanded(h, db, 63);
  assert.equal(h.uploader.snapshotDue(), false);
  await writeLanded(h, db, 1);
  assert.equal(h.uploader.snapshotDue(), true);
  assert.equal(h.counts.get(SNAPSHOT_FAILURES), undefined);
});

Deno.test("uploader: a hold that starts 64 writes or more after the last snapshot tries one at once; fewer wait for the rest", () => {
  const db = new HandMadeDb({ afterTxid: 99n });
  db.commit([1]);
  const due = new Harness({ start: db.position, lastSnapshotTxid: 36n });
  assert.equal(due.uploader.snapshotDue(), true);
  const notYet = new Harness({ start: db.position, lastSnapshotTxid: 37n });
  assert.equal(notYet.uploader.snapshotDue(), false);
});

Deno.test("uploader: a failed periodic snapshot is tried again after 1 more write and 30 s, then 8 writes and 30 s, then every 64 writes", async () => {
  const h = new Harness();
  const db = new HandMadeDb();
  let refuse = true;
  h.bucket.refusePut = (key) => refuse && isPeriodicSnapshot(key) ? refused(key) : undefined;
  const trySnapshot = () => h.uploader.snapshot(db.position, db.pageSize, db.size, db.allPages());
  h.uploader.push(db.commit([1, 2, 3]));
  await writeLanded(h, db, 64);
  assert.equal(h.uploader.snapshotDue(), true);

  // First failure, at TXID 65: one more write and 30 s.
  const firstTry = h.clock.monotonic();
  assert.equal(await trySnapshot(), false);
  assert.deepEqual(h.uploader.schedule, {
    failures: 1,
    lastTryAt: firstTry,
    txidAtLastTry: 65n,
  });
  assert.equal(h.uploader.snapshotDue(), false);
  await h.clock.advance(SNAPSHOT_RETRY_MS);
  assert.equal(h.uploader.snapshotDue(), false, "an actor that only reads does not try again");
  await writeLanded(h, db, 1);
  assert.equal(h.uploader.snapshotDue(), true);

  // Second failure, at TXID 66: 8 writes and 30 s.
  assert.equal(await trySnapshot(), false);
  await writeLanded(h, db, 7);
  await h.clock.advance(SNAPSHOT_RETRY_MS);
  assert.equal(h.uploader.snapshotDue(), false, "7 writes are not 8");
  await writeLanded(h, db, 1);
  assert.equal(h.uploader.snapshotDue(), true);

  // Third failure, at TXID 74: 64 writes, and never within 30 s.
  assert.equal(await trySnapshot(), false);
  await writeLanded(h, db, 64);
  assert.equal(h.uploader.snapshotDue(), false, "64 writes but no time passed");
  await h.clock.advance(SNAPSHOT_RETRY_MS - 1);
  assert.equal(h.uploader.snapshotDue(), false, "1 ms short of 30 s");
  await h.clock.advance(1);
  assert.equal(h.uploader.snapshotDue(), true);

  // Fourth failure, at TXID 138: still every 64 writes.
  assert.equal(await trySnapshot(), false);
  await writeLanded(h, db, 63);
  await h.clock.advance(SNAPSHOT_RETRY_MS);
  assert.equal(h.uploader.snapshotDue(), false, "63 writes are not 64");
  await writeLanded(h, db, 1);
  assert.equal(h.uploader.snapshotDue(), true);
  assert.equal(h.uploader.schedule.failures, 4);
  assert.equal(h.uploader.schedule.txidAtLastTry, 138n);

  // Once one lands the schedule starts over: 64 uploads.
  refuse = false;
  assert.equal(await trySnapshot(), true);
  assert.deepEqual(h.uploader.schedule, { failures: 0, lastTryAt: 0, txidAtLastTry: 0n });
  assert.equal(h.uploader.snapshotDue(), false);
  await writeLanded(h, db, 63);
  assert.equal(h.uploader.snapshotDue(), false);
  await writeLanded(h, db, 1);
  assert.equal(h.uploader.snapshotDue(), true);

  // Four failures counted, one attempt each, and none of them failed a write.
  assert.equal(h.counts.get(SNAPSHOT_FAILURES), 4);
  assert.deepEqual(
    h.puts().filter((p) => /^g1 1-(?!1$)/.test(p)),
    ["g1 1-65", "g1 1-66", "g1 1-74", "g1 1-138", "g1 1-202"],
  );
  assert.deepEqual(h.failures, []);
  assert.equal(h.uploader.failed, undefined);
  assert.equal(h.uploader.landedTxid, db.position.txid);
  assert.equal(h.log.find("periodic snapshot not uploaded; tried again later").length, 4);
});

Deno.test("uploader: a remembered failure schedule carries its wait into the next hold", async () => {
  const h = new Harness();
  const db = new HandMadeDb({ afterTxid: 9n });
  db.commit([1]);
  h.uploader = h.newUploader({
    start: db.position,
    lastSnapshotTxid: 1n,
    schedule: { failures: 2, lastTryAt: h.clock.monotonic(), txidAtLastTry: 10n },
  });
  await writeLanded(h, db, 8);
  assert.equal(h.uploader.snapshotDue(), false, "8 writes but not 30 s");
  await h.clock.advance(SNAPSHOT_RETRY_MS);
  assert.equal(h.uploader.snapshotDue(), true);
});

for (
  const { label, pages, ms } of [
    { label: "under a megabyte", pages: 8, ms: 6_000 },
    { label: "of 2.5 MB", pages: 610, ms: 8_000 },
    { label: "of 7 MB", pages: 1_710, ms: 10_000 },
  ]
) {
  Deno.test(
    `uploader: a periodic snapshot ${label} the bucket leaves unanswered is given up after ${
      ms / 1000
    } s, one attempt, and fails no write`,
    async () => {
      const h = new Harness();
      const db = new HandMadeDb({ pageSize: 4096, random: true });
      h.uploader.push(db.commit(Array.from({ length: pages }, (_, i) => i + 1)));
      h.uploader.push(db.commit([1]));
      await h.uploader.uploaded(2n);
      h.bucket.hangPut = (key) => isPeriodicSnapshot(key);

      const tried = h.uploader.snapshot(db.position, db.pageSize, db.size, db.allPages());
      const behind = db.commit([2]);
      h.uploader.push(behind); // queued behind the snapshot
      const landed = h.uploader.uploaded(behind.txid);
      assert.equal(await h.run(tried), ms);
      assert.equal(await tried, false);
      await h.run(landed);
      assert.equal(h.uploader.landedTxid, 3n);
      assert.equal(h.bucket.keys("put").filter(isPeriodicSnapshot).length, 1, "one attempt");
      assert.equal(h.counts.get(SNAPSHOT_FAILURES), 1);
      assert.deepEqual(h.failures, []);
      assert.equal(h.uploader.failed, undefined);
    },
  );
}

Deno.test("uploader: a file the bucket leaves unanswered is given up after 21 s (three attempts): onFailure once, waiters rejected, later work refused", async () => {
  const h = new Harness();
  const db = new HandMadeDb();
  h.uploader.push(db.commit([1, 2]));
  await h.uploader.uploaded(1n);
  h.memory.faults = { timeoutRate: 1 };
  h.uploader.push(db.commit([1]));
  const second = h.uploader.uploaded(2n);
  await h.clock.advance(0); // 2-2 is in flight
  h.uploader.push(db.commit([2])); // queued behind
  const third = h.uploader.uploaded(3n);
  assert.equal(await h.run(second), 21_000);
  await assert.rejects(second, ReplicationFailed);
  await assert.rejects(third, ReplicationFailed);
  assert.equal(h.bucket.keys("put").filter((k) => short(k) === "g1 2-2").length, 3);
  assert.ok(!h.puts().includes("g1 3-3"));
  assert.equal(h.failures.length, 1);
  assert.ok((h.failures[0] as Error).cause instanceof BucketUnavailable);

  // The hold is over: nothing more is sent, every call says so.
  h.memory.faults = {};
  const sent = h.bucket.calls.length;
  h.uploader.push(db.commit([1]));
  h.uploader.push(db.commit([2]));
  await h.uploader.settled();
  await assert.rejects(h.uploader.uploaded(4n), ReplicationFailed);
  await assert.rejects(h.uploader.recordDelete(6n), ReplicationFailed);
  assert.equal(
    await h.uploader.snapshot(db.position, db.pageSize, db.size, db.allPages()),
    false,
  );
  assert.equal(h.uploader.snapshotDue(), false);
  assert.equal(h.bucket.calls.length, sent);
  assert.equal(h.failures.length, 1);
});

Deno.test("uploader: a file refused throughout an outage gives the actor up once", async () => {
  const h = new Harness();
  const db = new HandMadeDb();
  h.uploader.push(db.commit([1, 2]));
  await h.uploader.uploaded(1n);
  const now = h.clock.now();
  h.memory.faults = { outages: [{ from: now, until: now + 3_600_000 }] };
  h.uploader.push(db.commit([1]));
  h.uploader.push(db.commit([2]));
  await assert.rejects(h.uploader.uploaded(3n), ReplicationFailed);
  await h.uploader.settled();
  assert.equal(h.failures.length, 1);
  assert.equal(h.uploader.landedTxid, 1n);
  h.memory.faults = {};
  assert.deepEqual(await h.files().then((f) => f.map((x) => short(x.key))), [
    "g1 1-1",
  ]);
});

Deno.test("uploader: every file it wrote chains from the newest snapshot, verified independently, into the database byte for byte", async () => {
  const h = new Harness({ latencyMs: 20 });
  const live = new LiveDb();
  try {
    const event = (...sql: string[]) => {
      for (const s of sql) live.exec(s);
      h.uploader.push(live.capture());
    };
    event("CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, body BLOB)");
    for (let i = 0; i < 6; i++) {
      event(`INSERT INTO items(name, body) VALUES ('a${i}', zeroblob(300))`);
    }
    await h.run(h.uploader.uploaded(live.position.txid));
    event("INSERT INTO items(name, body) VALUES ('big', randomblob(20000))"); // overflow pages
    event("UPDATE items SET name = name || '!' WHERE id % 2 = 0");
    await h.run(h.uploader.uploaded(live.position.txid));

    const { pageSize, commit, pages } = live.allPages();
    const snapshotAt = live.position.txid;
    assert.equal(await h.settle(h.uploader.snapshot(live.position, pageSize, commit, pages)), true);

    for (let i = 0; i < 5; i++) {
      event(`INSERT INTO items(name, body) VALUES ('b${i}', randomblob(700))`);
    }
    event("DELETE FROM items WHERE name = 'big'");
    event("VACUUM"); // the database shrinks
    event("INSERT INTO items(name, body) VALUES ('last', 'x')");
    await h.run(h.uploader.settled());
    assert.equal(h.uploader.landedTxid, live.position.txid);
    assert.deepEqual(h.failures, []);

    const files = await h.files();
    assert.ok(files.some((f) => f.minTxid > 1n && f.maxTxid > f.minTxid), "some files coalesced");
    const chain = chainFromNewestSnapshot(files);
    assert.equal(chain[0].maxTxid, snapshotAt);
    const fromNewest = await verifyLtxChainBytes(chain.map((f) => f.bytes));
    assert.ok(fromNewest.ok, fromNewest.output);
    assert.deepEqual(fromNewest.image, live.image());

    // The whole history, from the first file on, rebuilds the same bytes.
    const first = files.find((f) => f.minTxid === 1n && f.maxTxid < snapshotAt)!;
    const whole = await verifyLtxChainBytes(chainFrom(first, files).map((f) => f.bytes));
    assert.ok(whole.ok, whole.output);
    assert.deepEqual(whole.image, live.image());
  } finally {
    live.close();
  }
});

Deno.test({
  name:
    "uploader: a periodic snapshot due while the first file after a delete (itself a snapshot at that TXID) is in flight does not give the actor up",
  fn: async () => {
    // Restored after a delete at TXID 100: empty, and no snapshot since TXID 0.
    const h = new Harness({
      latencyMs: 50,
      generation: 2n,
      start: { txid: 100n, checksum: CHECKSUM_FLAG },
      lastSnapshotTxid: 0n,
    });
    const db = new HandMadeDb({ afterTxid: 100n });
    // The first event writes: its file is the snapshot 1-101, in flight.
    h.uploader.push(db.commit([1, 2]));
    await h.clock.advance(10);
    // The next event starts before it landed and asks whether a snapshot is due.
    if (h.uploader.snapshotDue()) {
      await h.settle(h.uploader.snapshot(db.position, db.pageSize, db.size, db.allPages()));
    }
    h.uploader.push(db.commit([2]));
    await h.settle(h.uploader.settled());
    assert.deepEqual(h.failures, [], "a periodic snapshot is an optimisation: it fails no event");
    assert.equal(h.uploader.landedTxid, 102n);
  },
});

Deno.test("uploader: a large periodic snapshot is encoded a chunk of pages per turn of the event loop", async () => {
  const pageSize = 4096;
  const count = 2 * SNAPSHOT_PAGES_PER_TURN + 100;
  const image = new Uint8Array(count * pageSize);
  for (let i = 0; i < image.length; i += 65536) {
    crypto.getRandomValues(image.subarray(i, i + 65536));
  }
  image.fill(0, 0, 10 * pageSize); // some pages compress
  const position = { txid: 9n, checksum: databaseChecksum(image, pageSize) };
  const h = new Harness({ start: position, lastSnapshotTxid: 1n });
  // Other work of the executor: a task per turn of the event loop.
  let turns = 0;
  let watching = true;
  const turn = () => {
    turns++;
    if (watching) setImmediate(turn);
  };
  setImmediate(turn);
  const seen: number[] = [];
  function* pages() {
    for (let pgno = 1; pgno <= count; pgno++) {
      seen.push(turns);
      yield { pgno, data: image.subarray((pgno - 1) * pageSize, pgno * pageSize) };
    }
  }
  try {
    assert.equal(await h.settle(h.uploader.snapshot(position, pageSize, count, pages())), true);
  } finally {
    watching = false;
  }
  // Turns ran between chunks, never inside one: the pages are taken as encoded.
  for (let i = 1; i < count; i++) {
    const between = seen[i] > seen[i - 1];
    assert.equal(between, i % SNAPSHOT_PAGES_PER_TURN === 0, `before page ${i + 1}`);
  }
  const file = decodeLtx(await h.object(walFileKey(ACTOR, 1n, 1n, 9n)));
  assert.equal(file.pages.length, count);
  assert.equal(file.postApplyChecksum, position.checksum);
  file.pages.forEach((p, i) => {
    assert.deepEqual(p.data, image.subarray(i * pageSize, (i + 1) * pageSize), `page ${i + 1}`);
  });
  assert.deepEqual(h.snapshots, [9n]);
  assert.deepEqual(h.failures, []);
});
