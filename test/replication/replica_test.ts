import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { listAll } from "../../src/bucket/bucket.ts";
import { BucketUnavailable } from "../../src/bucket/errors.ts";
import { FileBucket } from "../../src/bucket/file.ts";
import { actorPrefix } from "../../src/bucket/keys.ts";
import { MemoryBucket } from "../../src/bucket/memory.ts";
import { CHECKSUM_FLAG, databaseChecksum } from "../../src/ltx/checksum.ts";
import { decodeLtx } from "../../src/ltx/decoder.ts";
import { baseKey, decodeDeleted, deletedKey, walFileKey } from "../../src/replication/history.ts";
import { ReadLimiter } from "../../src/replication/read_limiter.ts";
import { ActorReplica, positionPath, type ReplicaContext } from "../../src/replication/replica.ts";
import { ReplicationFailed } from "../../src/replication/uploader.ts";
import { ActorDatabase, type SqlValue } from "../../src/sqlite/actor_database.ts";
import { type Clock, systemClock } from "../../src/time/clock.ts";
import { FakeClock } from "../bucket/fake_clock.ts";
import { verifyLtxChainBytes } from "../helpers/ltx_verify.ts";
import { RecordingLogger, SpyBucket, storedFiles } from "./commits.ts";
import { ACTOR } from "./source_db.ts";
import { exists } from "../helpers/exists.ts";

const SCHEMA = "CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, body BLOB)";
const ROWS = "SELECT id, name, hex(body) FROM items ORDER BY id";
const PAGE_SIZE = 4096;

/** A replica and the database it opened. */
interface Opened {
  replica: ActorReplica;
  db: ActorDatabase;
}

/** A bucket and nodes' data directories in one temporary directory. */
class World {
  readonly root = Deno.makeTempDirSync({ prefix: "wasmkeep-replica-" });
  readonly bucket: SpyBucket;
  readonly log = new RecordingLogger();
  readonly counts = new Map<string, number>();
  readonly failures: unknown[] = [];
  readonly clock: Clock;
  readonly retentionMs: number;

  constructor(options: { memory?: MemoryBucket; clock?: Clock; retentionMs?: number } = {}) {
    this.bucket = new SpyBucket(options.memory ?? new FileBucket(`${this.root}/bucket`));
    this.clock = options.clock ?? systemClock;
    this.retentionMs = options.retentionMs ?? 3_600_000;
  }

  context(): ReplicaContext {
    return {
      bucket: this.bucket,
      clock: this.clock,
      log: this.log,
      nodeId: "a",
      limiter: new ReadLimiter(),
      historyRetentionMs: this.retentionMs,
      count: (name, by = 1) => this.counts.set(name, (this.counts.get(name) ?? 0) + by),
    };
  }

  /** The actor's database path in node `node`'s data directory (the directory exists). */
  path(node: string): string {
    const dir = `${this.root}/${node}/acme/room`;
    Deno.mkdirSync(dir, { recursive: true });
    return `${dir}/lobby.db`;
  }

  async open(path: string, generation: bigint): Promise<Opened> {
    let db: ActorDatabase | undefined;
    const replica = await ActorReplica.open(this.context(), {
      actor: ACTOR,
      path,
      generation,
      onFailure: (error) => this.failures.push(error),
      openDatabase: () => db = new ActorDatabase(path),
    });
    assert.ok(db, "the database was opened");
    return { replica, db };
  }

  /** What the last open logged: how the actor was restored, and the LTX files it read. */
  lastRestore(): { outcome: unknown; files: unknown; txid: unknown } {
    const { outcome, files, txid } = this.log.find("actor restored").at(-1)!;
    return { outcome, files, txid };
  }

  /** Keys under the actor's prefix, relative to it. */
  async actorKeys(): Promise<string[]> {
    const keys: string[] = [];
    for await (const o of listAll(this.bucket.inner, actorPrefix(ACTOR))) {
      keys.push(o.key.slice(actorPrefix(ACTOR).length));
    }
    return keys;
  }

  close(): void {
    Deno.removeSync(this.root, { recursive: true });
  }
}

/** One event: its statements, then the capture. Resolves once its file landed. */
async function event(opened: Opened, ...sql: string[]): Promise<bigint> {
  for (const s of sql) opened.db.exec(s, []);
  const txid = opened.replica.capture(opened.db);
  assert.ok(txid !== undefined, "the event committed something");
  await opened.replica.uploaded(txid);
  return txid;
}

function rows(db: ActorDatabase): SqlValue[][] {
  return db.exec(ROWS, []).rows;
}

function integrity(db: ActorDatabase): string {
  const [[value]] = db.exec("PRAGMA integrity_check", []).rows;
  return value.tag === "text" ? value.val : JSON.stringify(value);
}

function hex(value: bigint): string {
  return value.toString(16).padStart(16, "0");
}

/** What the executor's wipe does: the database's files go, whichever exist. */
function wipe(path: string): void {
  for (const f of [path, `${path}-wal`, positionPath(path)]) {
    try {
      Deno.removeSync(f);
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
    }
  }
}

/** A new actor's first hold at generation 1: a table, three events of rows, closed. */
async function firstHold(w: World, path: string): Promise<SqlValue[][]> {
  const opened = await w.open(path, 1n);
  assert.equal(w.lastRestore().outcome, "empty");
  await event(opened, SCHEMA, "INSERT INTO items(name, body) VALUES ('a', randomblob(100))");
  await event(opened, "INSERT INTO items(name, body) VALUES ('b', randomblob(9000))");
  await event(opened, "UPDATE items SET name = 'a!' WHERE name = 'a'");
  const expected = rows(opened.db);
  assert.equal(await opened.replica.close(() => opened.db.close()), true);
  return expected;
}

Deno.test("replica: a new actor's events are captured as TXIDs 1, 2, 3, uploaded, and close writes the position file", async () => {
  const w = new World();
  try {
    const path = w.path("a");
    await firstHold(w, path);
    const recorded = JSON.parse(Deno.readTextFileSync(positionPath(path)));
    const checksum = databaseChecksum(Deno.readFileSync(path), PAGE_SIZE);
    assert.deepEqual(recorded, { txid: hex(3n), checksum: hex(checksum) });
    assert.ok(!exists(`${path}-wal`) || Deno.statSync(`${path}-wal`).size === 0);
    assert.deepEqual(await w.actorKeys(), [
      `wal/${hex(1n)}/${hex(1n)}-${hex(1n)}.ltx`,
      `wal/${hex(1n)}/${hex(2n)}-${hex(2n)}.ltx`,
      `wal/${hex(1n)}/${hex(3n)}-${hex(3n)}.ltx`,
      `wal/${hex(1n)}/base`,
    ]);
    const files = await storedFiles(w.bucket.inner, ACTOR);
    assert.equal(decodeLtx(files[2].bytes).postApplyChecksum, checksum);
    const chain = await verifyLtxChainBytes(files.map((f) => f.bytes));
    assert.ok(chain.ok, chain.output);
    assert.deepEqual(chain.image, Deno.readFileSync(path));
    assert.deepEqual(w.failures, []);
  } finally {
    w.close();
  }
});

Deno.test("replica: reopening a cleanly closed file with the same bucket finds it current: nothing applied, only the file ending at its TXID read to confirm its checksum", async () => {
  const w = new World();
  try {
    const path = w.path("a");
    const expected = await firstHold(w, path);
    const before = Deno.readFileSync(path);
    w.bucket.calls.length = 0;

    const opened = await w.open(path, 2n);
    assert.deepEqual(w.lastRestore(), { outcome: "current", files: 1, txid: "3" });
    const ltxReads = w.bucket.keys("get").filter((k) => k.endsWith(".ltx"));
    assert.deepEqual(ltxReads, [walFileKey(ACTOR, 1n, 3n, 3n)]);
    assert.deepEqual(Deno.readFileSync(path), before);
    assert.ok(!exists(`${path}.replaced`));
    assert.deepEqual(opened.replica.position, {
      txid: 3n,
      checksum: databaseChecksum(before, PAGE_SIZE),
    });
    assert.deepEqual(rows(opened.db), expected);

    // The hold goes on from there: generation 2's base at TXID 3, then 4-4.
    await event(opened, "INSERT INTO items(name, body) VALUES ('c', 'x')");
    assert.equal(await opened.replica.close(() => opened.db.close()), true);
    const keys = await w.actorKeys();
    assert.ok(keys.includes(`wal/${hex(2n)}/base`));
    assert.ok(keys.includes(`wal/${hex(2n)}/${hex(4n)}-${hex(4n)}.ltx`));
    assert.deepEqual(w.failures, []);
  } finally {
    w.close();
  }
});

Deno.test("replica: opening into an empty directory restores the database from the bucket: equal rows, integrity ok, the same bytes", async () => {
  const w = new World();
  try {
    const path = w.path("a");
    await firstHold(w, path);
    const second = await w.open(path, 2n);
    await event(second, "INSERT INTO items(name, body) VALUES ('c', randomblob(5000))");
    const expected = rows(second.db);
    const position = second.replica.position;
    assert.equal(await second.replica.close(() => second.db.close()), true);

    const elsewhere = w.path("b");
    assert.ok(!exists(elsewhere));
    const restored = await w.open(elsewhere, 3n);
    assert.equal(w.lastRestore().outcome, "restored");
    assert.deepEqual(restored.replica.position, position);
    assert.deepEqual(rows(restored.db), expected);
    assert.equal(integrity(restored.db), "ok");
    restored.db.close();
    assert.deepEqual(Deno.readFileSync(elsewhere), Deno.readFileSync(path));
  } finally {
    w.close();
  }
});

Deno.test("replica: a local file changed behind the replica's back no longer matches its position file: restored from the bucket, the changed file kept as .replaced", async () => {
  const w = new World();
  try {
    const path = w.path("a");
    const expected = await firstHold(w, path);
    // Someone edits the closed file directly.
    const direct = new DatabaseSync(path);
    direct.exec("INSERT INTO items(name, body) VALUES ('intruder', 'x')");
    direct.close();
    const changed = Deno.readFileSync(path);
    assert.notEqual(
      databaseChecksum(changed, PAGE_SIZE),
      BigInt(`0x${JSON.parse(Deno.readTextFileSync(positionPath(path))).checksum}`),
    );

    const opened = await w.open(path, 2n);
    assert.equal(w.lastRestore().outcome, "restored");
    assert.deepEqual(rows(opened.db), expected);
    assert.equal(integrity(opened.db), "ok");
    assert.equal(opened.replica.position.txid, 3n);
    opened.db.close();
    assert.deepEqual(Deno.readFileSync(`${path}.replaced`), changed);
    const kept = new DatabaseSync(`${path}.replaced`, { readOnly: true });
    try {
      assert.equal(
        kept.prepare("SELECT count(*) AS n FROM items WHERE name = 'intruder'").get()?.n,
        1,
      );
    } finally {
      kept.close();
    }
  } finally {
    w.close();
  }
});

Deno.test("replica: a database that exists with no history is adopted as the first snapshot; its base says TXID 0 with the empty checksum", async () => {
  const w = new World();
  try {
    const path = w.path("a");
    const before = new DatabaseSync(path);
    before.exec(SCHEMA);
    before.exec("INSERT INTO items(name, body) VALUES ('old', randomblob(3000)), ('older', 'x')");
    before.close();

    const opened = await w.open(path, 1n);
    assert.equal(w.lastRestore().outcome, "adopted");
    const local = Deno.readFileSync(path);
    assert.deepEqual(opened.replica.position, {
      txid: 1n,
      checksum: databaseChecksum(local, PAGE_SIZE),
    });
    assert.deepEqual(await w.actorKeys(), [
      `wal/${hex(1n)}/${hex(1n)}-${hex(1n)}.ltx`,
      `wal/${hex(1n)}/base`,
    ]);
    const base = JSON.parse(
      new TextDecoder().decode((await w.bucket.inner.get(baseKey(ACTOR, 1n)))!.body),
    );
    assert.equal(base.txid, "0000000000000000");
    assert.equal(base.checksum, "8000000000000000");
    assert.equal(base.generation, "0000000000000001");
    const [snapshot] = await storedFiles(w.bucket.inner, ACTOR);
    const chain = await verifyLtxChainBytes([snapshot.bytes]);
    assert.ok(chain.ok, chain.output);
    assert.deepEqual(chain.image, local);

    const expected = rows(opened.db);
    assert.equal(expected.length, 2);
    await event(opened, "INSERT INTO items(name, body) VALUES ('new', 'y')");
    const after = rows(opened.db);
    assert.equal(await opened.replica.close(() => opened.db.close()), true);
    const restored = await w.open(w.path("b"), 2n);
    assert.equal(w.lastRestore().outcome, "restored");
    assert.deepEqual(rows(restored.db), after);
    assert.equal(integrity(restored.db), "ok");
    restored.db.close();
  } finally {
    w.close();
  }
});

Deno.test("replica: a torn local database with no history is not adopted: kept as .replaced, the actor starts empty", async () => {
  const w = new World();
  try {
    const path = w.path("a");
    const before = new DatabaseSync(path);
    before.exec(SCHEMA);
    before.exec("INSERT INTO items(name, body) VALUES ('old', randomblob(20000))");
    before.close();
    // A power loss tore it: its second page is garbage.
    const bytes = Deno.readFileSync(path);
    bytes.fill(0xa5, PAGE_SIZE, 2 * PAGE_SIZE);
    Deno.writeFileSync(path, bytes);

    const opened = await w.open(path, 1n);
    assert.equal(w.lastRestore().outcome, "empty");
    assert.deepEqual(Deno.readFileSync(path + ".replaced"), bytes);
    assert.equal(exists(path + "-shm"), false);
    // It works as a new actor: events are captured and uploaded from TXID 1.
    assert.equal(
      await event(opened, SCHEMA, "INSERT INTO items(name, body) VALUES ('new', 'y')"),
      1n,
    );
    assert.equal(rows(opened.db).length, 1);
    assert.equal(await opened.replica.close(() => opened.db.close()), true);
  } finally {
    w.close();
  }
});

Deno.test("replica: an adopted file's -wal left by a crash belongs to it and is in the first snapshot", async () => {
  const w = new World();
  const scratch = Deno.makeTempDirSync({ prefix: "wasmkeep-crashed-" });
  try {
    // A database whose last commits are still in its -wal, as a crash leaves it.
    const source = new DatabaseSync(`${scratch}/x.db`);
    source.exec("PRAGMA journal_mode = WAL; PRAGMA wal_autocheckpoint = 0");
    source.exec(SCHEMA);
    source.exec("INSERT INTO items(name, body) VALUES ('in-wal', 'x')");
    const path = w.path("a");
    Deno.copyFileSync(`${scratch}/x.db`, path);
    Deno.copyFileSync(`${scratch}/x.db-wal`, `${path}-wal`);
    source.close();
    assert.ok(Deno.statSync(`${path}-wal`).size > 0);

    const opened = await w.open(path, 1n);
    assert.equal(w.lastRestore().outcome, "adopted");
    const expected = [[
      { tag: "integer", val: 1n },
      { tag: "text", val: "in-wal" },
      { tag: "text", val: "78" },
    ]];
    assert.deepEqual(rows(opened.db), expected);
    const [snapshot] = await storedFiles(w.bucket.inner, ACTOR);
    assert.equal(snapshot.minTxid, 1n);
    const chain = await verifyLtxChainBytes([snapshot.bytes]);
    assert.ok(chain.ok, chain.output);
    assert.deepEqual(chain.image, Deno.readFileSync(path));
    assert.equal(await opened.replica.close(() => opened.db.close()), true);

    // What the bucket has is the file with its -wal folded in.
    const restored = await w.open(w.path("b"), 2n);
    assert.equal(w.lastRestore().outcome, "restored");
    assert.deepEqual(rows(restored.db), expected);
    assert.equal(integrity(restored.db), "ok");
    restored.db.close();
  } finally {
    w.close();
    Deno.removeSync(scratch, { recursive: true });
  }
});

Deno.test("replica: a delete writes the marker, erases the history down to the marker alone, and a restore elsewhere gives an empty database", async () => {
  const w = new World();
  try {
    const path = w.path("a");
    await firstHold(w, path);
    const opened = await w.open(path, 2n);
    await event(opened, "INSERT INTO items(name, body) VALUES ('c', 'x')"); // TXID 4
    // storage.delete-self, as the executor does it: capture, wipe, record.
    assert.equal(opened.replica.capture(opened.db), undefined);
    opened.db.close();
    wipe(path);
    await opened.replica.recordDelete();

    const marker = decodeDeleted((await w.bucket.inner.get(deletedKey(ACTOR)))!.body);
    assert.equal(marker.generation, 2n);
    assert.equal(marker.txid, 5n);
    assert.deepEqual(opened.replica.position, { txid: 5n, checksum: CHECKSUM_FLAG });
    // The erasure runs in the background: wait for it (bounded).
    const erasedBy = Date.now() + 10_000;
    while ((await w.actorKeys()).length > 1 && Date.now() < erasedBy) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    assert.deepEqual(await w.actorKeys(), ["deleted"]);
    while (!w.counts.has("wasmkeep_history_collected_total") && Date.now() < erasedBy) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    // Generation 1's base and 1-1, 2-2, 3-3; generation 2's base and 4-4.
    assert.equal(w.counts.get("wasmkeep_history_collected_total"), 6);
    assert.equal(w.counts.get("wasmkeep_history_collect_failures_total"), undefined);
    await opened.replica.close(() => {});

    const elsewhere = w.path("b");
    const restored = await w.open(elsewhere, 3n);
    assert.deepEqual(w.lastRestore(), { outcome: "empty", files: 0, txid: "5" });
    assert.deepEqual(restored.replica.position, { txid: 5n, checksum: CHECKSUM_FLAG });
    assert.deepEqual(
      restored.db.exec("SELECT count(*) FROM sqlite_master WHERE name = 'items'", []).rows,
      [[{ tag: "integer", val: 0n }]],
    );
    // Written again, the actor starts over from a snapshot after the delete.
    await event(restored, SCHEMA, "INSERT INTO items(name, body) VALUES ('reborn', 'z')");
    const reborn = rows(restored.db);
    assert.equal(await restored.replica.close(() => restored.db.close()), true);
    assert.ok((await w.actorKeys()).includes(`wal/${hex(3n)}/${hex(1n)}-${hex(6n)}.ltx`));
    const third = await w.open(w.path("c"), 4n);
    assert.deepEqual(rows(third.db), reborn);
    assert.equal(integrity(third.db), "ok");
    third.db.close();
    assert.deepEqual(w.failures, []);
  } finally {
    w.close();
  }
});

Deno.test("replica: after a failed upload close reports it and removes the position file, so the next open restores what the bucket has", async () => {
  const w = new World();
  try {
    const path = w.path("a");
    const expected = await firstHold(w, path);
    const opened = await w.open(path, 2n);
    w.bucket.refusePut = (key) =>
      key.endsWith(".ltx")
        ? new BucketUnavailable(`PUT ${key}: 503`, { ambiguous: false })
        : undefined;
    opened.db.exec("INSERT INTO items(name, body) VALUES ('lost', 'x')", []);
    const txid = opened.replica.capture(opened.db)!;
    await assert.rejects(opened.replica.uploaded(txid), ReplicationFailed);
    assert.equal(w.failures.length, 1);
    assert.equal(await opened.replica.close(() => opened.db.close()), false);
    assert.ok(!exists(positionPath(path)));

    w.bucket.refusePut = undefined;
    const reopened = await w.open(path, 3n);
    assert.equal(w.lastRestore().outcome, "restored");
    assert.deepEqual(rows(reopened.db), expected);
    reopened.db.close();
  } finally {
    w.close();
  }
});

/** Lets background work on a memory bucket run (it needs no timers). */
async function drain(until: () => boolean): Promise<void> {
  for (let i = 0; i < 2000 && !until(); i++) await new Promise((r) => setTimeout(r, 0));
}

Deno.test("replica: a periodic snapshot after 64 uploads starts history collection: the older files go, the snapshot, the base and what follows stay", async () => {
  const clock = new FakeClock();
  const w = new World({ memory: new MemoryBucket({ clock }), clock, retentionMs: 60_000 });
  try {
    const opened = await w.open(w.path("a"), 1n);
    await event(opened, SCHEMA);
    for (let i = 0; i < 63; i++) {
      await event(opened, `INSERT INTO items(name, body) VALUES ('r${i}', randomblob(50))`);
    }
    assert.equal(opened.replica.snapshotDue(), false, "63 uploads after the first snapshot");
    await event(opened, "INSERT INTO items(name, body) VALUES ('r63', 'x')"); // TXID 65
    assert.equal(opened.replica.snapshotDue(), true);
    await clock.advance(61_000); // everything so far is older than the retention
    assert.equal(await opened.replica.snapshot(opened.db), true);
    await event(opened, "INSERT INTO items(name, body) VALUES ('after', 'y')"); // TXID 66
    await drain(() => w.counts.has("wasmkeep_history_collected_total"));
    assert.equal(w.counts.get("wasmkeep_history_collected_total"), 65); // 1-1 … 65-65
    assert.deepEqual(await w.actorKeys(), [
      `wal/${hex(1n)}/${hex(1n)}-${hex(65n)}.ltx`,
      `wal/${hex(1n)}/${hex(66n)}-${hex(66n)}.ltx`,
      `wal/${hex(1n)}/base`,
    ]);
    const expected = rows(opened.db);
    assert.equal(await opened.replica.close(() => opened.db.close()), true);
    const restored = await w.open(w.path("b"), 2n);
    assert.deepEqual(rows(restored.db), expected);
    assert.equal(integrity(restored.db), "ok");
    restored.db.close();
  } finally {
    w.close();
  }
});

Deno.test({
  name:
    "replica: an actor restored after a delete at TXID 64 or later survives a periodic snapshot asked for while its first file is in flight",
  fn: async () => {
    const w = new World();
    try {
      const path = w.path("a");
      const first = await w.open(path, 1n);
      await event(first, SCHEMA);
      for (let i = 0; i < 69; i++) await event(first, `INSERT INTO items(name) VALUES ('r${i}')`);
      first.db.close();
      wipe(path);
      await first.replica.recordDelete(); // at TXID 71
      await first.replica.close(() => {});

      const second = await w.open(w.path("b"), 2n);
      assert.deepEqual(second.replica.position, { txid: 71n, checksum: CHECKSUM_FLAG });
      // The executor asks before each event; with nothing in the database it is a no-op.
      if (second.replica.snapshotDue()) await second.replica.snapshot(second.db);
      second.db.exec(SCHEMA, []);
      second.replica.capture(second.db); // TXID 72: the snapshot 1-72, in flight
      // The next event starts before that file landed.
      if (second.replica.snapshotDue()) await second.replica.snapshot(second.db);
      await second.replica.uploader.settled();
      assert.deepEqual(w.failures, []);
      assert.equal(await second.replica.close(() => second.db.close()), true);
    } finally {
      w.close();
    }
  },
});

Deno.test({
  name:
    "replica: a delete whose history erasure cannot list the bucket counts a collection failure and leaves no unhandled rejection",
  fn: async () => {
    const clock = new FakeClock();
    const w = new World({ memory: new MemoryBucket({ clock }), clock });
    const unhandled: unknown[] = [];
    const onUnhandled = (e: PromiseRejectionEvent) => {
      e.preventDefault();
      unhandled.push(e.reason);
    };
    globalThis.addEventListener("unhandledrejection", onUnhandled);
    try {
      const path = w.path("a");
      const opened = await w.open(path, 1n);
      await event(opened, SCHEMA);
      opened.db.close();
      wipe(path);
      w.bucket.refuseList = (prefix) =>
        new BucketUnavailable(`LIST ${prefix}: 503`, { ambiguous: false });
      await opened.replica.recordDelete();
      await clock.advance(5_000); // the listing's resends, half a second then a second
      await new Promise((resolve) => setTimeout(resolve, 50));
      assert.deepEqual(unhandled, []);
      // The erasure's; a collection after the first snapshot may also meet the refusal.
      assert.ok((w.counts.get("wasmkeep_history_collect_failures_total") ?? 0) >= 1);
    } finally {
      globalThis.removeEventListener("unhandledrejection", onUnhandled);
      w.close();
    }
  },
});
