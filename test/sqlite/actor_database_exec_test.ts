import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { ActorDatabase, META_TABLE, type SqlValue } from "../../src/sqlite/actor_database.ts";

/**
 * Each statement runs on an ActorDatabase and on a plain connection beside
 * it (the oracle), which reads SQLite's own counters after every statement:
 * changes() when total_changes() moved, else 0, and last_insert_rowid().
 * ActorDatabase reads those counters only when a statement's first keyword
 * does not tell them (and a statement other than INSERT, UPDATE or DELETE
 * changes nothing, where SQLite's changes() would still count the last one), so every kind of statement is here, in an order where
 * a stale rowid would show.
 */
const SCHEMA = [
  "CREATE TABLE t (id INTEGER PRIMARY KEY, x TEXT UNIQUE)",
  "CREATE TABLE log (id INTEGER PRIMARY KEY, what TEXT)",
  // A trigger's insert moves last_insert_rowid() only while the trigger runs.
  "CREATE TRIGGER t_updated AFTER UPDATE ON t BEGIN INSERT INTO log (what) VALUES ('u'); END",
  // An UPDATE ... RETURNING on it returns rows and changes none.
  "CREATE VIEW v AS SELECT id, x FROM t",
  "CREATE TRIGGER v_update INSTEAD OF UPDATE ON v BEGIN UPDATE t SET x = new.x WHERE id = old.id; END",
];

const STEPS: (string | "host-rollback" | "host-set-meta")[] = [
  "SELECT count(*) FROM t",
  "INSERT INTO t (x) VALUES ('a')",
  "INSERT INTO t (x) VALUES ('b') RETURNING id",
  "select id, x from t order by id",
  "INSERT INTO t (x) VALUES ('a') ON CONFLICT (x) DO NOTHING RETURNING id",
  "INSERT INTO log (what) VALUES ('by hand')",
  "INSERT INTO t (x) VALUES ('a') ON CONFLICT (x) DO UPDATE SET x = x RETURNING id",
  "SELECT x FROM t",
  "UPDATE t SET x = x || '!' RETURNING id",
  "SELECT 1",
  "VALUES (1), (2)",
  "WITH c AS (SELECT 1 AS one) SELECT one FROM c",
  "DELETE FROM t WHERE x = 'a!' RETURNING x",
  "\n  SELECT * FROM log",
  "UPDATE t SET x = 'none' WHERE id = 999 RETURNING id",
  "/* a comment first */ SELECT count(*) FROM log",
  "PRAGMA user_version",
  "BEGIN",
  "INSERT INTO t (x) VALUES ('in a transaction') RETURNING id",
  "SELECT id FROM t",
  "ROLLBACK",
  "SELECT id FROM t",
  "BEGIN",
  "INSERT INTO t (x) VALUES ('rolled back by the host')",
  "host-rollback",
  "SELECT count(*) FROM t",
  "host-set-meta",
  "SELECT count(*) FROM t",
  // Fails on the second row, after the first went in (then out again).
  "INSERT INTO t (x) VALUES ('c'), ('b!')",
  "SELECT count(*) FROM t",
  "INSERT INTO t (x) VALUES ('d'), ('b!') RETURNING id",
  "DELETE FROM log RETURNING id",
  "SELECT count(*) FROM log",
  // Statements without rows: only an INSERT, UPDATE or DELETE changes any.
  "CREATE TABLE u (y)",
  "-- a comment first\nINSERT INTO u VALUES (1)",
  "DROP TABLE u",
  "SAVEPOINT s",
  "WITH c AS (SELECT 'with') INSERT INTO log (what) SELECT * FROM c",
  "RELEASE s",
  "WITH c AS (SELECT 0) DELETE FROM log WHERE id > (SELECT * FROM c)",
  "PRAGMA user_version = 7",
  "UPDATE t SET x = x WHERE id < 0",
  "REPLACE INTO t (id, x) VALUES (2, 'replaced')",
  "UPDATE v SET x = x RETURNING id",
  // SQLite skips empty statements and a byte order mark before the first word.
  "; INSERT INTO log (what) VALUES ('after an empty statement')",
  ";UPDATE log SET what = what",
  "\uFEFFINSERT INTO log (what) VALUES ('after a byte order mark')",
  "/* INSERT */ SELECT count(*) FROM t",
];

Deno.test("ActorDatabase.exec: changes and last_insert_rowid agree with SQLite's own counters after every kind of statement", () => {
  const dir = Deno.makeTempDirSync();
  const db = new ActorDatabase(`${dir}/actor.db`, { mode: "local" });
  const oracle = new DatabaseSync(`${dir}/oracle.db`);
  try {
    oracle.exec(`CREATE TABLE ${META_TABLE} (key TEXT PRIMARY KEY, value TEXT)`);
    for (const sql of SCHEMA) {
      db.exec(sql, []);
      oracle.exec(sql);
    }
    const counters = oracle.prepare(
      "SELECT total_changes() AS t, changes() AS c, last_insert_rowid() AS r",
    );
    counters.setReadBigInts(true);
    const read = () => counters.get() as { t: bigint; c: bigint; r: bigint };
    for (const step of STEPS) {
      const before = read().t;
      if (step === "host-rollback") {
        db.rollback();
        oracle.exec("ROLLBACK");
        continue;
      }
      if (step === "host-set-meta") {
        db.setMeta("k", "v");
        oracle.prepare(`INSERT INTO ${META_TABLE} (key, value) VALUES ('k', 'v')`).run();
        continue;
      }
      let failed: unknown;
      let result;
      try {
        result = db.exec(step, []);
      } catch (error) {
        failed = error;
      }
      let expectedRows: unknown[] = [];
      let oracleFailed = false;
      try {
        const statement = oracle.prepare(step);
        statement.setReadBigInts(true);
        expectedRows = statement.columns().length ? statement.all() : (statement.run(), []);
      } catch {
        oracleFailed = true;
      }
      assert.equal(
        failed !== undefined,
        oracleFailed,
        `${step}: fails on one side only (${failed})`,
      );
      const after = read();
      if (failed) continue;
      assert.equal(result!.rows.length, expectedRows.length, `${step}: rows`);
      assert.equal(result!.changes, after.t === before ? 0n : after.c, `${step}: changes`);
      assert.equal(result!.lastInsertRowid, after.r, `${step}: last_insert_rowid`);
    }
  } finally {
    db.close();
    oracle.close();
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("ActorDatabase.exec: an UPDATE or DELETE with RETURNING reports the rows it changed", () => {
  const dir = Deno.makeTempDirSync();
  const db = new ActorDatabase(`${dir}/actor.db`, { mode: "local" });
  try {
    db.exec("CREATE TABLE t (x INTEGER)", []);
    const values: SqlValue[] = [1n, 2n, 3n].map((val) => ({ tag: "integer", val }));
    for (const value of values) db.exec("INSERT INTO t VALUES (?)", [value]);
    const updated = db.exec("UPDATE t SET x = x * 10 WHERE x > 1 RETURNING x", []);
    assert.deepEqual(updated.rows, [[{ tag: "integer", val: 20n }], [{
      tag: "integer",
      val: 30n,
    }]]);
    assert.equal(updated.changes, 2n);
    assert.equal(updated.lastInsertRowid, 3n);
    const read = db.exec("SELECT x FROM t", []);
    assert.equal(read.changes, 0n);
    assert.equal(read.lastInsertRowid, 3n);
    assert.equal(db.exec("DELETE FROM t RETURNING x", []).changes, 3n);
  } finally {
    db.close();
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("ActorDatabase.exec: a statement prepared before the schema changed gives the new schema's columns", () => {
  const dir = Deno.makeTempDirSync();
  const db = new ActorDatabase(`${dir}/actor.db`, { mode: "local" });
  const text = (val: string): SqlValue => ({ tag: "text", val });
  try {
    db.exec("CREATE TABLE t (id INTEGER PRIMARY KEY, x TEXT)", []);
    db.exec("INSERT INTO t (x) VALUES ('a')", []);
    assert.deepEqual(db.exec("SELECT * FROM t", []).columns, ["id", "x"]);

    db.exec("ALTER TABLE t ADD COLUMN y TEXT DEFAULT 'new'", []);
    const added = db.exec("SELECT * FROM t", []);
    assert.deepEqual(added.columns, ["id", "x", "y"]);
    assert.deepEqual(added.rows, [[{ tag: "integer", val: 1n }, text("a"), text("new")]]);

    // Undone by the actor's ROLLBACK, then by the host's.
    db.exec("BEGIN", []);
    db.exec("ALTER TABLE t ADD COLUMN z TEXT DEFAULT 'gone'", []);
    assert.deepEqual(db.exec("SELECT * FROM t", []).columns, ["id", "x", "y", "z"]);
    db.exec("ROLLBACK", []);
    assert.deepEqual(db.exec("SELECT * FROM t", []).columns, ["id", "x", "y"]);
    db.exec("BEGIN", []);
    db.exec("ALTER TABLE t ADD COLUMN z TEXT DEFAULT 'gone'", []);
    assert.deepEqual(db.exec("SELECT * FROM t", []).columns, ["id", "x", "y", "z"]);
    db.rollback();
    assert.deepEqual(db.exec("SELECT * FROM t", []).rows[0].length, 3);

    db.exec("DROP TABLE t", []);
    db.exec("CREATE TABLE t (z TEXT)", []);
    db.exec("INSERT INTO t VALUES ('other')", []);
    const replaced = db.exec("SELECT * FROM t", []);
    assert.deepEqual(replaced.columns, ["z"]);
    assert.deepEqual(replaced.rows, [[text("other")]]);
  } finally {
    db.close();
    Deno.removeSync(dir, { recursive: true });
  }
});
