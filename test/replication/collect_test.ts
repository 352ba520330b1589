import assert from "node:assert/strict";
import type { DeleteOptions, ListOptions, ListPage } from "../../src/bucket/bucket.ts";
import { BucketUnavailable } from "../../src/bucket/errors.ts";
import { actorPrefix } from "../../src/bucket/keys.ts";
import { MemoryBucket } from "../../src/bucket/memory.ts";
import { CHECKSUM_FLAG } from "../../src/ltx/checksum.ts";
import {
  COLLECT_FIRST_PAGE_KEYS,
  collectHistory,
  type CollectOptions,
  ERASE_RETRY_PAUSE_MS,
  ERASE_TRIES,
  eraseHistory,
} from "../../src/replication/collect.ts";
import { baseKey, deletedKey, parseHistory, walFileKey } from "../../src/replication/history.ts";
import { ReadLimiter } from "../../src/replication/read_limiter.ts";
import { restoreActor } from "../../src/replication/restore.ts";
import { listObjects } from "../../src/replication/restore_reads.ts";
import { FakeClock } from "../bucket/fake_clock.ts";
import { ACTOR, inspect, putBase, putDeleted, putFile, SCHEMA, SourceDb } from "./source_db.ts";

/** A memory bucket whose deletes of some keys fail, a set number of times or always. */
class FailingDeletes extends MemoryBucket {
  failures = new Map<string, number>();
  override delete(key: string, options?: DeleteOptions): Promise<void> {
    const left = this.failures.get(key) ?? 0;
    if (left > 0) {
      this.failures.set(key, left - 1);
      return Promise.reject(new BucketUnavailable(`DELETE ${key}: 503`, { ambiguous: false }));
    }
    return super.delete(key, options);
  }
}

const key = (gen: bigint, min: bigint, max: bigint) => walFileKey(ACTOR, gen, min, max);

/**
 * Generation 1: base, snapshot 1-5, 6-7, 8-8. Generation 2 from TXID 8:
 * 9-12, 13-13, a periodic snapshot 1-13, then 14-14. Generation 1's paused
 * owner lands 9-9 and 20-20 late. Generation 1's objects are 10 s older.
 */
async function world() {
  const clock = new FakeClock();
  const bucket = new FailingDeletes({ clock });
  const source = new SourceDb();
  await putBase(bucket, 1n, 0n, CHECKSUM_FLAG);
  source.exec(SCHEMA);
  source.insert(3);
  await putFile(bucket, 1n, source.file());
  source.insert(2);
  await putFile(bucket, 1n, source.file());
  source.insert(1);
  await putFile(bucket, 1n, source.file());
  await clock.advance(10_000);
  await putBase(bucket, 2n, source.txid, source.checksum());
  await bucket.put(key(1n, 9n, 9n), new Uint8Array([1]));
  await bucket.put(key(1n, 20n, 20n), new Uint8Array([2]));
  source.insert(4);
  await putFile(bucket, 2n, source.file());
  source.insert(1);
  await putFile(bucket, 2n, source.file());
  await putFile(bucket, 2n, source.snapshot());
  source.insert(1);
  await putFile(bucket, 2n, source.file());
  await clock.advance(1_000);
  const collect = (options: Partial<CollectOptions> = {}) =>
    collectHistory({
      bucket,
      clock,
      actor: ACTOR,
      generation: 2n,
      snapshotTxid: 13n,
      retentionMs: 0,
      stillHolds: () => true,
      ...options,
    });
  const keys = async () =>
    (await bucket.list(actorPrefix(ACTOR))).objects.map((o) =>
      o.key.slice(actorPrefix(ACTOR).length)
    );
  return { clock, bucket, source, collect, keys };
}

Deno.test("collectHistory: keeps exactly what a restore needs, and the restore still matches", async () => {
  const { bucket, clock, source, collect, keys } = await world();
  const dir = Deno.makeTempDirSync({ prefix: "wasmkeep-collect-" });
  try {
    assert.deepEqual(await collect(), { deleted: 7, failed: 0 });
    assert.deepEqual(await keys(), [
      "wal/0000000000000001/0000000000000014-0000000000000014.ltx", // after the snapshot: kept
      "wal/0000000000000002/0000000000000001-000000000000000d.ltx",
      "wal/0000000000000002/000000000000000e-000000000000000e.ltx",
      "wal/0000000000000002/base",
    ]);
    const result = await restoreActor({
      bucket,
      clock,
      actor: ACTOR,
      path: `${dir}/a.db`,
      limiter: new ReadLimiter(),
    });
    assert.equal(result.txid, 14n);
    assert.equal(result.checksum, source.checksum());
    assert.deepEqual(Deno.readFileSync(`${dir}/a.db`), source.image());
    const { check, rows } = inspect(`${dir}/a.db`);
    assert.equal(check, "ok");
    assert.deepEqual(rows, source.rows());
    // A second run finds nothing more to delete.
    assert.deepEqual(await collect(), { deleted: 0, failed: 0 });
  } finally {
    source.close();
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("collectHistory: only objects older than the retention", async () => {
  const { source, collect, keys } = await world();
  try {
    // Generation 1's objects are 11 s old, generation 2's 1 s.
    assert.deepEqual(await collect({ retentionMs: 5_000 }), { deleted: 4, failed: 0 });
    const prefix = actorPrefix(ACTOR);
    const left = new Set(await keys());
    for (const gone of [key(1n, 1n, 5n), key(1n, 6n, 7n), key(1n, 8n, 8n), baseKey(ACTOR, 1n)]) {
      assert.ok(!left.has(gone.slice(prefix.length)), gone);
    }
    for (const kept of [key(1n, 9n, 9n), key(2n, 9n, 12n), key(2n, 13n, 13n)]) {
      assert.ok(left.has(kept.slice(prefix.length)), kept);
    }
    assert.deepEqual(await collect({ retentionMs: 60_000 }), { deleted: 0, failed: 0 });
  } finally {
    source.close();
  }
});

Deno.test("collectHistory: stops as soon as the node no longer holds the actor", async () => {
  const { source, collect, keys } = await world();
  try {
    const before = (await keys()).length;
    let asked = 0;
    assert.deepEqual(await collect({ stillHolds: () => ++asked <= 2 }), { deleted: 2, failed: 0 });
    assert.equal(asked, 3);
    assert.equal((await keys()).length, before - 2);
    const aborted = new AbortController();
    aborted.abort();
    await assert.rejects(collect({ signal: aborted.signal }));
  } finally {
    source.close();
  }
});

Deno.test("collectHistory: nothing without the snapshot; failed deletes are counted", async () => {
  const { bucket, source, collect, keys } = await world();
  try {
    const before = await keys();
    assert.deepEqual(await collect({ snapshotTxid: 12n }), { deleted: 0, failed: 0 });
    assert.deepEqual(await collect({ generation: 1n, snapshotTxid: 13n }), {
      deleted: 0,
      failed: 0,
    });
    assert.deepEqual(await keys(), before);
    bucket.failures.set(key(1n, 6n, 7n), 1);
    bucket.failures.set(baseKey(ACTOR, 1n), 1);
    assert.deepEqual(await collect(), { deleted: 5, failed: 2 });
    assert.deepEqual(await collect(), { deleted: 2, failed: 0 });
  } finally {
    source.close();
  }
});

/** A memory bucket that counts listing pages and the objects they returned. */
class CountingLists extends MemoryBucket {
  pages = 0;
  objects = 0;
  override async list(prefix: string, options?: ListOptions): Promise<ListPage> {
    const page = await super.list(prefix, options);
    this.pages++;
    this.objects += page.objects.length;
    return page;
  }
}

/**
 * What the rule deletes, from the whole listing (the collection as it was
 * before it walked the listing in stretches): the reference for the walk.
 */
async function ruleDeletes(
  bucket: MemoryBucket,
  g: bigint,
  n: bigint,
  cutoff: number,
): Promise<string[]> {
  const listed = await listObjects(bucket, new FakeClock(), actorPrefix(ACTOR) + "wal/");
  const history = parseHistory(listed, ACTOR);
  const snapshot = history.files.find((f) =>
    f.generation === g && f.minTxid === 1n && f.maxTxid === n
  );
  if (!snapshot) return [];
  // A later owner took the actor: it may build on any of this.
  const later = (o: { generation: bigint }) => o.generation > g;
  if (history.files.some(later) || [...history.bases.values()].some(later)) return [];
  return [
    ...history.files.filter((f) =>
      f !== snapshot && f.generation <= g && f.maxTxid <= n && f.lastModified < cutoff
    ),
    ...[...history.bases.values()].filter((b) => b.generation < g && b.lastModified < cutoff),
  ].map((o) => o.key).sort();
}

/**
 * A history as uploads make it: generations one after another, each a base,
 * then deltas of one or a few TXIDs, a snapshot every `every` uploads, one
 * upload per `stepMs`; the holder of a generation may land a few files after
 * the next one took over. Returns the last snapshot of the last generation.
 */
async function uploads(
  bucket: MemoryBucket,
  clock: FakeClock,
  random: () => number,
  generations: number,
  perGeneration: number,
  every: number,
  stepMs: number,
): Promise<{ g: bigint; n: bigint }> {
  let txid = 0n;
  let last = { g: 0n, n: 0n };
  for (let gen = 1n; gen <= BigInt(generations); gen++) {
    await bucket.put(baseKey(ACTOR, gen), new Uint8Array([1]));
    let count = 0;
    if (txid === 0n || random() < 0.3) {
      // A first file from an empty database (or an adoption): a snapshot.
      txid++;
      await bucket.put(walFileKey(ACTOR, gen, 1n, txid), new Uint8Array([1]));
      last = { g: gen, n: txid };
    }
    for (let u = 0; u < perGeneration; u++) {
      await clock.advance(stepMs);
      const min = txid + 1n;
      txid += BigInt(1 + Math.floor(random() * 3));
      await bucket.put(walFileKey(ACTOR, gen, min, txid), new Uint8Array([1]));
      if (++count % every === 0) {
        await bucket.put(walFileKey(ACTOR, gen, 1n, txid), new Uint8Array([1]));
        last = { g: gen, n: txid };
      }
    }
    if (gen > 1n && random() < 0.5) {
      // The previous holder, paused, lands a file late: after the take-over's TXID.
      await bucket.put(walFileKey(ACTOR, gen - 1n, txid + 1n, txid + 1n), new Uint8Array([1]));
    }
  }
  return last;
}

function seeded(seed: number): () => number {
  let x = seed;
  return () => (x = (Math.imul(x, 1103515245) + 12345) >>> 0) / 2 ** 32;
}

Deno.test("collectHistory: a pass over a long young history lists about one page", async () => {
  const clock = new FakeClock();
  const bucket = new CountingLists({ clock });
  // One hour of history at one upload a second: 3,600 files and 56 snapshots.
  const { g, n } = await uploads(bucket, clock, seeded(7), 1, 3_600, 64, 1_000);
  bucket.pages = 0;
  bucket.objects = 0;
  const counts = await collectHistory({
    bucket,
    clock,
    actor: ACTOR,
    generation: g,
    snapshotTxid: n,
    retentionMs: 3_600_000 + 60_000,
    stillHolds: () => true,
  });
  assert.deepEqual(counts, { deleted: 0, failed: 0 });
  // The first page, then one from the snapshot on (past the younger snapshots),
  // and one key past the generation's, to see that no later owner took it.
  assert.ok(bucket.pages <= 3, `${bucket.pages} pages`);
  assert.ok(bucket.objects <= 2 * COLLECT_FIRST_PAGE_KEYS, `${bucket.objects} objects`);

  // Ten minutes later, the oldest ten minutes go, and not much else is listed.
  await clock.advance(10 * 60_000);
  bucket.pages = 0;
  bucket.objects = 0;
  const expected = await ruleDeletes(bucket, g, n, clock.now() - 3_600_000);
  bucket.pages = 0;
  bucket.objects = 0;
  const later = await collectHistory({
    bucket,
    clock,
    actor: ACTOR,
    generation: g,
    snapshotTxid: n,
    retentionMs: 3_600_000,
    stillHolds: () => true,
  });
  assert.ok(expected.length > 500, `${expected.length}`);
  assert.deepEqual(later, { deleted: expected.length, failed: 0 });
  // Pages double while they hold something to delete: at most twice what goes, and a little.
  assert.ok(
    bucket.objects <= 2 * expected.length + 4 * COLLECT_FIRST_PAGE_KEYS,
    `${bucket.objects}`,
  );
});

Deno.test("collectHistory: deletes what the rule over the whole listing deletes", async () => {
  for (let seed = 1; seed <= 30; seed++) {
    const random = seeded(seed);
    const clock = new FakeClock();
    const bucket = new CountingLists({ clock });
    const generations = 1 + Math.floor(random() * 4);
    const every = [1, 3, 8, 64][Math.floor(random() * 4)];
    const last = await uploads(bucket, clock, random, generations, 40 + seed * 17, every, 1_000);
    // The newest snapshot, or an older one (a collection that ran late).
    const listed = await listObjects(bucket, clock, actorPrefix(ACTOR) + "wal/");
    const history = parseHistory(listed, ACTOR);
    const snapshots = history.files.filter((f) => f.minTxid === 1n);
    const pick = random() < 0.5 ? last : snapshots[Math.floor(random() * snapshots.length)];
    const g = "g" in pick ? pick.g : pick.generation;
    const n = "n" in pick ? pick.n : pick.maxTxid;
    const span = clock.now() - 1_700_000_000_000;
    const retentionMs = Math.floor(random() * 1.2 * span);
    const cutoff = clock.now() - retentionMs;
    const expected = await ruleDeletes(bucket, g, n, cutoff);
    const all = async () =>
      new Set((await listObjects(bucket, clock, actorPrefix(ACTOR))).map((o) => o.key));
    const before = await all();
    const counts = await collectHistory({
      bucket,
      clock,
      actor: ACTOR,
      generation: g,
      snapshotTxid: n,
      retentionMs,
      stillHolds: () => true,
    });
    const after = await all();
    const deleted = [...before].filter((k) => !after.has(k)).sort();
    assert.deepEqual(deleted, expected, `seed ${seed}: g ${g}, n ${n}, retention ${retentionMs}`);
    assert.deepEqual(counts, { deleted: expected.length, failed: 0 });
  }
});

Deno.test("collectHistory: files landed out of order are kept longer, never deleted early", async () => {
  for (let seed = 1; seed <= 20; seed++) {
    const random = seeded(seed);
    const clock = new FakeClock();
    const bucket = new MemoryBucket({ clock });
    await bucket.put(baseKey(ACTOR, 1n), new Uint8Array([1]));
    // Files of TXIDs 1-200 (snapshots every 16) put in a shuffled order.
    const keys = [walFileKey(ACTOR, 1n, 1n, 1n)];
    for (let t = 2n; t <= 200n; t++) {
      keys.push(walFileKey(ACTOR, 1n, t, t));
      if (t % 16n === 0n) keys.push(walFileKey(ACTOR, 1n, 1n, t));
    }
    for (let i = keys.length - 1; i > 0; i--) {
      const j = Math.floor(random() * (i + 1));
      [keys[i], keys[j]] = [keys[j], keys[i]];
    }
    for (const key of keys) {
      await clock.advance(1_000);
      await bucket.put(key, new Uint8Array([1]));
    }
    const retentionMs = Math.floor(random() * keys.length * 1_000);
    const expected = await ruleDeletes(bucket, 1n, 192n, clock.now() - retentionMs);
    const before = new Set(
      (await listObjects(bucket, clock, actorPrefix(ACTOR))).map((o) => o.key),
    );
    await collectHistory({
      bucket,
      clock,
      actor: ACTOR,
      generation: 1n,
      snapshotTxid: 192n,
      retentionMs,
      stillHolds: () => true,
    });
    const after = new Set((await listObjects(bucket, clock, actorPrefix(ACTOR))).map((o) => o.key));
    for (const key of before) {
      if (!after.has(key)) assert.ok(expected.includes(key), `seed ${seed}: ${key} deleted`);
    }
  }
});

Deno.test("eraseHistory: every generation's files and bases, whatever their age; the marker stays", async () => {
  const { bucket, clock, source, keys } = await world();
  try {
    await putDeleted(bucket, 2n, 15n);
    bucket.failures.set(key(2n, 13n, 13n), ERASE_TRIES - 1);
    const erase = eraseHistory({ bucket, clock, actor: ACTOR });
    const ms = await clock.runUntilSettled(erase);
    assert.deepEqual(await erase, { deleted: 11, failed: 0 });
    assert.equal(ms, (ERASE_TRIES - 1) * ERASE_RETRY_PAUSE_MS);
    assert.deepEqual(await keys(), ["deleted"]);
    assert.ok(await bucket.get(deletedKey(ACTOR)));
  } finally {
    source.close();
  }
});

Deno.test("eraseHistory: given the marker, keeps what was written after it; counts what will not go", async () => {
  const { bucket, clock, source, keys } = await world();
  try {
    // Generation 2 deleted the actor at TXID 13; generation 3 took it on after.
    await putDeleted(bucket, 2n, 13n);
    await putBase(bucket, 3n, 13n, CHECKSUM_FLAG);
    await bucket.put(key(3n, 1n, 14n), new Uint8Array([3]));
    bucket.failures.set(key(1n, 6n, 7n), ERASE_TRIES);
    const erase = eraseHistory({ bucket, clock, actor: ACTOR, generation: 2n, txid: 13n });
    await clock.runUntilSettled(erase);
    assert.deepEqual(await erase, { deleted: 9, failed: 1 });
    assert.deepEqual(await keys(), [
      "deleted",
      "wal/0000000000000001/0000000000000006-0000000000000007.ltx",
      "wal/0000000000000002/000000000000000e-000000000000000e.ltx",
      "wal/0000000000000003/0000000000000001-000000000000000e.ltx",
      "wal/0000000000000003/base",
    ]);
  } finally {
    source.close();
  }
});

Deno.test("eraseHistory: nothing goes when a later owner took the actor without the delete and builds on the history", async () => {
  const { bucket, clock, source, keys } = await world();
  try {
    // Generation 2 deleted the actor at 15, its marker landing late;
    // generation 3 had taken it at 14 without the marker and wrote 15.
    assert.equal(source.txid, 14n);
    await putBase(bucket, 3n, source.txid, source.checksum());
    source.insert(1, "c");
    await putFile(bucket, 3n, source.file());
    await putDeleted(bucket, 2n, 15n);
    const before = await keys();
    const erase = eraseHistory({ bucket, clock, actor: ACTOR, generation: 2n, txid: 15n });
    await clock.runUntilSettled(erase);
    assert.deepEqual(await erase, { deleted: 0, failed: 0 });
    assert.deepEqual(await keys(), before);
  } finally {
    source.close();
  }
});

/** A bucket, a source database and a scratch directory to restore the actor into. */
function restoreWorld() {
  const clock = new FakeClock();
  const bucket = new MemoryBucket({ clock });
  const source = new SourceDb();
  const dir = Deno.makeTempDirSync({ prefix: "wk-collect-restore-" });
  const restore = (name: string) =>
    restoreActor({
      bucket,
      clock,
      actor: ACTOR,
      path: `${dir}/${name}.db`,
      limiter: new ReadLimiter(),
    });
  const close = () => {
    source.close();
    Deno.removeSync(dir, { recursive: true });
  };
  return { clock, bucket, source, restore, close };
}

Deno.test("collection after a lost delete leaves a history that restores: the newest base alone shows the delete was lost", async () => {
  const { clock, bucket, source, restore, close } = restoreWorld();
  try {
    // Generation 1: a snapshot, then 70 writes (its periodic snapshots
    // failed); it deletes the actor at 73, and the marker lands late.
    await putBase(bucket, 1n, 0n, CHECKSUM_FLAG);
    source.exec(SCHEMA);
    await putFile(bucket, 1n, source.file());
    source.insert(70);
    await putFile(bucket, 1n, source.file());
    // Generation 2 takes at 72 without the marker and writes 73.
    await putBase(bucket, 2n, source.txid, source.checksum());
    source.insert(1, "b");
    await putFile(bucket, 2n, source.file());
    await putDeleted(bucket, 1n, 73n);
    // Generation 3 takes at 73, and snapshots there (71 writes since the last).
    await putBase(bucket, 3n, source.txid, source.checksum());
    await putFile(bucket, 3n, source.snapshot());
    await clock.advance(10_000);
    assert.equal((await restore("before")).checksum, source.checksum());

    // Retention 0: the bases of generations 1 and 2 go, generation 2's among them.
    const counts = await collectHistory({
      bucket,
      clock,
      actor: ACTOR,
      generation: 3n,
      snapshotTxid: 73n,
      retentionMs: 0,
      stillHolds: () => true,
    });
    assert.ok(counts.deleted >= 2, `deleted ${counts.deleted}`);
    const after = await restore("after");
    assert.equal(after.txid, 73n);
    assert.equal(after.checksum, source.checksum());
  } finally {
    close();
  }
});

Deno.test("collection by an owner whose late snapshot landed after a later owner took the actor deletes nothing", async () => {
  const { clock, bucket, source, restore, close } = restoreWorld();
  try {
    // Generation 1 wrote 1-6; generation 2 took at 6 and wrote on, with no
    // snapshot of its own yet: its chain starts at generation 1's.
    await putBase(bucket, 1n, 0n, CHECKSUM_FLAG);
    source.exec(SCHEMA);
    source.insert(3);
    await putFile(bucket, 1n, source.file());
    source.insert(2);
    await putFile(bucket, 1n, source.file());
    source.insert(1);
    await putFile(bucket, 1n, source.file());
    const taken = source.txid;
    await putBase(bucket, 2n, taken, source.checksum());
    source.insert(5);
    await putFile(bucket, 2n, source.file());
    await clock.advance(10_000);
    // Generation 1, paused meanwhile, lands a snapshot of its own write 7
    // (past generation 2's base: no restore uses it) and collects after it.
    await bucket.put(walFileKey(ACTOR, 1n, 1n, taken + 1n), new Uint8Array([1]));
    await clock.advance(1_000);
    assert.equal((await restore("before")).txid, source.txid);
    const counts = await collectHistory({
      bucket,
      clock,
      actor: ACTOR,
      generation: 1n,
      snapshotTxid: taken + 1n,
      retentionMs: 0,
      stillHolds: () => true,
    });
    assert.deepEqual(counts, { deleted: 0, failed: 0 });
    const after = await restore("after");
    assert.equal(after.txid, source.txid);
    assert.equal(after.checksum, source.checksum());
  } finally {
    close();
  }
});
