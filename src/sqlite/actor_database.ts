/**
 * One actor's SQLite database: opened in WAL mode, statements run with
 * positional parameters, results in the shapes of the actor interface.
 * Replicated (cluster mode), the host checkpoints it after capturing each
 * event's commits and never fsyncs it; local (a standalone node, ADR 0005),
 * SQLite checkpoints it and durable writes are fsynced here.
 *
 * @module
 */

import { DatabaseSync, type SQLInputValue, type StatementSync } from "node:sqlite";
import type { LtxPage } from "../ltx/encoder.ts";
import { assert, AssertionError } from "../assert.ts";
import { actorSqlRefusal, META_TABLE } from "./actor_sql_policy.ts";
import { readWalCommits, WAL_HEADER_SIZE } from "./wal.ts";

/** A SQL value as the actor interface carries it (`storage.value`). */
export type SqlValue =
  | { tag: "null" }
  | { tag: "integer"; val: bigint }
  | { tag: "real"; val: number }
  | { tag: "text"; val: string }
  | { tag: "blob"; val: Uint8Array };

/** What a statement returned (`storage.exec-result`). */
export interface ExecResult {
  columns: string[];
  rows: SqlValue[][];
  changes: bigint;
  lastInsertRowid: bigint;
}

/** Why a statement failed (`storage.sql-error`). */
export interface SqlError {
  code: string;
  message: string;
}

/** Most rows one statement may return to an actor. */
export const MAX_RESULT_ROWS = 100_000;

/** Prepared statements kept per open database, least recently used dropped first. */
export const STATEMENT_CACHE_SIZE = 32;

export { META_TABLE };

/** What the transactions since the last capture changed, each page once. */
export interface CommittedPages {
  /** The database's page size. */
  pageSize: number;
  /** Size of the database in pages after the last of them. */
  commit: number;
  /** The pages they wrote, ascending, each with its last content, none past `commit`. */
  pages: LtxPage[];
}

/**
 * How a database is kept (ADR 0005). `replicated`: the bucket is the
 * durable copy; automatic checkpoints off (the host checkpoints once it read
 * an event's commits from the `-wal`) and `synchronous = OFF`. `local`: the
 * local disk is the only copy; SQLite's automatic checkpoints and
 * `synchronous = NORMAL` (a commit is not fsynced, a checkpoint is), and
 * {@linkcode ActorDatabase.syncToDisk} makes what committed durable.
 */
export type DatabaseMode = "replicated" | "local";

/** Options of {@linkcode ActorDatabase}. */
export interface ActorDatabaseOptions {
  /** Default `replicated`. */
  mode?: DatabaseMode;
}

/** A prepared statement and its result columns, cached together. */
interface Prepared {
  statement: StatementSync;
  columns: string[];
  /** What the statement can change, from its first keyword. */
  kind: StatementKind;
}

/**
 * What a statement can change, told from its first keyword (after spaces
 * and comments), so that most statements need no second statement to read
 * the connection's counters, and a statement that is not an INSERT, UPDATE
 * or DELETE reports no changes (SQLite's changes() still counts the last one
 * that was):
 * - `read`: SELECT or VALUES, which SQLite runs read-only (its common table
 *   expressions can only be SELECTs).
 * - `update-delete`: UPDATE or DELETE. With RETURNING, its rows do not tell
 *   what it changed (an INSTEAD OF trigger on a view returns rows and
 *   changes none), so the counters are read.
 * - `insert`: INSERT, REPLACE, or WITH before one of these three; with
 *   RETURNING, whether it set a new rowid is not known from its rows.
 * - `other`: anything else (CREATE, BEGIN, PRAGMA, ...), which changes no
 *   rows, and after which the schema may have changed.
 * - `vacuum`: a plain VACUUM, an `other` that needs the one attached
 *   database SQLite rebuilds the file in.
 */
type StatementKind = "read" | "update-delete" | "insert" | "other" | "vacuum";

function statementKind(keyword: string): StatementKind {
  switch (keyword) {
    case "SELECT":
    case "VALUES":
      return "read";
    case "UPDATE":
    case "DELETE":
      return "update-delete";
    case "INSERT":
    case "REPLACE":
    case "WITH":
      return "insert";
    default:
      return "other";
  }
}

/**
 * The statement's first word, upper-cased, after what SQLite skips before
 * it: spaces, comments, empty statements (`;`) and a byte order mark.
 */
function firstKeyword(sql: string): string {
  let at = 0;
  while (at < sql.length) {
    const code = sql.charCodeAt(at);
    if (code === 32 || (code >= 9 && code <= 13) || code === 59 || code === 0xfeff) {
      at++;
    } else if (sql.startsWith("--", at)) {
      const end = sql.indexOf("\n", at);
      if (end < 0) return "";
      at = end + 1;
    } else if (sql.startsWith("/*", at)) {
      const end = sql.indexOf("*/", at + 2);
      if (end < 0) return "";
      at = end + 2;
    } else {
      break;
    }
  }
  return /^[A-Za-z]+/.exec(sql.slice(at, at + 16))?.[0].toUpperCase() ?? "";
}

/**
 * Whether a statement that starts with VACUUM is a plain one (of the main
 * database, into itself): nothing after the keyword but comments, `main`
 * and a semicolon. Anything else, `VACUUM INTO 'file'` first, is not.
 */
function isPlainVacuum(sql: string): boolean {
  const bare = sql.replace(/--[^\n]*(\n|$)|\/\*[\s\S]*?(\*\/|$)/g, " ");
  return /^[\s;\uFEFF]*VACUUM(\s+(main|"main"|\[main\]|`main`))?[\s;]*$/i.test(bare);
}

// Deno's node:sqlite has setReturnArrays (rows as arrays, cheaper than
// objects) but its type declarations do not list it yet.
type ArrayStatement = StatementSync & { setReturnArrays(enabled: boolean): void };

// The same for these three, which Deno's node:sqlite has as Node's does.
type GuardedDatabase = DatabaseSync & {
  enableDefensive(active: boolean): void;
  limits: { attach: number };
  setAuthorizer(
    callback: (action: number, first: string | null, second: string | null) => number,
  ): void;
};

/** The authorizer's answers (`sqlite3.h`). */
const AUTHORIZER_OK = 0;
const AUTHORIZER_DENY = 1;

function prepareForActor(db: DatabaseSync, sql: string): StatementSync {
  const statement = db.prepare(sql) as ArrayStatement;
  statement.setReadBigInts(true);
  statement.setReturnArrays(true);
  return statement;
}

function toSqlValue(value: unknown): SqlValue {
  if (value === null || value === undefined) return { tag: "null" };
  if (typeof value === "bigint") return { tag: "integer", val: value };
  if (typeof value === "number") return { tag: "real", val: value };
  if (typeof value === "string") return { tag: "text", val: value };
  if (value instanceof Uint8Array) return { tag: "blob", val: value };
  // node:sqlite gives nothing else, with setReadBigInts.
  throw new AssertionError(
    `an SQLite value is null, a number, a string or bytes, not a ${typeof value}`,
  );
}

function toInput(value: SqlValue): SQLInputValue {
  return value.tag === "null" ? null : value.val;
}

/** SQLite's SQLITE_AUTH, as node:sqlite reports an error code. */
const SQLITE_AUTH = 23;

/** The error of a statement actor_sql_policy.ts refuses, as SQLite's would be with the reason. */
function notAuthorized(reason: string): Error {
  return Object.assign(new Error(`not authorized: ${reason}`), { errcode: SQLITE_AUTH });
}

/** Turns a thrown SQLite error into the interface's error record. */
export function toSqlError(error: unknown): SqlError {
  const e = error as { errstr?: string; code?: string; message?: string; errcode?: number };
  const code = e.errcode !== undefined ? sqliteCodeName(e.errcode) : e.code ?? "SQLITE_ERROR";
  return { code, message: e.message ?? String(error) };
}

const PRIMARY_CODES: Record<number, string> = {
  1: "SQLITE_ERROR",
  5: "SQLITE_BUSY",
  6: "SQLITE_LOCKED",
  7: "SQLITE_NOMEM",
  8: "SQLITE_READONLY",
  9: "SQLITE_INTERRUPT",
  10: "SQLITE_IOERR",
  11: "SQLITE_CORRUPT",
  13: "SQLITE_FULL",
  18: "SQLITE_TOOBIG",
  19: "SQLITE_CONSTRAINT",
  20: "SQLITE_MISMATCH",
  21: "SQLITE_MISUSE",
  23: "SQLITE_AUTH",
  25: "SQLITE_RANGE",
};

const EXTENDED_CODES: Record<number, string> = {
  275: "SQLITE_CONSTRAINT_CHECK",
  787: "SQLITE_CONSTRAINT_FOREIGNKEY",
  1299: "SQLITE_CONSTRAINT_NOTNULL",
  1555: "SQLITE_CONSTRAINT_PRIMARYKEY",
  2067: "SQLITE_CONSTRAINT_UNIQUE",
};

function sqliteCodeName(code: number): string {
  return EXTENDED_CODES[code] ?? PRIMARY_CODES[code & 0xff] ?? `SQLITE_${code}`;
}

/**
 * An open actor database.
 *
 * @example
 * ```ts
 * import { ActorDatabase } from "./actor_database.ts";
 * const db = new ActorDatabase("/tmp/alice.db");
 * db.exec("CREATE TABLE t(x)", []);
 * db.exec("INSERT INTO t VALUES (?)", [{ tag: "integer", val: 1n }]);
 * db.close();
 * ```
 */
export class ActorDatabase {
  readonly #db: DatabaseSync;
  readonly #statements = new Map<string, Prepared>();
  /** total_changes() after the last statement with rows, while nothing else ran since. */
  #totalChanges: bigint | undefined;
  /** last_insert_rowid() as the last statement left it, while known. */
  #lastRowid: bigint | undefined;
  readonly #counters: StatementSync;
  readonly #schemaVersion: StatementSync;
  /** PRAGMA schema_version when the cached statements were prepared. */
  #schema: bigint;
  /** Whether an actor's statement is being prepared or run: the authorizer checks only those. */
  #asActor = false;
  /** Why the authorizer refused the actor's statement being prepared. */
  #refusal: string | undefined;
  /** Whether a plain VACUUM runs: the statements SQLite runs for it (an ATTACH) are its own. */
  #vacuuming = false;
  /**
   * Our own descriptor of the database file, for snapshots (replicated
   * only). It stays open as long as SQLite's: closing any descriptor of a
   * file drops every POSIX lock this process holds on it, SQLite's exclusive
   * lock included.
   */
  readonly #file: Deno.FsFile | undefined;
  #pageSize: number | undefined;
  /** Whether the directory was fsynced since this connection opened (local only). */
  #directorySynced = false;
  readonly mode: DatabaseMode;

  /** Opens (creating if needed) the database at `path`. */
  constructor(readonly path: string, options: ActorDatabaseOptions = {}) {
    this.mode = options.mode ?? "replicated";
    this.#db = new DatabaseSync(path);
    // One connection per actor, and only this process touches the file, so
    // an exclusive lock lets SQLite keep the WAL index in heap memory: two
    // open files per database instead of three (db and -wal, no -shm), and
    // the open-file limit bounds how many databases can be open.
    this.#db.exec("PRAGMA locking_mode = EXCLUSIVE");
    this.#db.exec("PRAGMA journal_mode = WAL");
    if (this.mode === "replicated") {
      // The host checkpoints after it read what an event committed from the
      // -wal file (capture); an automatic checkpoint would empty it first.
      this.#db.exec("PRAGMA wal_autocheckpoint = 0");
      // The bucket is the durable copy (the spec: "the node does not fsync it
      // locally as well"), and a local file is trusted again only once checked
      // against the bucket's history, so a torn local file costs a restore.
      this.#db.exec("PRAGMA synchronous = OFF");
    } else {
      // The local file is the only copy: never torn (a checkpoint fsyncs the
      // -wal before it copies it into the file), and a process crash loses no
      // commit; a power loss may lose the commits since the last fsync, and
      // a durable write fsyncs (syncToDisk).
      this.#db.exec("PRAGMA synchronous = NORMAL");
    }
    this.#db.exec(`CREATE TABLE IF NOT EXISTS ${META_TABLE} (key TEXT PRIMARY KEY, value TEXT)`);
    if (this.mode === "replicated") this.#file = Deno.openSync(path, { read: true });
    this.#counters = prepareForActor(
      this.#db,
      "SELECT total_changes(), changes(), last_insert_rowid()",
    );
    this.#schemaVersion = prepareForActor(this.#db, "PRAGMA schema_version");
    this.#schema = this.#readSchemaVersion();
    // What an actor's SQL may do (actor_sql_policy.ts). The attach limit
    // also stops VACUUM, which attaches a database of its own and which
    // SQLite does not put to the authorizer.
    const guarded = this.#db as GuardedDatabase;
    guarded.enableDefensive(true);
    guarded.limits.attach = 0;
    guarded.setAuthorizer((action, first, second) => {
      if (!this.#asActor || this.#vacuuming) return AUTHORIZER_OK;
      const refusal = actorSqlRefusal(action, first, second);
      if (refusal === undefined) return AUTHORIZER_OK;
      this.#refusal ??= refusal;
      return AUTHORIZER_DENY;
    });
  }

  /**
   * Runs `body` with room for the one database a plain VACUUM attaches to
   * rebuild the file in; no other statement gets any.
   */
  #withVacuumAttach<T>(body: () => T): T {
    const limits = (this.#db as GuardedDatabase).limits;
    limits.attach = 1;
    this.#vacuuming = true;
    try {
      return body();
    } finally {
      this.#vacuuming = false;
      limits.attach = 0;
    }
  }

  #readSchemaVersion(): bigint {
    return (this.#schemaVersion.get() as unknown as [bigint])[0];
  }

  /**
   * Forgets the prepared statements when the schema changed: their column
   * names are those of the old schema, and Deno's node:sqlite keeps a
   * statement's old column count when SQLite prepares it again (rows of
   * `SELECT *` would miss an added column).
   */
  #afterSchemaChange(): void {
    const version = this.#readSchemaVersion();
    if (version === this.#schema) return;
    this.#schema = version;
    this.#statements.clear();
  }

  #prepare(sql: string): Prepared {
    let prepared = this.#statements.get(sql);
    if (prepared) {
      this.#statements.delete(sql);
    } else {
      const keyword = firstKeyword(sql);
      const vacuum = keyword === "VACUUM";
      if (vacuum && !isPlainVacuum(sql)) {
        throw notAuthorized("only a plain VACUUM is available to actors, not VACUUM INTO");
      }
      const statement = vacuum
        ? this.#withVacuumAttach(() => prepareForActor(this.#db, sql))
        : prepareForActor(this.#db, sql);
      prepared = {
        statement,
        columns: statement.columns().map((column) => column.name),
        kind: vacuum ? "vacuum" : statementKind(keyword),
      };
      if (this.#statements.size === STATEMENT_CACHE_SIZE) {
        this.#statements.delete(this.#statements.keys().next().value!);
      }
    }
    this.#statements.set(sql, prepared);
    return prepared;
  }

  #counts(): [total: bigint, changes: bigint, rowid: bigint] {
    return this.#counters.get() as unknown as [bigint, bigint, bigint];
  }

  /**
   * Runs one of the actor's statements, within what actor_sql_policy.ts
   * allows. Throws what SQLite throws; a statement the policy refuses
   * throws SQLITE_AUTH with the reason.
   */
  exec(sql: string, params: SqlValue[]): ExecResult {
    this.#asActor = true;
    this.#refusal = undefined;
    try {
      return this.#exec(sql, params);
    } catch (error) {
      throw this.#refusal === undefined ? error : notAuthorized(this.#refusal);
    } finally {
      this.#asActor = false;
    }
  }

  #exec(sql: string, params: SqlValue[]): ExecResult {
    const { statement, columns, kind } = this.#prepare(sql);
    const inputs = params.map(toInput);
    if (columns.length === 0) {
      this.#totalChanges = undefined;
      this.#lastRowid = undefined;
      const { changes, lastInsertRowid } = kind === "vacuum"
        ? this.#withVacuumAttach(() => statement.run(...inputs))
        : statement.run(...inputs);
      this.#lastRowid = BigInt(lastInsertRowid);
      if (kind === "other" || kind === "vacuum") this.#afterSchemaChange();
      return {
        columns,
        rows: [],
        changes: kind === "update-delete" || kind === "insert" ? BigInt(changes) : 0n,
        lastInsertRowid: this.#lastRowid,
      };
    }
    if (kind === "read") {
      let lastInsertRowid = this.#lastRowid;
      if (lastInsertRowid === undefined) {
        const [total, , rowid] = this.#counts();
        this.#totalChanges ??= total;
        lastInsertRowid = rowid;
      }
      // Read afresh after a failure rather than trusted (SQLite does not
      // document it after a failed statement); kept once this one ends well.
      this.#lastRowid = undefined;
      const rows = this.#rows(statement, inputs);
      this.#lastRowid = lastInsertRowid;
      return { columns, rows, changes: 0n, lastInsertRowid };
    }
    // changes() still counts the last statement that changed rows, so a
    // statement that changed none is told apart by total_changes() not moving.
    const totalBefore = this.#totalChanges ?? this.#counts()[0];
    this.#totalChanges = undefined;
    this.#lastRowid = undefined;
    const rows = this.#rows(statement, inputs);
    const [totalAfter, changes, rowid] = this.#counts();
    this.#totalChanges = totalAfter;
    this.#lastRowid = rowid;
    if (kind === "other") this.#afterSchemaChange();
    return {
      columns,
      rows,
      changes: kind === "other" || totalAfter === totalBefore ? 0n : changes,
      lastInsertRowid: rowid,
    };
  }

  #rows(statement: StatementSync, inputs: SQLInputValue[]): SqlValue[][] {
    // all() costs a third of iterate() for the small results actors mostly
    // read (8 µs against 22 µs for one row, measured), so the row bound is
    // checked once the rows are read: a statement returning more fails, and
    // one too large for memory ends its executor, not the node.
    const raw = statement.all(...inputs) as unknown as unknown[][];
    if (raw.length > MAX_RESULT_ROWS) {
      throw Object.assign(new Error(`a statement may return at most ${MAX_RESULT_ROWS} rows`), {
        code: "WASMKEEP_TOO_MANY_ROWS",
      });
    }
    return raw.map((row) => row.map(toSqlValue));
  }

  /** Whether a transaction is open. */
  get inTransaction(): boolean {
    return this.#db.isTransaction;
  }

  /** Rolls back an open transaction; returns whether there was one. */
  rollback(): boolean {
    this.#totalChanges = undefined;
    this.#lastRowid = undefined;
    if (!this.#db.isTransaction) return false;
    this.#db.exec("ROLLBACK");
    // What the transaction created or altered is gone again.
    this.#afterSchemaChange();
    return true;
  }

  /** A value of WasmKeep's own per-actor facts. */
  getMeta(key: string): string | undefined {
    const row = this.#db.prepare(`SELECT value FROM ${META_TABLE} WHERE key = ?`).get(key);
    return row ? String(row.value) : undefined;
  }

  /** Sets a value of WasmKeep's own per-actor facts. */
  setMeta(key: string, value: string): void {
    this.#totalChanges = undefined;
    this.#lastRowid = undefined;
    this.#db.prepare(
      `INSERT INTO ${META_TABLE} (key, value) VALUES (?, ?)
       ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
    ).run(key, value);
  }

  /** Removes a value of WasmKeep's own per-actor facts, if set. */
  deleteMeta(key: string): void {
    this.#totalChanges = undefined;
    this.#lastRowid = undefined;
    this.#db.prepare(`DELETE FROM ${META_TABLE} WHERE key = ?`).run(key);
  }

  /** The database's page size in bytes. */
  get pageSize(): number {
    this.#pageSize ??= Number(
      (this.#db.prepare("PRAGMA page_size").get() as { page_size: number }).page_size,
    );
    return this.#pageSize;
  }

  /**
   * Reads what was committed since the last call out of the `-wal` file,
   * then checkpoints it into the database file and empties it, so the next
   * call reads only what comes after. `undefined` when nothing was
   * committed. Call with no transaction open.
   */
  takeCommits(): CommittedPages | undefined {
    assert(!this.#db.isTransaction, "takeCommits is called with no transaction open");
    let wal: Uint8Array;
    try {
      wal = Deno.readFileSync(`${this.path}-wal`);
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) return undefined;
      throw error;
    }
    if (wal.length <= WAL_HEADER_SIZE) return undefined;
    const { header, commits } = readWalCommits(wal);
    if (commits.length === 0) return undefined;
    const pages = new Map<number, Uint8Array>();
    for (const commit of commits) for (const page of commit.pages) pages.set(page.pgno, page.data);
    const commit = commits[commits.length - 1].dbSize;
    const changed = [...pages]
      .filter(([pgno]) => pgno <= commit)
      .sort(([a], [b]) => a - b)
      .map(([pgno, data]) => ({ pgno, data }));
    const [busy] = Object.values(
      this.#db.prepare("PRAGMA wal_checkpoint(TRUNCATE)").get() as Record<string, number>,
    );
    if (busy !== 0) throw new Error(`checkpoint of ${this.path} was refused as busy`);
    this.#pageSize = header.pageSize;
    return { pageSize: header.pageSize, commit, pages: changed };
  }

  get #reader(): Deno.FsFile {
    if (!this.#file) {
      throw new AssertionError(
        `only a replicated database is read by pages, and ${this.path} is local`,
      );
    }
    return this.#file;
  }

  /**
   * Reads page `pgno` from the database file; what it holds after the last
   * {@linkcode takeCommits} (which checkpointed). Replicated only.
   */
  readPage(pgno: number): Uint8Array {
    const size = this.pageSize;
    const out = new Uint8Array(size);
    const file = this.#reader;
    file.seekSync((pgno - 1) * size, Deno.SeekMode.Start);
    for (let n = 0; n < size;) {
      const got = file.readSync(out.subarray(n));
      if (got === null) throw new Error(`${this.path} ends inside page ${pgno}`);
      n += got;
    }
    return out;
  }

  /** Pages in the database file (after the last checkpoint). Replicated only. */
  get filePageCount(): number {
    return this.#reader.statSync().size / this.pageSize;
  }

  /**
   * Makes everything committed so far durable on the local disk (a local
   * database, no transaction open): fdatasync of the `-wal`, which holds
   * every commit since the last checkpoint (a checkpoint fsyncs what it
   * copies into the file), and, once per connection, fsync of the directory,
   * which holds the entries of the `-wal` (made when the connection first
   * wrote) and of a new database file. SQLite cannot do it for a COMMIT:
   * `PRAGMA synchronous = FULL` is refused inside a transaction (ADR 0005).
   */
  syncToDisk(): void {
    if (this.mode !== "local") {
      throw new AssertionError(
        `only a local database is synced to disk (a replicated one's copy is the bucket), and ${this.path} is replicated`,
      );
    }
    assert(!this.#db.isTransaction, "syncToDisk is called with no transaction open");
    let wal: Deno.FsFile | undefined;
    try {
      wal = Deno.openSync(`${this.path}-wal`, { read: true });
    } catch (error) {
      // No -wal: everything is in the database file, fsynced by the
      // checkpoint that put it there.
      if (!(error instanceof Deno.errors.NotFound)) throw error;
    }
    if (wal) {
      // Any descriptor will do: fdatasync flushes the file, not the
      // descriptor. Closing it drops no lock: SQLite locks the database
      // file, not its -wal (and with an exclusive lock there is no -shm).
      try {
        wal.syncDataSync();
      } finally {
        wal.close();
      }
    }
    if (!this.#directorySynced) {
      const directory = Deno.openSync(this.path.slice(0, this.path.lastIndexOf("/")) || ".", {
        read: true,
      });
      try {
        directory.syncSync();
      } finally {
        directory.close();
      }
      this.#directorySynced = true;
    }
  }

  /** Closes the database, rolling back an open transaction. */
  close(): void {
    if (this.#db.isOpen) {
      this.#db.close();
      this.#file?.close();
    }
  }
}
