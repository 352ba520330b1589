import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { ActorDatabase, META_TABLE, toSqlError } from "../../src/sqlite/actor_database.ts";
import { exists } from "../helpers/exists.ts";

/** Runs `body` with a fresh actor database (local, as a standalone node keeps it) in a temporary directory. */
function withActorDatabase(body: (db: ActorDatabase, dir: string) => void) {
  const dir = Deno.makeTempDirSync();
  const db = new ActorDatabase(`${dir}/actor.db`, { mode: "local" });
  try {
    db.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, x TEXT)", []);
    db.exec("INSERT INTO t (x) VALUES ('a')", []);
    body(db, dir);
  } finally {
    db.close();
    Deno.removeSync(dir, { recursive: true });
  }
}

/** The SQL error the actor gets for `sql`; fails when it runs. */
function refused(db: ActorDatabase, sql: string): { code: string; message: string } {
  try {
    db.exec(sql, []);
  } catch (error) {
    return toSqlError(error);
  }
  assert.fail(`${JSON.stringify(sql)} ran`);
}

function value(db: ActorDatabase, sql: string): unknown {
  const row = db.exec(sql, []).rows[0][0];
  return row.tag === "null" ? null : row.val;
}

Deno.test("actor SQL: another database cannot be attached, nor a copy written anywhere", () => {
  withActorDatabase((db, dir) => {
    // Another actor's database, in the same data directory.
    const other = new DatabaseSync(`${dir}/other.db`);
    other.exec("CREATE TABLE secrets (s TEXT); INSERT INTO secrets VALUES ('theirs')");
    other.close();

    const attach = refused(db, `ATTACH DATABASE '${dir}/other.db' AS other`);
    assert.equal(attach.code, "SQLITE_AUTH");
    assert.match(attach.message, /ATTACH is not allowed/);
    assert.match(refused(db, `/* */ attach '${dir}/new.db' as n`).message, /ATTACH/);
    assert.equal(exists(`${dir}/new.db`), false);

    const copy = refused(db, `VACUUM INTO '${dir}/copy.db'`);
    assert.equal(copy.code, "SQLITE_AUTH");
    assert.match(copy.message, /only a plain VACUUM is available to actors, not VACUUM INTO/);
    assert.match(refused(db, `VACUUM main /* */ INTO '${dir}/copy.db'`).message, /VACUUM INTO/);
    assert.equal(exists(`${dir}/copy.db`), false);

    // The refusals left the database as it was, and the next statement runs.
    assert.equal(value(db, "SELECT x FROM t"), "a");
  });
});

Deno.test("actor SQL: the host's settings can be read but not changed", () => {
  withActorDatabase((db) => {
    for (
      const sql of [
        "PRAGMA journal_mode = DELETE",
        "pragma JOURNAL_MODE = off",
        "PRAGMA main.locking_mode = NORMAL",
        "PRAGMA synchronous = OFF",
        "PRAGMA wal_autocheckpoint = 1",
        "PRAGMA cache_size = -1000000",
        "PRAGMA hard_heap_limit = 1",
        "PRAGMA mmap_size = 1000000000",
        "PRAGMA query_only = 1",
      ]
    ) {
      const error = refused(db, sql);
      assert.equal(error.code, "SQLITE_AUTH", sql);
      assert.match(error.message, /the host's: an actor may only read it/, sql);
    }
    for (
      const sql of [
        "PRAGMA wal_checkpoint(TRUNCATE)",
        "PRAGMA writable_schema = ON",
        "PRAGMA count_changes = 1",
        "PRAGMA temp_store_directory = '/tmp'",
      ]
    ) {
      assert.match(refused(db, sql).message, /is not available to actors/, sql);
    }
    assert.equal(value(db, "PRAGMA journal_mode"), "wal");
    assert.equal(value(db, "PRAGMA locking_mode"), "exclusive");
    assert.equal(value(db, "PRAGMA synchronous"), 1n);
  });
});

Deno.test("actor SQL: its own settings, checks and introspection are allowed, and a plain VACUUM", () => {
  withActorDatabase((db, dir) => {
    db.exec("PRAGMA user_version = 7", []);
    assert.equal(value(db, "PRAGMA user_version"), 7n);
    db.exec("PRAGMA foreign_keys = ON", []);
    assert.equal(value(db, "PRAGMA foreign_keys"), 1n);
    assert.equal(value(db, "PRAGMA integrity_check"), "ok");
    assert.equal(db.exec("PRAGMA table_info(t)", []).rows.length, 2);
    assert.equal(db.exec("SELECT name FROM pragma_table_info('t')", []).rows.length, 2);
    assert.equal(typeof value(db, "PRAGMA page_count"), "bigint");

    db.exec("CREATE TABLE big (b BLOB)", []);
    db.exec("INSERT INTO big SELECT zeroblob(10000) FROM pragma_table_info('t')", []);
    db.exec("DROP TABLE big", []);
    const before = value(db, "PRAGMA page_count") as bigint;
    db.exec("VACUUM", []);
    db.exec("/* again, from the cache */ VACUUM", []);
    db.exec("VACUUM", []);
    assert.ok((value(db, "PRAGMA page_count") as bigint) < before);
    assert.equal(value(db, "SELECT x FROM t"), "a");
    assert.deepEqual([...Deno.readDirSync(dir)].map((e) => e.name).sort(), [
      "actor.db",
      "actor.db-wal",
    ]);
    // No statement but the VACUUM got room for an attached database.
    assert.match(refused(db, `ATTACH '${dir}/x.db' AS x`).message, /ATTACH is not allowed/);
  });
});

Deno.test("actor SQL: the host's own table is out of reach, and the host still uses it", () => {
  withActorDatabase((db) => {
    db.setMeta("init-version", "abc");
    for (
      const sql of [
        `SELECT * FROM ${META_TABLE}`,
        `select value from _WASMKEEP_META`,
        `INSERT INTO ${META_TABLE} VALUES ('init-version', 'forged')`,
        `UPDATE ${META_TABLE} SET value = 'forged'`,
        `DELETE FROM ${META_TABLE}`,
        `DROP TABLE ${META_TABLE}`,
        `ALTER TABLE ${META_TABLE} ADD COLUMN c`,
        `CREATE INDEX i ON ${META_TABLE} (value)`,
        `CREATE TRIGGER g AFTER INSERT ON ${META_TABLE} BEGIN SELECT 1; END`,
      ]
    ) {
      const error = refused(db, sql);
      assert.equal(error.code, "SQLITE_AUTH", sql);
      assert.match(error.message, /_wasmkeep_meta is WasmKeep's own/, sql);
    }
    // A trigger of the actor's own table that writes the host's table: the
    // statement that would fire it is refused.
    db.exec(
      `CREATE TRIGGER sneak AFTER INSERT ON t BEGIN UPDATE ${META_TABLE} SET value = 'forged'; END`,
      [],
    );
    assert.match(refused(db, "INSERT INTO t (x) VALUES ('b')").message, /WasmKeep's own/);
    assert.equal(db.getMeta("init-version"), "abc");
    db.setMeta("init-version", "def");
    assert.equal(db.getMeta("init-version"), "def");
  });
});
