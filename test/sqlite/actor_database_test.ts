import assert from "node:assert/strict";
import { ActorDatabase } from "../../src/sqlite/actor_database.ts";

/** The first value of the first row, as text. */
function first(db: ActorDatabase, sql: string): string {
  const value = db.exec(sql, []).rows[0][0];
  return value.tag === "null" ? "null" : String(value.val);
}

function pragma(db: ActorDatabase, name: string): string {
  return first(db, `PRAGMA ${name}`);
}

Deno.test("ActorDatabase: a replicated database leaves checkpoints to the host and never fsyncs; a local one keeps SQLite's checkpoints with synchronous NORMAL", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const replicated = new ActorDatabase(`${dir}/r.db`);
    const local = new ActorDatabase(`${dir}/l.db`, { mode: "local" });
    try {
      assert.equal(replicated.mode, "replicated");
      assert.deepEqual(
        [pragma(replicated, "journal_mode"), pragma(replicated, "synchronous")],
        ["wal", "0"],
      );
      assert.equal(pragma(replicated, "wal_autocheckpoint"), "0");
      assert.deepEqual([pragma(local, "journal_mode"), pragma(local, "synchronous")], ["wal", "1"]);
      assert.equal(pragma(local, "wal_autocheckpoint"), "1000");
      assert.throws(() => replicated.syncToDisk(), /is replicated/);
      // A local database has no snapshot reader: nothing reads its pages.
      assert.throws(() => local.readPage(1), /is local/);
    } finally {
      replicated.close();
      local.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("ActorDatabase.syncToDisk: after commits, with no -wal, refused inside a transaction", async () => {
  const dir = await Deno.makeTempDir();
  try {
    const db = new ActorDatabase(`${dir}/a.db`, { mode: "local" });
    try {
      db.exec("CREATE TABLE t(x)", []);
      db.exec("INSERT INTO t VALUES (1)", []);
      db.syncToDisk();
      db.syncToDisk();
      db.exec("BEGIN", []);
      db.exec("INSERT INTO t VALUES (2)", []);
      assert.throws(() => db.syncToDisk(), /transaction open/);
      db.exec("COMMIT", []);
      db.syncToDisk();
      assert.equal(first(db, "SELECT count(*) FROM t"), "2");
    } finally {
      db.close();
    }
    // Closed cleanly, SQLite checkpointed and removed the -wal: a new
    // connection finds everything in the file and nothing to fsync but it.
    assert.throws(() => Deno.statSync(`${dir}/a.db-wal`), Deno.errors.NotFound);
    const again = new ActorDatabase(`${dir}/a.db`, { mode: "local" });
    try {
      again.syncToDisk();
      assert.equal(first(again, "SELECT count(*) FROM t"), "2");
    } finally {
      again.close();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
