/**
 * The replication benchmark (issue 4), in process with the real parts: an
 * `ActorDatabase` on a temporary directory, its `ActorReplica` opened as
 * `src/executor/runtime.ts` opens it, real buckets (`MemoryBucket`, a
 * `FileBucket` on the data root, and moto's S3 server when it starts), and
 * `restoreActor`. No HTTP and no Wasm: that is the counter benchmark's job.
 *
 * 1. **Bytes per event.** N events of three workloads (the counter's
 *    increment, a 100-byte row inserted, a random row of a 10 MB table
 *    updated), each captured and uploaded on its own (the event waits for
 *    its file), with the periodic snapshot taken when due, as the executor
 *    does before an event. Every PUT is counted by a wrapper around the
 *    bucket; the pages each capture took from the `-wal` are counted by a
 *    wrapper around `takeCommits`. Reported: LTX bytes per event against the
 *    bytes of the pages changed (pages × page size).
 * 2. **Write rate, replication on against off.** The counter's increment N
 *    times per variant, each event followed by a turn of the event loop (as
 *    an executor reads its next event from a socket): off (no capture, no
 *    checkpoint), capture only (`takeCommits`, no bucket), replication on
 *    (capture after each event, uploads in the background, coalescing what
 *    commits while one is in flight), and durable (each event waits for its
 *    upload, what `exec-durable` costs). Variants alternate order by round.
 * 3. **Restore speed.** Databases of about 8 and 64 MB of random blobs built
 *    in 64 events (a snapshot and 64 delta files), then with a periodic
 *    snapshot on top (one file); `restoreActor` into an empty directory
 *    against `bucket.get` of the same objects, eight in flight, in order.
 *
 * The flags are in {@linkcode USAGE} (`--help` prints it).
 *
 * @module
 */

import { ActorDatabase, type CommittedPages } from "../src/sqlite/actor_database.ts";
import { ActorReplica, type ReplicaContext } from "../src/replication/replica.ts";
import { ReadLimiter } from "../src/replication/read_limiter.ts";
import { restoreActor } from "../src/replication/restore.ts";
import { RESTORE_READS_IN_FLIGHT } from "../src/replication/restore_reads.ts";
import type { Bucket, ListPage, ObjectInfo, StoredObject } from "../src/bucket/bucket.ts";
import { MemoryBucket } from "../src/bucket/memory.ts";
import { type BucketCall, type BucketOutcome, BucketView } from "../src/bucket/bucket_view.ts";
import { FileBucket } from "../src/bucket/file.ts";
import { S3Bucket } from "../src/bucket/s3.ts";
import type { ActorKey } from "../src/actors/key.ts";
import { actorPrefix } from "../src/bucket/keys.ts";
import { BYTES_PER_MB } from "../src/bucket/bounds.ts";
import { createLogger } from "../src/log.ts";
import { systemClock, systemRandom } from "../src/time/clock.ts";
import { type Moto, startMoto } from "../src/testing/moto.ts";
import { DatabaseSync } from "node:sqlite";
import { CHECKSUM_FLAG, pageChecksum } from "../src/ltx/checksum.ts";
import { compressBlock, decompressBlock } from "../src/ltx/lz4_block.ts";
import { encodeLtx, type LtxPage } from "../src/ltx/encoder.ts";
import { decodeLtx } from "../src/ltx/decoder.ts";
import { applyLtx } from "../src/ltx/apply.ts";
import { PageChecksums } from "../src/replication/page_checksums.ts";
import { cpuModel, defaultDataRoot, flag } from "./processes.ts";
import { benchTempDir, onCleanup, QUICK, runBench } from "./command.ts";

const ROOT = new URL("../", import.meta.url).pathname;

/** What `--help` prints. */
export const USAGE =
  `Usage: deno run -A bench/replication_bench.ts [--quick] [--events N] [--rounds R] [--json FILE]
         [--data-root DIR] [--no-moto] [--only parts,bytes,writes,restore]

What replication costs: the CPU of each piece, the bytes uploaded per event, the write rate with
replication off, on and durable, and restore speed (about 3 minutes; moto needs Python with
moto[server]).

  --quick          a short run (100 events, 1 and 4 MB restores) that shows the benchmark works
  --events N       events of each workload and write-rate variant (default 2000)
  --rounds R       each timed case R times, the median reported (default 1)
  --json FILE      also writes the results to FILE
  --data-root DIR  where databases and the file bucket go (default /dev/shm when it exists)
  --no-moto        skip the S3 cases
  --only PARTS     run only the parts named, comma-separated: parts, bytes, writes, restore
  -h, --help       show this help`;

const EVENTS = Math.max(1, Number(flag("events") ?? (QUICK ? 100 : 2000)));
const ROUNDS = Math.max(1, Number(flag("rounds") ?? 1));
const JSON_FILE = flag("json");
const USE_MOTO = !Deno.args.includes("--no-moto");
const PARTS = new Set((flag("only") ?? "parts,bytes,writes,restore").split(","));
for (const part of PARTS) {
  if (!["parts", "bytes", "writes", "restore"].includes(part)) {
    throw new Error(`--only: no part ${part}`);
  }
}

/** Events of each write-rate variant run before its timed ones (not measured). */
const WARMUP_EVENTS = Math.min(200, Math.ceil(EVENTS / 10));
/** Rows of the 10 MB table (100-byte random blobs: about 10 MB of pages). */
const TABLE_ROWS = QUICK ? 9_000 : 90_000;
/** Events a restore database is built in (its history: a snapshot and this many deltas). */
const RESTORE_BUILD_EVENTS = 64;
/** Restore databases, MB of random blobs. */
const RESTORE_SIZES_MB = QUICK ? [1, 4] : [8, 64];
/** Blob size of the restore databases' rows. */
const RESTORE_ROW_BYTES = 1000;

const COUNTER_TABLE =
  "CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY CHECK (id = 1), n INTEGER NOT NULL)";
const COUNTER_INCREMENT =
  "INSERT INTO counter VALUES (1, 1) ON CONFLICT(id) DO UPDATE SET n = n + 1 RETURNING n";

function log(message: string) {
  console.error(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}`);
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
};

// ---------------------------------------------------------------------------
// A turn of the event loop. setTimeout(0) is clamped to milliseconds once
// nested; a message over a MessageChannel comes back in a few microseconds
// through the event loop, so pending bucket I/O gets its turn.

const channel = new MessageChannel();
let wake: (() => void) | undefined;
channel.port1.onmessage = () => wake?.();

function nextTurn(): Promise<void> {
  return new Promise((resolve) => {
    wake = resolve;
    channel.port2.postMessage(null);
  });
}

/**
 * CPU time of this process so far, ns: the sum of every thread's time on a
 * CPU (`/proc/self/task/<tid>/schedstat`), which other processes' load on
 * the machine does not inflate as it inflates wall time. `undefined` off
 * Linux.
 */
function cpuNs(): number | undefined {
  try {
    let sum = 0;
    for (const task of Deno.readDirSync("/proc/self/task")) {
      try {
        sum += Number(
          Deno.readTextFileSync(`/proc/self/task/${task.name}/schedstat`).split(" ")[0],
        );
      } catch {
        // The thread ended meanwhile.
      }
    }
    return sum;
  } catch {
    return undefined;
  }
}

// ---------------------------------------------------------------------------
// A bucket that counts what is written and records what is read.

interface Tally {
  count: number;
  bytes: number;
}

interface PutTally {
  /** LTX files starting at TXID 1: the first file of a hold, and periodic snapshots. */
  snapshots: Tally;
  /** Every other LTX file. */
  deltas: Tally;
  /** Bases, deleted markers, anything else. */
  other: Tally;
}

const LTX_KEY = /\/wal\/[0-9a-f]{16}\/([0-9a-f]{16})-[0-9a-f]{16}\.ltx$/;

function emptyTally(): PutTally {
  return {
    snapshots: { count: 0, bytes: 0 },
    deltas: { count: 0, bytes: 0 },
    other: { count: 0, bytes: 0 },
  };
}

class CountingBucket extends BucketView {
  puts: PutTally = emptyTally();
  /** Keys read with `get`, in the order asked. */
  gets: string[] = [];
  /** Listing pages asked for, the objects they returned, and the time they took. */
  lists = { pages: 0, objects: 0, ms: 0 };
  #inFlight = 0;
  readonly #listStarts = new WeakMap<BucketCall, number>();

  /**
   * Resolves once no call is in flight: what the replica does in the
   * background (history collection's listings) ends before the next case.
   */
  async drain(): Promise<void> {
    while (this.#inFlight > 0) await new Promise((resolve) => setTimeout(resolve, 5));
  }

  protected override beforeCall(call: BucketCall): void {
    this.#inFlight++;
    if (call.op === "get") this.gets.push(call.key);
    if (call.op === "list") this.#listStarts.set(call, performance.now());
  }

  protected override afterCall(call: BucketCall, outcome: BucketOutcome): void {
    this.#inFlight--;
    if (!("answer" in outcome)) return;
    if (call.op === "put") {
      const ltx = call.key.match(LTX_KEY);
      const tally = !ltx
        ? this.puts.other
        : BigInt(`0x${ltx[1]}`) === 1n
        ? this.puts.snapshots
        : this.puts.deltas;
      tally.count++;
      tally.bytes += call.body.length;
    }
    if (call.op === "list") {
      this.lists.pages++;
      this.lists.objects += (outcome.answer as ListPage).objects.length;
      this.lists.ms += performance.now() - this.#listStarts.get(call)!;
    }
  }
}

// ---------------------------------------------------------------------------
// An actor's database and replica, opened as the executor opens them.

interface PageTally {
  captures: number;
  pages: number;
  pageBytes: number;
}

interface OpenActor {
  id: ActorKey;
  path: string;
  db: ActorDatabase;
  replica: ActorReplica;
  /** What the captures took from the -wal. */
  pages: PageTally;
  /** Periodic snapshots taken before an event, and the time the event waited for them. */
  snapshots: { count: number; ms: number };
  failure?: unknown;
}

function replicaContext(bucket: Bucket): ReplicaContext {
  return {
    bucket,
    clock: systemClock,
    log: createLogger({ level: "warn" }),
    nodeId: "bench",
    limiter: new ReadLimiter(),
    // The node's default (`--history-retention-secs` 3600): nothing this
    // benchmark writes is old enough to be collected.
    historyRetentionMs: 3_600_000,
    count: () => {},
  };
}

/** Counts the pages each `takeCommits` (and so each capture) returns. */
function countPages(db: ActorDatabase, tally: PageTally) {
  const take = db.takeCommits.bind(db);
  db.takeCommits = (): CommittedPages | undefined => {
    const committed = take();
    if (committed) {
      tally.captures++;
      tally.pages += committed.pages.length;
      tally.pageBytes += committed.pages.length * committed.pageSize;
    }
    return committed;
  };
}

async function openActor(bucket: Bucket, dir: string, name: string): Promise<OpenActor> {
  const id: ActorKey = { tenant: "bench", class: "replication", name };
  const path = `${dir}/${name}.db`;
  let db: ActorDatabase | undefined;
  const pages: PageTally = { captures: 0, pages: 0, pageBytes: 0 };
  const actor = { id, path, pages, snapshots: { count: 0, ms: 0 } } as OpenActor;
  actor.replica = await ActorReplica.open(replicaContext(bucket), {
    actor: id,
    path,
    generation: 1n,
    onFailure: (error) => actor.failure = error,
    openDatabase: () => {
      db ??= new ActorDatabase(path);
      countPages(db, pages);
      return db;
    },
  });
  actor.db = db!;
  return actor;
}

/** One event as the executor runs it: the periodic snapshot when due, the work, the capture. */
async function replicatedEvent(actor: OpenActor, work: (db: ActorDatabase) => void) {
  if (actor.replica.snapshotDue()) {
    const start = performance.now();
    if (!await actor.replica.snapshot(actor.db)) throw new Error("periodic snapshot failed");
    actor.snapshots.count++;
    actor.snapshots.ms += performance.now() - start;
  }
  work(actor.db);
  return actor.replica.capture(actor.db);
}

async function closeActor(actor: OpenActor) {
  await actor.replica.close(() => actor.db.close());
  if (actor.failure) throw new Error(`upload failed: ${actor.failure}`);
}

// ---------------------------------------------------------------------------
// 1. Bytes per event.

interface Workload {
  name: string;
  setup: (db: ActorDatabase) => void;
  event: (db: ActorDatabase) => void;
}

const integer = (n: number) => ({ tag: "integer" as const, val: BigInt(n) });

const WORKLOADS: Workload[] = [
  {
    name: "counter increment",
    setup: (db) => db.exec(COUNTER_TABLE, []),
    event: (db) => void db.exec(COUNTER_INCREMENT, []),
  },
  {
    name: "insert a 100-byte row",
    setup: (db) => db.exec("CREATE TABLE rows (id INTEGER PRIMARY KEY, data BLOB NOT NULL)", []),
    event: (db) => void db.exec("INSERT INTO rows (data) VALUES (randomblob(100))", []),
  },
  {
    name: "update a random row of a 10 MB table",
    setup: (db) => {
      db.exec("CREATE TABLE rows (id INTEGER PRIMARY KEY, data BLOB NOT NULL)", []);
      db.exec(
        "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ?) " +
          "INSERT INTO rows (id, data) SELECT i, randomblob(100) FROM s",
        [integer(TABLE_ROWS)],
      );
    },
    event: (db) =>
      void db.exec("UPDATE rows SET data = randomblob(100) WHERE id = ?", [
        integer(1 + Math.floor(Math.random() * TABLE_ROWS)),
      ]),
  },
];

interface BytesResult {
  workload: string;
  events: number;
  /** Database size after the setup, bytes. */
  databaseBytes: number;
  pageSize: number;
  captures: number;
  pagesChanged: number;
  pageBytesChanged: number;
  puts: PutTally;
  /** Periodic snapshots and the time events waited for them. */
  snapshots: { count: number; ms: number };
}

async function bytesPerEvent(workload: Workload, dir: string): Promise<BytesResult> {
  log(`bytes per event: ${workload.name}, ${EVENTS} events`);
  const bucket = new CountingBucket(new MemoryBucket());
  const actor = await openActor(bucket, dir, `bytes-${WORKLOADS.indexOf(workload)}`);
  const setup = await replicatedEvent(actor, workload.setup);
  if (setup !== undefined) await actor.replica.uploaded(setup);
  const databaseBytes = Deno.statSync(actor.path).size;
  // From here on, only the events count.
  bucket.puts = emptyTally();
  Object.assign(actor.pages, { captures: 0, pages: 0, pageBytes: 0 });
  actor.snapshots = { count: 0, ms: 0 };
  for (let i = 0; i < EVENTS; i++) {
    const txid = await replicatedEvent(actor, workload.event);
    // Each event waits for its own file, so no two events share one.
    if (txid !== undefined) await actor.replica.uploaded(txid);
  }
  await actor.replica.uploader.settled();
  const result = {
    workload: workload.name,
    events: EVENTS,
    databaseBytes,
    pageSize: actor.db.pageSize,
    captures: actor.pages.captures,
    pagesChanged: actor.pages.pages,
    pageBytesChanged: actor.pages.pageBytes,
    puts: structuredClone(bucket.puts),
    snapshots: { ...actor.snapshots },
  };
  await closeActor(actor);
  await bucket.drain();
  const p = result.puts;
  log(
    `  ${(result.pageBytesChanged / EVENTS).toFixed(0)} page bytes/event; LTX deltas ${
      (p.deltas.bytes / EVENTS).toFixed(0)
    } B/event, ${p.snapshots.count} snapshot(s) ${(p.snapshots.bytes / EVENTS).toFixed(0)} B/event`,
  );
  return result;
}

// ---------------------------------------------------------------------------
// 2. Write rate, replication on against off.

type BucketKind = "memory" | "file" | "moto";
interface Variant {
  name: string;
  mode: "off" | "capture" | "on" | "durable";
  bucket?: BucketKind;
}

interface WriteResult {
  variant: string;
  round: number;
  events: number;
  ms: number;
  writesPerSecond: number;
  /** LTX files uploaded during the timed events (deltas and snapshots). */
  files: number;
  ltxBytes: number;
  /** Listings during the timed events (history collection after each periodic snapshot). */
  lists: { pages: number; objects: number; ms: number };
  /** This process's CPU time per write (all its threads), µs. */
  cpuUsPerWrite: number;
}

interface Buckets {
  make(kind: BucketKind, name: string): Bucket;
}

async function writeRate(
  variant: Variant,
  round: number,
  dir: string,
  buckets: Buckets,
): Promise<WriteResult> {
  const name = `rate-${round}-${variant.mode}-${variant.bucket ?? "none"}`;
  const increment = (db: ActorDatabase) => void db.exec(COUNTER_INCREMENT, []);
  let ms: number;
  let files = 0;
  let ltxBytes = 0;
  let lists = { pages: 0, objects: 0, ms: 0 };
  let cpu0: number | undefined;
  let cpu1: number | undefined;
  if (variant.mode === "off" || variant.mode === "capture") {
    const db = new ActorDatabase(`${dir}/${name}.db`);
    db.exec(COUNTER_TABLE, []);
    const capture = variant.mode === "capture";
    if (capture) db.takeCommits();
    const event = async () => {
      increment(db);
      if (capture) db.takeCommits();
      await nextTurn();
    };
    for (let i = 0; i < WARMUP_EVENTS; i++) await event();
    cpu0 = cpuNs();
    const start = performance.now();
    for (let i = 0; i < EVENTS; i++) await event();
    ms = performance.now() - start;
    cpu1 = cpuNs();
    db.close();
  } else {
    const bucket = new CountingBucket(buckets.make(variant.bucket!, name));
    const actor = await openActor(bucket, dir, name);
    const durable = variant.mode === "durable";
    const event = async () => {
      const txid = await replicatedEvent(actor, increment);
      if (durable && txid !== undefined) await actor.replica.uploaded(txid);
      else await nextTurn();
    };
    const setup = await replicatedEvent(actor, (db) => db.exec(COUNTER_TABLE, []));
    if (setup !== undefined) await actor.replica.uploaded(setup);
    for (let i = 0; i < WARMUP_EVENTS; i++) await event();
    await actor.replica.uploader.settled();
    await bucket.drain();
    bucket.puts = emptyTally();
    bucket.lists = { pages: 0, objects: 0, ms: 0 };
    cpu0 = cpuNs();
    const start = performance.now();
    for (let i = 0; i < EVENTS; i++) await event();
    // What is still in flight is part of replicating these writes.
    await actor.replica.uploader.settled();
    ms = performance.now() - start;
    cpu1 = cpuNs();
    // A collection's listing still running is not timed, but must not run
    // into the next case.
    await bucket.drain();
    files = bucket.puts.deltas.count + bucket.puts.snapshots.count;
    ltxBytes = bucket.puts.deltas.bytes + bucket.puts.snapshots.bytes;
    lists = { ...bucket.lists };
    await closeActor(actor);
  }
  const writesPerSecond = EVENTS / (ms / 1000);
  const cpuUsPerWrite = cpu0 === undefined || cpu1 === undefined
    ? NaN
    : (cpu1 - cpu0) / 1000 / EVENTS;
  log(
    `  ${variant.name}: ${writesPerSecond.toFixed(0)} writes/s, ${
      cpuUsPerWrite.toFixed(0)
    } µs CPU/write` +
      (files ? ` (${files} files, ${(EVENTS / files).toFixed(1)} events/file)` : ""),
  );
  return {
    variant: variant.name,
    round,
    events: EVENTS,
    ms,
    writesPerSecond,
    files,
    ltxBytes,
    lists,
    cpuUsPerWrite,
  };
}

// ---------------------------------------------------------------------------
// 3. Restore speed.

interface RestoreCase {
  sizeMb: number;
  shape: string;
  bucket: BucketKind;
  round: number;
  /** The restored database file, bytes. */
  databaseBytes: number;
  /** Objects the restore read with `get` (bases and LTX files), and their bytes. */
  objects: number;
  objectBytes: number;
  restoreMs: number;
  /** `get` of the same objects, eight in flight, in order. */
  readMs: number;
  /** Listing the actor's prefix once (part of the restore, not of the baseline). */
  listMs: number;
  /** This process's CPU time (all threads) during the restore, and during the gets alone. */
  restoreCpuMs: number;
  readCpuMs: number;
}

/** Reads `keys` with `inFlight` gets outstanding, taken in order, as the restore reads. */
async function readAll(bucket: Bucket, keys: string[], inFlight: number): Promise<number> {
  let bytes = 0;
  const pending: Promise<StoredObject | null>[] = [];
  let next = 0;
  while (next < keys.length && pending.length < inFlight) pending.push(bucket.get(keys[next++]));
  while (pending.length > 0) {
    const got = await pending.shift()!;
    if (!got) throw new Error("an object vanished");
    bytes += got.body.length;
    if (next < keys.length) pending.push(bucket.get(keys[next++]));
  }
  return bytes;
}

async function listAllKeys(bucket: Bucket, prefix: string): Promise<ObjectInfo[]> {
  const out: ObjectInfo[] = [];
  let continuationToken: string | undefined;
  do {
    const page = await bucket.list(prefix, { continuationToken });
    out.push(...page.objects);
    continuationToken = page.continuationToken;
  } while (continuationToken !== undefined);
  return out;
}

/** Copies every object under `prefix` from one bucket to another. */
async function copyPrefix(from: Bucket, to: Bucket, prefix: string) {
  for (const object of await listAllKeys(from, prefix)) {
    const existing = await to.head(object.key);
    if (existing && existing.size === object.size) continue;
    const got = await from.get(object.key);
    await to.put(object.key, got!.body);
  }
}

function verifyDatabase(path: string, expectedRows: number) {
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    const check = db.prepare("PRAGMA integrity_check").get() as Record<string, string>;
    const rows = Number((db.prepare("SELECT count(*) AS n FROM blobs").get() as { n: number }).n);
    if (Object.values(check)[0] !== "ok" || rows !== expectedRows) {
      throw new Error(`restored ${path}: integrity ${JSON.stringify(check)}, ${rows} rows`);
    }
  } finally {
    db.close();
  }
}

async function restoreOnce(
  bucket: Bucket,
  actor: ActorKey,
  expected: bigint,
  dir: string,
): Promise<{ ms: number; cpuMs: number; keys: string[]; path: string; databaseBytes: number }> {
  const counting = new CountingBucket(bucket);
  const target = await Deno.makeTempDir({ prefix: "restore-", dir });
  const path = `${target}/${actor.name}.db`;
  const cpu0 = cpuNs() ?? NaN;
  const start = performance.now();
  const result = await restoreActor({
    bucket: counting,
    clock: systemClock,
    actor,
    path,
    limiter: new ReadLimiter(),
  });
  const ms = performance.now() - start;
  const cpuMs = ((cpuNs() ?? NaN) - cpu0) / 1e6;
  if (result.outcome !== "restored" || result.checksum !== expected) {
    throw new Error(
      `restore of ${actor.name}: ${result.outcome} at checksum ${result.checksum.toString(16)}, ` +
        `expected ${expected.toString(16)}`,
    );
  }
  return { ms, cpuMs, keys: counting.gets, path, databaseBytes: Deno.statSync(path).size };
}

async function restoreCases(
  source: FileBucket,
  moto: S3Bucket | undefined,
  dir: string,
): Promise<RestoreCase[]> {
  const cases: RestoreCase[] = [];
  for (const sizeMb of RESTORE_SIZES_MB) {
    const name = `restore-${sizeMb}mb`;
    const rowsPerEvent = Math.round(
      sizeMb * BYTES_PER_MB / RESTORE_ROW_BYTES / RESTORE_BUILD_EVENTS,
    );
    log(`restore: building ${name} (${RESTORE_BUILD_EVENTS} events of ${rowsPerEvent} rows)`);
    const actor = await openActor(source, dir, name);
    const setup = await replicatedEvent(
      actor,
      (db) => db.exec("CREATE TABLE blobs (id INTEGER PRIMARY KEY, data BLOB NOT NULL)", []),
    );
    await actor.replica.uploaded(setup!);
    for (let i = 0; i < RESTORE_BUILD_EVENTS; i++) {
      // No periodic snapshot while building: the history is the first
      // file and one delta per event, the longest chain the executor's
      // every-64-uploads snapshot leaves.
      actor.db.exec(
        "WITH RECURSIVE s(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM s WHERE i < ?) " +
          "INSERT INTO blobs (data) SELECT randomblob(?) FROM s",
        [integer(rowsPerEvent), integer(RESTORE_ROW_BYTES)],
      );
      await actor.replica.uploaded(actor.replica.capture(actor.db)!);
    }
    const rows = rowsPerEvent * RESTORE_BUILD_EVENTS;
    for (const shape of ["snapshot + 64 deltas", "1 snapshot"]) {
      if (shape === "1 snapshot") {
        const stalls = watchStalls();
        const start = performance.now();
        if (!await actor.replica.snapshot(actor.db)) throw new Error("snapshot not uploaded");
        const ms = performance.now() - start;
        snapshotTimes.push({ sizeMb, ms, longestStallMs: stalls.stop() });
        log(
          `restore: periodic snapshot of ${name} took ${ms.toFixed(0)} ms, the longest ` +
            `stretch without a turn of the event loop ${
              snapshotTimes.at(-1)!.longestStallMs.toFixed(0)
            } ms`,
        );
        // The snapshot starts a history collection (a listing); let it end.
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      const expected = actor.replica.position.checksum;
      const buckets: [BucketKind, Bucket][] = [["file", source]];
      if (moto) {
        log(`restore: copying ${name} to moto`);
        await copyPrefix(source, moto, actorPrefix(actor.id));
        buckets.push(["moto", moto]);
      }
      for (const [kind, bucket] of buckets) {
        // The keys the restore reads: the same every round (the history does
        // not change), known from round 1, where the restore goes first.
        let keys: string[] = [];
        for (let round = 1; round <= ROUNDS; round++) {
          let restore: Awaited<ReturnType<typeof restoreOnce>> | undefined;
          let readMs = 0;
          let readCpuMs = 0;
          let objectBytes = 0;
          const baseline = async () => {
            const cpu0 = cpuNs() ?? NaN;
            const start = performance.now();
            objectBytes = await readAll(bucket, keys, RESTORE_READS_IN_FLIGHT);
            readMs = performance.now() - start;
            readCpuMs = ((cpuNs() ?? NaN) - cpu0) / 1e6;
          };
          const restoreStep = async () => {
            restore = await restoreOnce(bucket, actor.id, expected, dir);
            keys = restore.keys;
          };
          if (round % 2 === 1) {
            await restoreStep();
            await baseline();
          } else {
            await baseline();
            await restoreStep();
          }
          const listStart = performance.now();
          await listAllKeys(bucket, actorPrefix(actor.id));
          const listMs = performance.now() - listStart;
          if (round === 1) verifyDatabase(restore!.path, rows);
          await Deno.remove(restore!.path.slice(0, restore!.path.lastIndexOf("/")), {
            recursive: true,
          });
          const c: RestoreCase = {
            sizeMb,
            shape,
            bucket: kind,
            round,
            databaseBytes: restore!.databaseBytes,
            objects: restore!.keys.length,
            objectBytes,
            restoreMs: restore!.ms,
            readMs,
            listMs,
            restoreCpuMs: restore!.cpuMs,
            readCpuMs,
          };
          cases.push(c);
          log(
            `  ${sizeMb} MB, ${shape}, ${kind}, round ${round}: restore ${
              mbps(c.objectBytes, c.restoreMs).toFixed(0)
            } MB/s (${c.restoreMs.toFixed(0)} ms), get alone ${
              mbps(c.objectBytes, c.readMs).toFixed(0)
            } MB/s (${c.readMs.toFixed(0)} ms), ${c.objects} objects`,
          );
        }
      }
    }
    await closeActor(actor);
  }
  return cases;
}

/** The periodic snapshot of each restore database, timed (FileBucket). */
const snapshotTimes: { sizeMb: number; ms: number; longestStallMs: number }[] = [];

/**
 * Watches the event loop with a 1 ms interval timer; `stop` returns the
 * longest time between two of its ticks (what other actors of the executor
 * would have waited, at worst), ms.
 */
function watchStalls(): { stop(): number } {
  let last = performance.now();
  let longest = 0;
  const tick = () => {
    const now = performance.now();
    longest = Math.max(longest, now - last);
    last = now;
  };
  const timer = setInterval(tick, 1);
  return {
    stop() {
      tick();
      clearInterval(timer);
      return longest;
    },
  };
}

const mbps = (bytes: number, ms: number) => bytes / BYTES_PER_MB / (ms / 1000);

// ---------------------------------------------------------------------------
// Parts: the CPU of each piece of a counter event's replication, and of a
// snapshot's encode, decode and apply, in tight loops (steadier than the
// write rate, which a loaded machine moves by a factor of two).

interface PartResult {
  part: string;
  /** CPU time per call (all threads) in `unit`, median of the batches. */
  value: number;
  unit: "µs" | "ms";
}

function timeCpu(fn: () => unknown, iterations: number, batches = 7): number {
  for (let i = 0; i < iterations; i++) fn();
  const each: number[] = [];
  for (let b = 0; b < batches; b++) {
    const cpu0 = cpuNs() ?? NaN;
    for (let i = 0; i < iterations; i++) fn();
    each.push(((cpuNs() ?? NaN) - cpu0) / 1000 / iterations);
  }
  return median(each);
}

/** The page a counter increment changes, as the capture takes it. */
function counterEventPages(dir: string): { pages: LtxPage[]; commit: number } {
  const db = new ActorDatabase(`${dir}/parts-counter.db`);
  try {
    db.exec(COUNTER_TABLE, []);
    db.takeCommits();
    for (let i = 0; i < 1000; i++) db.exec(COUNTER_INCREMENT, []);
    db.takeCommits();
    db.exec(COUNTER_INCREMENT, []);
    const committed = db.takeCommits()!;
    return { pages: committed.pages, commit: committed.commit };
  } finally {
    db.close();
  }
}

function randomPage(size = 4096): Uint8Array {
  const page = new Uint8Array(size);
  crypto.getRandomValues(page);
  return page;
}

function parts(dir: string): PartResult[] {
  const results: PartResult[] = [];
  const add = (part: string, us: number, unit: "µs" | "ms" = "µs") =>
    results.push({ part, value: unit === "ms" ? us / 1000 : us, unit });
  const { pages, commit } = counterEventPages(dir);
  const page = pages[0];
  const random = randomPage();
  add(
    "CRC-64 page checksum, 4 KiB (pageChecksum)",
    timeCpu(() => pageChecksum(page.pgno, page.data), 2000),
  );
  add("LZ4 compress, the counter's page", timeCpu(() => compressBlock(page.data), 2000));
  add("LZ4 compress, 4 KiB of random bytes", timeCpu(() => compressBlock(random), 2000));
  const packed = compressBlock(page.data);
  add("LZ4 decompress, the counter's page", timeCpu(() => decompressBlock(packed, 4096), 2000));
  const sums = PageChecksums.empty(4096);
  for (let pgno = 1; pgno <= commit; pgno++) {
    sums.apply([{ pgno, data: new Uint8Array(4096) }], pgno);
  }
  add("PageChecksums.apply, one page", timeCpu(() => sums.apply(pages, commit), 2000));
  const header = {
    pageSize: 4096,
    commit,
    minTxid: 5n,
    maxTxid: 5n,
    timestamp: Date.now(),
    preApplyChecksum: CHECKSUM_FLAG | 1n,
  };
  const encodeEvent = () => encodeLtx({ header, pages, postApplyChecksum: CHECKSUM_FLAG | 2n });
  add("encodeLtx, the counter event's one-page file", timeCpu(encodeEvent, 2000));
  const eventFile = encodeEvent();
  add("decodeLtx, that file", timeCpu(() => decodeLtx(eventFile), 2000));
  // A snapshot of 8 MiB: pages of 1,000-byte random blobs, a quarter zeros.
  const count = 2048;
  const snapshotPages: LtxPage[] = [];
  for (let pgno = 1; pgno <= count; pgno++) {
    const data = randomPage();
    data.fill(0, 0, 1024);
    snapshotPages.push({ pgno, data });
  }
  const image = new Uint8Array(count * 4096);
  snapshotPages.forEach((p) => image.set(p.data, (p.pgno - 1) * 4096));
  const post =
    PageChecksums.fromPages(4096, count, (pgno) => snapshotPages[pgno - 1].data).checksum;
  const snapshotHeader = {
    pageSize: 4096,
    commit: count,
    minTxid: 1n,
    maxTxid: 9n,
    timestamp: Date.now(),
  };
  const encodeSnapshot = () =>
    encodeLtx({ header: snapshotHeader, pages: snapshotPages, postApplyChecksum: post });
  add("encodeLtx, an 8 MiB snapshot (2,048 pages)", timeCpu(encodeSnapshot, 2, 5), "ms");
  const snapshotFile = encodeSnapshot();
  add("decodeLtx, that snapshot", timeCpu(() => decodeLtx(snapshotFile), 2, 5), "ms");
  const decoded = decodeLtx(snapshotFile);
  add(
    "applyLtx, that snapshot (in memory)",
    timeCpu(() => applyLtx(new Uint8Array(0), [decoded]), 2, 5),
    "ms",
  );
  add(
    "PageChecksums.fromPages, 8 MiB",
    timeCpu(
      () =>
        PageChecksums.fromPages(
          4096,
          count,
          (pgno) => image.subarray((pgno - 1) * 4096, pgno * 4096),
        ),
      2,
      5,
    ),
    "ms",
  );
  for (const r of results) {
    log(`  ${r.part}: ${r.value.toFixed(r.unit === "ms" ? 1 : 2)} ${r.unit}`);
  }
  return results;
}

// ---------------------------------------------------------------------------
// Report.

function describeTree(): string {
  const git = (...args: string[]) => {
    const output = new Deno.Command("git", { args, cwd: ROOT, stdout: "piped", stderr: "null" })
      .outputSync();
    return output.success ? new TextDecoder().decode(output.stdout).trim() : undefined;
  };
  const commit = git("rev-parse", "--short", "HEAD");
  if (commit === undefined) return "not a git checkout";
  const changed = (git("status", "--porcelain", "--", "src") ?? "").split("\n").filter(Boolean);
  return `${commit}` +
    (changed.length ? ` with ${changed.length} uncommitted change(s) in src/` : " (src/ clean)");
}

const n0 = (n: number) => Math.round(n).toLocaleString("en-US");
const pct = (n: number) => `${(n * 100).toFixed(1)} %`;

function report(
  partResults: PartResult[],
  bytes: BytesResult[],
  writes: WriteResult[],
  variants: Variant[],
  restores: RestoreCase[],
  dataRoot: string,
) {
  const lines: string[] = [];
  lines.push(
    `Machine: ${navigator.hardwareConcurrency} cores (${cpuModel()}), Deno ${Deno.version.deno}, ` +
      `${STARTED_AT} to ${new Date().toISOString()}, data on ${dataRoot}; WasmKeep at ${TREE}`,
  );
  lines.push(`Events per workload and variant: ${EVENTS}; rounds: ${ROUNDS}. MB = 10^6 bytes.`);
  lines.push("");
  if (partResults.length) {
    lines.push("Parts (CPU per call, median of the batches):");
    lines.push("");
    lines.push("| part | CPU |");
    lines.push("|---|---:|");
    for (const r of partResults) {
      lines.push(`| ${r.part} | ${r.value.toFixed(r.unit === "ms" ? 1 : 2)} ${r.unit} |`);
    }
    lines.push("");
  }
  lines.push("Bytes per event (each event its own LTX file; MemoryBucket; PUT bodies counted):");
  lines.push("");
  lines.push(
    "| workload | DB size | pages/event | page bytes/event | LTX delta B/event | delta / pages | snapshots | ms each | snapshot B/event | all PUT B/event | all / pages |",
  );
  lines.push("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
  for (const b of bytes) {
    const pageBytes = b.pageBytesChanged / b.events;
    const delta = b.puts.deltas.bytes / b.events;
    const snap = b.puts.snapshots.bytes / b.events;
    const all = (b.puts.deltas.bytes + b.puts.snapshots.bytes + b.puts.other.bytes) / b.events;
    lines.push(
      `| ${b.workload} | ${(b.databaseBytes / BYTES_PER_MB).toFixed(2)} MB | ${
        (b.pagesChanged / b.events).toFixed(2)
      } | ${n0(pageBytes)} | ${n0(delta)} | ${
        pct(delta / pageBytes)
      } | ${b.puts.snapshots.count} | ${
        b.snapshots.count ? (b.snapshots.ms / b.snapshots.count).toFixed(1) : "-"
      } | ${n0(snap)} | ${n0(all)} | ${pct(all / pageBytes)} |`,
    );
  }
  lines.push("");
  lines.push(
    `Write rate, the counter's increment (${EVENTS} timed events after ${WARMUP_EVENTS} untimed; ` +
      "one event-loop turn per event in every variant):",
  );
  lines.push("");
  const roundsHeader = Array.from({ length: ROUNDS }, (_, i) => `round ${i + 1}`).join(" | ");
  lines.push(
    `| variant | ${roundsHeader} | median writes/s | of off (median ratio) | CPU µs/write | off's CPU / this CPU | events/file | objects listed/round (ms) |`,
  );
  lines.push(`|---|${"---:|".repeat(ROUNDS)}---:|---:|---:|---:|---:|---:|`);
  const offByRound = new Map(
    writes.filter((w) => w.variant === variants[0].name).map((w) => [w.round, w.writesPerSecond]),
  );
  const offCpuByRound = new Map(
    writes.filter((w) => w.variant === variants[0].name).map((w) => [w.round, w.cpuUsPerWrite]),
  );
  const headline: Record<string, number> = {};
  for (const v of variants) {
    const each = writes.filter((w) => w.variant === v.name).sort((a, b) => a.round - b.round);
    if (each.length === 0) continue;
    const ratio = median(each.map((w) => w.writesPerSecond / offByRound.get(w.round)!));
    headline[v.name] = ratio;
    const files = each.reduce((s, w) => s + w.files, 0);
    lines.push(
      `| ${v.name} | ${each.map((w) => n0(w.writesPerSecond)).join(" | ")} | ${
        n0(median(each.map((w) => w.writesPerSecond)))
      } | ${pct(ratio)} | ${median(each.map((w) => w.cpuUsPerWrite)).toFixed(0)} | ${
        pct(median(each.map((w) => offCpuByRound.get(w.round)! / w.cpuUsPerWrite)))
      } | ${files ? (each.length * EVENTS / files).toFixed(1) : "-"} | ${
        files
          ? `${n0(median(each.map((w) => w.lists.objects)))} (${
            median(each.map((w) => w.lists.ms)).toFixed(0)
          })`
          : "-"
      } |`,
    );
  }
  lines.push("");
  lines.push(
    `Restore: restoreActor into an empty directory against get of the same objects, ${RESTORE_READS_IN_FLIGHT} in flight (medians of ${ROUNDS}):`,
  );
  lines.push("");
  lines.push(
    "| DB | history | bucket | objects | object MB | restore ms | restore MB/s | get alone ms | get alone MB/s | restore / get | DB MB/s | list ms | CPU ms restore / get |",
  );
  lines.push("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
  const keys = new Set(restores.map((r) => `${r.sizeMb}|${r.shape}|${r.bucket}`));
  for (const key of keys) {
    const each = restores.filter((r) => `${r.sizeMb}|${r.shape}|${r.bucket}` === key);
    const r = each[0];
    const restoreMs = median(each.map((c) => c.restoreMs));
    const readMs = median(each.map((c) => c.readMs));
    const ratio = median(each.map((c) => c.readMs / c.restoreMs));
    lines.push(
      `| ${
        (r.databaseBytes / BYTES_PER_MB).toFixed(1)
      } MB | ${r.shape} | ${r.bucket} | ${r.objects} | ${
        (r.objectBytes / BYTES_PER_MB).toFixed(1)
      } | ${restoreMs.toFixed(0)} | ${mbps(r.objectBytes, restoreMs).toFixed(0)} | ${
        readMs.toFixed(0)
      } | ${mbps(r.objectBytes, readMs).toFixed(0)} | ${pct(ratio)} | ${
        mbps(r.databaseBytes, restoreMs).toFixed(0)
      } | ${median(each.map((c) => c.listMs)).toFixed(1)} | ${
        median(each.map((c) => c.restoreCpuMs)).toFixed(0)
      } / ${median(each.map((c) => c.readCpuMs)).toFixed(0)} |`,
    );
  }
  lines.push("");
  lines.push(
    "Periodic snapshot of a restore database (read every page, encode, upload to the FileBucket; " +
      "the actor's next event waits for it; in parentheses the longest stretch without a turn of " +
      "the event loop, when the executor's other actors wait): " +
      snapshotTimes.map((t) =>
        `${t.sizeMb} MB: ${t.ms.toFixed(0)} ms (${t.longestStallMs.toFixed(0)} ms)`
      ).join(", "),
  );
  return lines.join("\n");
}

// ---------------------------------------------------------------------------

/** The code under test, as it was when the run started (modules are loaded then). */
let TREE = "";
let STARTED_AT = "";

async function main() {
  TREE = describeTree();
  STARTED_AT = new Date().toISOString();
  const dataRoot = flag("data-root") ?? defaultDataRoot();
  const tmp = await benchTempDir({ prefix: "wasmkeep-replbench-", dir: dataRoot });
  const started = performance.now();
  let moto: Moto | undefined;
  let motoBucket: S3Bucket | undefined;
  let partResults: PartResult[] = [];
  const bytes: BytesResult[] = [];
  const writes: WriteResult[] = [];
  let restores: RestoreCase[] = [];
  const variants: Variant[] = [
    { name: "off", mode: "off" },
    { name: "capture only, no bucket", mode: "capture" },
    { name: "on, MemoryBucket", mode: "on", bucket: "memory" },
    { name: "on, FileBucket", mode: "on", bucket: "file" },
    { name: "durable, MemoryBucket", mode: "durable", bucket: "memory" },
    { name: "durable, FileBucket", mode: "durable", bucket: "file" },
  ];
  try {
    log(`data in ${tmp}`);
    if (USE_MOTO) {
      try {
        moto = await startMoto("wasmkeep-bench");
        onCleanup(() => moto?.stop());
        motoBucket = S3Bucket.fromUrl(`s3://${moto.bucket}/bench`, moto.env, {
          clock: systemClock,
          random: systemRandom,
        });
        log(`moto at ${moto.endpoint}`);
        variants.push(
          { name: "on, moto S3", mode: "on", bucket: "moto" },
          { name: "durable, moto S3", mode: "durable", bucket: "moto" },
        );
      } catch (error) {
        log(`moto not started, S3 cases skipped: ${(error as Error).message.split("\n")[0]}`);
      }
    }
    const buckets: Buckets = {
      make: (kind, name) =>
        kind === "memory"
          ? new MemoryBucket()
          : kind === "file"
          ? new FileBucket(`${tmp}/bucket-${name}`)
          : motoBucket!,
    };

    if (PARTS.has("parts")) {
      log("parts");
      partResults = parts(tmp);
    }
    if (PARTS.has("bytes")) {
      for (const workload of WORKLOADS) bytes.push(await bytesPerEvent(workload, tmp));
    }

    for (let round = 1; round <= ROUNDS && PARTS.has("writes"); round++) {
      log(`write rate, round ${round}`);
      const order = round % 2 === 1 ? variants : [...variants].reverse();
      for (const variant of order) writes.push(await writeRate(variant, round, tmp, buckets));
    }

    if (PARTS.has("restore")) {
      restores = await restoreCases(new FileBucket(`${tmp}/bucket-restore`), motoBucket, tmp);
    }
  } finally {
    channel.port1.close();
    await motoBucket?.close();
    await moto?.stop();
  }
  if (QUICK) {
    console.log("--quick: a short run that shows the benchmark works; figures not to quote");
  }
  console.log(
    report(partResults, bytes, writes, variants, restores, dataRoot ?? "the temporary directory"),
  );
  console.log(`\nTook ${((performance.now() - started) / 1000).toFixed(0)} s.`);
  if (JSON_FILE) {
    await Deno.writeTextFile(
      JSON_FILE,
      JSON.stringify(
        {
          events: EVENTS,
          rounds: ROUNDS,
          cpu: cpuModel(),
          tree: TREE,
          parts: partResults,
          bytes,
          writes,
          restores,
          snapshotTimes,
        },
        (_, value) => typeof value === "bigint" ? value.toString() : value,
        2,
      ),
    );
  }
}

if (import.meta.main) await runBench(USAGE, main);
