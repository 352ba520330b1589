import assert from "node:assert/strict";
import type { Bucket } from "../../src/bucket/bucket.ts";
import { MemoryBucket } from "../../src/bucket/memory.ts";
import { CHECKSUM_FLAG } from "../../src/ltx/checksum.ts";
import { ReadLimiter } from "../../src/replication/read_limiter.ts";
import {
  restoreActor,
  type RestoreResult,
  RestoreUnavailable,
} from "../../src/replication/restore.ts";
import { restoreBudgetMs } from "../../src/replication/restore_budget.ts";
import {
  readLimitMs,
  RESTORE_LIST_SILENCE_MS,
  RESTORE_READ_TRIES,
  RESTORE_RETRY_PAUSES_MS,
} from "../../src/replication/restore_reads.ts";
import { FakeClock } from "../bucket/fake_clock.ts";
import { FaultyReads } from "./fault_bucket.ts";
import { ACTOR, type BuiltFile, putBase, putFile, SCHEMA, SourceDb } from "./source_db.ts";

/** A history of `files` small files in one generation, written to `bucket`. */
async function history(bucket: Bucket, files: number): Promise<BuiltFile[]> {
  const source = new SourceDb();
  try {
    source.exec(SCHEMA);
    const built = [source.file()];
    for (let i = 1; i < files; i++) {
      source.insert(1);
      built.push(source.file());
    }
    for (const f of built) await putFile(bucket, 1n, f);
    return built;
  } finally {
    source.close();
  }
}

/** Runs a restore on the fake clock; resolves to its time and outcome. */
async function timed(
  clock: FakeClock,
  bucket: Bucket,
  limiter = new ReadLimiter(),
): Promise<{ ms: number; result?: RestoreResult; error?: unknown; dir: string }> {
  const dir = Deno.makeTempDirSync({ prefix: "wasmkeep-bounds-" });
  Deno.writeFileSync(`${dir}/a.db`, new Uint8Array([1, 2]));
  const restore = restoreActor({ bucket, clock, actor: ACTOR, path: `${dir}/a.db`, limiter });
  const ms = await clock.runUntilSettled(restore);
  const outcome = await restore.then((result) => ({ result }), (error) => ({ error }));
  return { ms, dir, ...outcome };
}

function untouched(dir: string): void {
  assert.deepEqual(Deno.readFileSync(`${dir}/a.db`), new Uint8Array([1, 2]));
  assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name), ["a.db"]);
  Deno.removeSync(dir, { recursive: true });
}

Deno.test("restore bounds: a listing the bucket is silent on is given up after 5 s", async () => {
  const clock = new FakeClock();
  const bucket = new MemoryBucket({ clock });
  await history(bucket, 2);
  bucket.faults = { timeoutRate: 1 };
  const { ms, error, dir } = await timed(clock, bucket);
  assert.ok(error instanceof RestoreUnavailable, String(error));
  assert.equal(error.status, 503);
  assert.equal(ms, RESTORE_LIST_SILENCE_MS);
  untouched(dir);
});

Deno.test("restore bounds: a silent read is abandoned and sent again, three tries", async () => {
  const clock = new FakeClock();
  const bucket = new FaultyReads(clock);
  const files = await history(bucket, 1);
  await putBase(bucket, 1n, 0n, CHECKSUM_FLAG);
  bucket.reads = { silent: true };
  const { ms, error, dir } = await timed(clock, bucket);
  assert.ok(error instanceof RestoreUnavailable, String(error));
  // The base is read first: under a megabyte in flight, 6 s a try.
  assert.equal(bucket.gets, RESTORE_READ_TRIES);
  assert.equal(ms, RESTORE_READ_TRIES * readLimitMs(1));
  assert.ok(ms <= restoreBudgetMs(1 + files.length, files[0].bytes.length + 200));
  untouched(dir);
});

Deno.test("restore bounds: a refused read is sent again after 0.5 s, then 1 s", async () => {
  const clock = new FakeClock();
  const bucket = new FaultyReads(clock);
  await history(bucket, 1);
  bucket.reads = { refuseAll: true };
  const failed = await timed(clock, bucket);
  assert.ok(failed.error instanceof RestoreUnavailable, String(failed.error));
  assert.equal(bucket.gets, 3);
  assert.equal(failed.ms, RESTORE_RETRY_PAUSES_MS[0] + RESTORE_RETRY_PAUSES_MS[1]);
  untouched(failed.dir);

  bucket.reads = { refuseFirst: 2 };
  bucket.gets = 0;
  const passed = await timed(clock, bucket);
  assert.equal(passed.result?.outcome, "restored");
  assert.equal(passed.ms, 1_500);
  Deno.removeSync(passed.dir, { recursive: true });
});

Deno.test("restore bounds: the reads of one restore have 30 s plus 1 s per MB and per eight files", async () => {
  const clock = new FakeClock();
  const bucket = new FaultyReads(clock);
  const files = await history(bucket, 100);
  // Each read answers within its own limit, but eight at a time they need 13 x 4.5 s.
  bucket.reads = { latencyMs: 4_500 };
  const { ms, error, dir } = await timed(clock, bucket);
  assert.ok(error instanceof RestoreUnavailable, String(error));
  assert.match(error.message, /took more than/);
  const bytes = files.reduce((n, f) => n + f.bytes.length, 0);
  assert.equal(ms, restoreBudgetMs(files.length, bytes));
  untouched(dir);
});

Deno.test("restore bounds: time waiting for a limiter place is not charged", async () => {
  const clock = new FakeClock();
  const bucket = new FaultyReads(clock);
  await history(bucket, 3);
  bucket.reads = { latencyMs: 100 };
  const limiter = new ReadLimiter(1);
  const held = await limiter.acquire(1);
  clock.setTimer(120_000, () => held.release());
  const { ms, result, dir } = await timed(clock, bucket, limiter);
  assert.equal(result?.outcome, "restored");
  assert.equal(ms, 120_000 + 3 * 100);
  Deno.removeSync(dir, { recursive: true });
});

Deno.test("restore bounds: other restores' megabytes lengthen a read, not this restore's time", async () => {
  const clock = new FakeClock();
  const bucket = new FaultyReads(clock);
  const files = await history(bucket, 20);
  const limiter = new ReadLimiter();
  // Another restore reads 30 MB meanwhile: each read here gets 5 + 1 + 30 s.
  const other = await limiter.acquire(30_000_000);
  bucket.reads = { latencyMs: 20_000 };
  const { ms, result, dir } = await timed(clock, bucket, limiter);
  other.release();
  assert.equal(result?.outcome, "restored");
  // Three rounds of eight reads, 20 s each: more than this restore's 34 s,
  // but only 6 s of each round is its own.
  assert.equal(ms, 3 * 20_000);
  assert.ok(ms > restoreBudgetMs(files.length, 1));
  Deno.removeSync(dir, { recursive: true });
});

Deno.test("restore bounds: work on the local disk is not counted against the reads' time", async () => {
  const clock = new FakeClock();
  const bucket = new FaultyReads(clock);
  const source = new SourceDb();
  source.exec(SCHEMA);
  const built = [source.file()];
  for (let i = 1; i < 9; i++) {
    source.insert(1);
    built.push(source.file());
  }
  const target = source.txid;
  source.close();
  for (const f of built) await putFile(bucket, 1n, f);
  bucket.reads = { latencyMs: 100 };
  const dir = Deno.makeTempDirSync({ prefix: "wk-restore-disk-" });
  const openSync = Deno.openSync;
  let opens = 0;
  // Applying the first file takes 40 s of a slow disk; the reads of 9 small
  // files have 33 s (30, 1 per MB, 1 per 8 files) and wait about 0.2 s.
  Deno.openSync = ((path: string | URL, options?: Deno.OpenOptions) => {
    if (String(path).endsWith(".restoring") && opens++ === 0) clock.jump(40_000);
    return openSync(path, options);
  }) as typeof Deno.openSync;
  try {
    const restore = restoreActor({
      bucket,
      clock,
      actor: ACTOR,
      path: `${dir}/a.db`,
      limiter: new ReadLimiter(),
    });
    await clock.runUntilSettled(restore);
    assert.equal((await restore).txid, target);
  } finally {
    Deno.openSync = openSync;
    Deno.removeSync(dir, { recursive: true });
  }
});
