import assert from "node:assert/strict";
import { MemoryBucket } from "../../src/bucket/memory.ts";
import { createLogger } from "../../src/log.ts";
import { CHECKSUM_FLAG } from "../../src/ltx/checksum.ts";
import { HistoryError, walFileKey } from "../../src/replication/history.ts";
import { ReadLimiter } from "../../src/replication/read_limiter.ts";
import {
  restoreActor,
  type RestoreOptions,
  type RestoreResult,
} from "../../src/replication/restore.ts";
import { FakeClock } from "../bucket/fake_clock.ts";
import {
  ACTOR,
  type BuiltFile,
  inspect,
  putBase,
  putDeleted,
  putFile,
  SCHEMA,
  SourceDb,
} from "./source_db.ts";

/** A bucket, a source database and a directory for the restored file. */
class World {
  readonly clock = new FakeClock();
  readonly bucket = new MemoryBucket({ clock: this.clock });
  readonly source = new SourceDb();
  readonly dir = Deno.makeTempDirSync({ prefix: "wasmkeep-restore-" });
  readonly path = `${this.dir}/lobby.db`;
  readonly limiter = new ReadLimiter();

  restore(options: Partial<RestoreOptions> = {}): Promise<RestoreResult> {
    return restoreActor({
      bucket: this.bucket,
      clock: this.clock,
      actor: ACTOR,
      path: this.path,
      limiter: this.limiter,
      ...options,
    });
  }

  /** Puts one file of the pending commits under `generation`. */
  async upload(generation: bigint, options: { snapshot?: boolean } = {}): Promise<BuiltFile> {
    const file = this.source.file(options);
    await putFile(this.bucket, generation, file);
    return file;
  }

  /** Checks the restored file is the source, byte for byte and row for row. */
  assertRestored(): void {
    assert.deepEqual(Deno.readFileSync(this.path), this.source.image());
    const { check, rows } = inspect(this.path);
    assert.equal(check, "ok");
    assert.deepEqual(rows, this.source.rows());
  }

  leftovers(): string[] {
    return [...Deno.readDirSync(this.dir)].map((e) => e.name).sort();
  }

  close(): void {
    this.source.close();
    Deno.removeSync(this.dir, { recursive: true });
  }
}

/**
 * Two generations: generation 1 from an empty database (snapshot 1-5, 6-7,
 * 8-8), generation 2 taking over at TXID 8 (9-12, an overflow row, updates
 * and deletes, a VACUUM), and a late upload of generation 1 past its cap.
 */
async function twoGenerations(w: World): Promise<void> {
  await putBase(w.bucket, 1n, 0n, CHECKSUM_FLAG);
  w.source.exec(SCHEMA);
  w.source.insert(3, "first");
  await w.upload(1n);
  w.source.insert(2, "second");
  await w.upload(1n);
  w.source.insert(1, "third");
  await w.upload(1n);
  await putBase(w.bucket, 2n, w.source.txid, w.source.checksum());
  // Generation 1's owner, paused, lands garbage after generation 2 took over.
  await w.bucket.put(walFileKey(ACTOR, 1n, 9n, 9n), new Uint8Array([1, 2, 3]));
  w.source.insert(4, "fourth");
  await w.upload(2n);
  w.source.exec("INSERT INTO items(name, body) VALUES ('overflow', randomblob(20000))");
  w.source.exec("UPDATE items SET name = name || '!' WHERE id % 2 = 0");
  await w.upload(2n);
  w.source.exec("DELETE FROM items WHERE id % 3 = 0");
  w.source.exec("VACUUM");
  await w.upload(2n);
}

Deno.test("restore: a real database across two generations, byte for byte", async () => {
  const w = new World();
  try {
    await twoGenerations(w);
    const result = await w.restore();
    assert.equal(result.outcome, "restored");
    assert.equal(result.txid, w.source.txid);
    assert.equal(result.checksum, w.source.checksum());
    assert.equal(result.highestGeneration, 2n);
    assert.equal(result.snapshotTxid, 5n);
    assert.equal(result.filesRead, 6);
    assert.ok(result.bytesRead > 20_000);
    w.assertRestored();
    assert.deepEqual(w.leftovers(), ["lobby.db"]);
  } finally {
    w.close();
  }
});

Deno.test("restore: a local database on the chain is current, or gets only the files after it", async () => {
  const w = new World();
  try {
    await twoGenerations(w);
    const first = await w.restore();
    const local = { txid: first.txid, checksum: first.checksum };
    const before = Deno.readFileSync(w.path);

    const current = await w.restore({ local });
    assert.equal(current.outcome, "current");
    assert.equal(current.txid, local.txid);
    assert.equal(current.checksum, local.checksum);
    assert.equal(current.filesRead, 1); // the last file confirms the checksum
    assert.deepEqual(Deno.readFileSync(w.path), before);
    assert.deepEqual(w.leftovers(), ["lobby.db"]);

    w.source.insert(2, "fifth");
    await w.upload(2n);
    w.source.insert(1, "sixth");
    await w.upload(2n);
    const resumed = await w.restore({ local });
    assert.equal(resumed.outcome, "restored");
    assert.equal(resumed.filesRead, 2);
    assert.equal(resumed.txid, w.source.txid);
    w.assertRestored();
    assert.deepEqual(Deno.readFileSync(`${w.path}.replaced`), before);

    // A local file that claims a state the chain never had is restored from the start.
    const off = await w.restore({ local: { txid: resumed.txid, checksum: CHECKSUM_FLAG | 7n } });
    assert.equal(off.outcome, "restored");
    assert.equal(off.filesRead, 1 + 8); // the file that refuted it, then all
    w.assertRestored();
    // Its pre-apply checksum gives a wrong local state away even when the TXID is on the chain.
    const wrong = await w.restore({ local: { txid: first.txid, checksum: CHECKSUM_FLAG | 7n } });
    assert.equal(wrong.outcome, "restored");
    assert.ok(wrong.filesRead >= 1 + 8, `${wrong.filesRead} files read`);
    w.assertRestored();
  } finally {
    w.close();
  }
});

Deno.test("restore: the local file and its -wal are kept as .replaced, one generation", async () => {
  const w = new World();
  try {
    await twoGenerations(w);
    Deno.writeFileSync(w.path, new Uint8Array([1]));
    Deno.writeFileSync(`${w.path}-wal`, new Uint8Array([2]));
    Deno.writeFileSync(`${w.path}.restoring`, new Uint8Array([9])); // a crashed restore's
    await w.restore();
    w.assertRestored();
    assert.deepEqual(Deno.readFileSync(`${w.path}.replaced`), new Uint8Array([1]));
    assert.deepEqual(Deno.readFileSync(`${w.path}.replaced-wal`), new Uint8Array([2]));
    assert.deepEqual(w.leftovers(), ["lobby.db", "lobby.db.replaced", "lobby.db.replaced-wal"]);

    Deno.writeFileSync(w.path, new Uint8Array([3]));
    await w.restore();
    w.assertRestored();
    assert.deepEqual(Deno.readFileSync(`${w.path}.replaced`), new Uint8Array([3]));
    assert.deepEqual(w.leftovers(), ["lobby.db", "lobby.db.replaced"]);
  } finally {
    w.close();
  }
});

/** Runs a restore that must fail, and checks the local files did not change. */
async function failsUntouched(w: World, kind: string): Promise<HistoryError> {
  Deno.writeFileSync(w.path, new Uint8Array([7, 7, 7]));
  Deno.writeFileSync(`${w.path}-wal`, new Uint8Array([8]));
  const error = await w.restore().then(() => undefined, (e) => e);
  assert.ok(error instanceof HistoryError, `expected a HistoryError, got ${error}`);
  assert.equal(error.kind, kind, error.message);
  assert.deepEqual(Deno.readFileSync(w.path), new Uint8Array([7, 7, 7]));
  assert.deepEqual(Deno.readFileSync(`${w.path}-wal`), new Uint8Array([8]));
  assert.deepEqual(w.leftovers(), ["lobby.db", "lobby.db-wal"]);
  return error;
}

Deno.test("restore: a corrupted file is a HistoryError and the local file stays byte-identical", async () => {
  const w = new World();
  try {
    await twoGenerations(w);
    const key = walFileKey(ACTOR, 2n, 9n, 12n);
    const bytes = (await w.bucket.get(key))!.body;
    bytes[200] ^= 0xff;
    await w.bucket.put(key, bytes);
    const error = await failsUntouched(w, "corruption");
    assert.match(error.message, /0000000000000009-000000000000000c/);
  } finally {
    w.close();
  }
});

Deno.test("restore: a file that does not follow the running checksum is corruption", async () => {
  const w = new World();
  const other = new SourceDb();
  try {
    // Two databases with the same TXIDs and different contents.
    for (const s of [w.source, other]) {
      s.exec(SCHEMA);
      s.insert(3);
    }
    await w.upload(1n);
    other.file();
    other.insert(1);
    await putFile(w.bucket, 1n, other.file());
    const error = await failsUntouched(w, "corruption");
    assert.match(error.message, /pre-apply checksum/);
  } finally {
    other.close();
    w.close();
  }
});

Deno.test("restore: a base the walk reaches with another checksum is corruption", async () => {
  const w = new World();
  try {
    await twoGenerations(w);
    await putBase(w.bucket, 3n, w.source.txid, w.source.checksum() ^ 1n);
    const error = await failsUntouched(w, "corruption");
    assert.match(error.message, /a base says/);
  } finally {
    w.close();
  }
});

Deno.test("restore: a file holding other TXIDs than its key says is malformed", async () => {
  const w = new World();
  try {
    w.source.exec(SCHEMA);
    await w.upload(1n);
    w.source.insert(2);
    const file = w.source.file();
    await w.bucket.put(walFileKey(ACTOR, 1n, file.minTxid, file.minTxid), file.bytes);
    await failsUntouched(w, "malformed");
  } finally {
    w.close();
  }
});

Deno.test("restore: a gap is a HistoryError", async () => {
  const w = new World();
  try {
    w.source.exec(SCHEMA);
    await w.upload(1n);
    w.source.insert(1);
    w.source.file(); // never uploaded
    w.source.insert(1);
    await w.upload(1n);
    await failsUntouched(w, "gap");
  } finally {
    w.close();
  }
});

Deno.test("restore: after a delete, the history starts again from the marker", async () => {
  const w = new World();
  try {
    await twoGenerations(w);
    const deletedAt = w.source.txid + 1n;
    await putDeleted(w.bucket, 2n, deletedAt);

    // Only the marker: the database is empty; a local file is moved aside.
    Deno.writeFileSync(w.path, new Uint8Array([5]));
    const empty = await w.restore();
    assert.equal(empty.outcome, "empty");
    assert.equal(empty.txid, deletedAt);
    assert.equal(empty.checksum, CHECKSUM_FLAG);
    assert.deepEqual(w.leftovers(), ["lobby.db.replaced"]);
    const current = await w.restore({ local: { txid: deletedAt, checksum: CHECKSUM_FLAG } });
    assert.equal(current.outcome, "current");

    // Generation 3 takes the deleted actor over and writes it anew.
    const fresh = new SourceDb({ afterTxid: deletedAt });
    try {
      await putBase(w.bucket, 3n, deletedAt, CHECKSUM_FLAG);
      fresh.exec(SCHEMA);
      fresh.insert(2, "reborn");
      const snapshot = fresh.file();
      assert.equal(snapshot.minTxid, 1n);
      assert.equal(snapshot.maxTxid, deletedAt + 4n);
      await putFile(w.bucket, 3n, snapshot);
      fresh.insert(1, "again");
      await putFile(w.bucket, 3n, fresh.file());
      const result = await w.restore();
      assert.equal(result.outcome, "restored");
      assert.equal(result.txid, fresh.txid);
      assert.equal(result.highestGeneration, 3n);
      assert.deepEqual(Deno.readFileSync(w.path), fresh.image());
      assert.deepEqual(inspect(w.path).rows, fresh.rows());
    } finally {
      fresh.close();
    }
  } finally {
    w.close();
  }
});

Deno.test("restore: with no history at all the local file is left for the caller", async () => {
  const w = new World();
  try {
    const nothing = await w.restore();
    assert.deepEqual(nothing, {
      txid: 0n,
      checksum: CHECKSUM_FLAG,
      outcome: "empty",
      filesRead: 0,
      bytesRead: 0,
      highestGeneration: 0n,
      snapshotTxid: 0n,
    });
    Deno.writeFileSync(w.path, new Uint8Array([4]));
    assert.equal((await w.restore()).outcome, "empty");
    assert.deepEqual(Deno.readFileSync(w.path), new Uint8Array([4]));
    // Bases alone are no history: nothing was ever written (an adoption
    // whose snapshot failed leaves one), so the local file is still kept.
    await putBase(w.bucket, 1n, 0n, CHECKSUM_FLAG);
    assert.equal((await w.restore()).outcome, "empty");
    assert.deepEqual(Deno.readFileSync(w.path), new Uint8Array([4]));
    assert.deepEqual(w.leftovers(), ["lobby.db"]);
  } finally {
    w.close();
  }
});

Deno.test("restore: a flaky, slow bucket still restores the same database", async () => {
  const w = new World();
  try {
    await twoGenerations(w);
    w.bucket.faults = { latencyMs: { min: 10, max: 800 }, errorRate: 0.2, errorStatuses: [503] };
    const restore = w.restore();
    await w.clock.runUntilSettled(restore);
    const result = await restore;
    assert.equal(result.txid, w.source.txid);
    w.assertRestored();
  } finally {
    w.close();
  }
});

Deno.test("restore: a listing of several pages, keys of other shapes ignored and logged", async () => {
  const w = new World();
  const lines: string[] = [];
  try {
    await twoGenerations(w);
    for (let i = 0; i < 1_200; i++) {
      await w.bucket.put(`actors/acme/room/lobby/wal/junk-${i}`, new Uint8Array([0]));
    }
    const result = await w.restore({ log: createLogger({ sink: (l) => lines.push(l) }) });
    assert.equal(result.txid, w.source.txid);
    w.assertRestored();
    assert.equal(lines.filter((l) => l.includes("no known shape")).length, 1_200);
    assert.equal(lines.filter((l) => l.includes("set aside")).length, 1); // the late upload
  } finally {
    w.close();
  }
});

Deno.test("restore: the caller's signal abandons it and leaves the local file", async () => {
  const w = new World();
  try {
    await twoGenerations(w);
    Deno.writeFileSync(w.path, new Uint8Array([6]));
    w.bucket.faults = { latencyMs: { min: 1_000, max: 1_000 } };
    const controller = new AbortController();
    const restore = w.restore({ signal: controller.signal });
    const outcome = restore.catch((e) => e);
    await w.clock.advance(2_500);
    controller.abort(new Error("shutting down"));
    assert.equal((await outcome).message, "shutting down");
    assert.deepEqual(w.leftovers(), ["lobby.db"]);
    assert.deepEqual(Deno.readFileSync(w.path), new Uint8Array([6]));
  } finally {
    w.close();
  }
});
