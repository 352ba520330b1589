import assert from "node:assert/strict";
import type { DeleteOptions } from "../../src/bucket/bucket.ts";
import { BucketUnavailable } from "../../src/bucket/errors.ts";
import { actorPrefix } from "../../src/bucket/keys.ts";
import { MemoryBucket } from "../../src/bucket/memory.ts";
import { CHECKSUM_FLAG } from "../../src/ltx/checksum.ts";
import {
  collectHistory,
  type CollectOptions,
  ERASE_RETRY_PAUSE_MS,
  ERASE_TRIES,
  eraseHistory,
} from "../../src/replication/collect.ts";
import { baseKey, deletedKey, walFileKey } from "../../src/replication/history.ts";
import { ReadLimiter } from "../../src/replication/read_limiter.ts";
import { restoreActor } from "../../src/replication/restore.ts";
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
