/**
 * A real SQLite database whose commits become LTX files, as an owner would
 * upload them: WAL mode, no automatic checkpoint, exclusive locking; each
 * WAL commit is one TXID, read with `readWalCommits`, encoded with
 * `encodeLtx` and the checksums of `src/ltx/checksum.ts`. Helpers put the
 * files, bases and markers in a bucket under ADR 0002's keys.
 *
 * @module
 */

import { DatabaseSync } from "node:sqlite";
import type { Bucket } from "../../src/bucket/bucket.ts";
import type { ActorKey } from "../../src/actors/key.ts";
import { databaseChecksum } from "../../src/ltx/checksum.ts";
import { encodeLtx, type LtxPage } from "../../src/ltx/encoder.ts";
import { readWalCommits, WAL_HEADER_SIZE, type WalCommit } from "../../src/sqlite/wal.ts";
import {
  baseKey,
  deletedKey,
  encodeBase,
  encodeDeleted,
  walFileKey,
} from "../../src/replication/history.ts";

/** One LTX file built from the source. */
export interface BuiltFile {
  /** First TXID; 1 for a snapshot. */
  minTxid: bigint;
  /** Last TXID. */
  maxTxid: bigint;
  /** The encoded file. */
  bytes: Uint8Array;
  /** The database checksum after it. */
  checksum: bigint;
}

/** The actor every replication test uses. */
export const ACTOR: ActorKey = { tenant: "acme", class: "room", name: "lobby" };

/**
 * A source database in a temporary directory.
 *
 * @example
 * ```ts
 * import { SourceDb } from "./source_db.ts";
 * const source = new SourceDb();
 * source.exec("CREATE TABLE t(x)");
 * const snapshot = source.file(); // 1-1, a snapshot
 * source.close();
 * ```
 */
export class SourceDb {
  /** The directory the database lives in (removed by `close`). */
  readonly dir = Deno.makeTempDirSync({ prefix: "wasmkeep-source-" });
  /** The database file. */
  readonly path = `${this.dir}/source.db`;
  readonly #db: DatabaseSync;
  readonly pageSize: number;
  #image: Uint8Array;
  #walOffset = WAL_HEADER_SIZE;
  #pending: WalCommit[] = [];
  #txid: bigint;
  #wroteFile = false;

  /** Opens a new database whose first commit gets TXID `afterTxid + 1`. */
  constructor(options: { pageSize?: number; afterTxid?: bigint } = {}) {
    this.pageSize = options.pageSize ?? 1024;
    this.#txid = options.afterTxid ?? 0n;
    this.#db = new DatabaseSync(this.path);
    this.#db.exec(`PRAGMA page_size=${this.pageSize}; PRAGMA locking_mode=EXCLUSIVE;
      PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0;`);
    this.#image = Deno.readFileSync(this.path);
  }

  /** The TXID of the last commit taken into a file or pending. */
  get txid(): bigint {
    return this.#txid + BigInt(this.#pending.length);
  }

  /** Runs SQL; each transaction it commits is one TXID. */
  exec(sql: string): void {
    this.#db.exec(sql);
    const read = readWalCommits(Deno.readFileSync(`${this.path}-wal`), this.#walOffset);
    this.#pending.push(...read.commits);
    this.#walOffset = read.endOffset;
  }

  /** Inserts `count` rows into `items`, one transaction each (one TXID each). */
  insert(count: number, label = "row"): void {
    for (let i = 0; i < count; i++) {
      this.exec(`INSERT INTO items(name, body) VALUES ('${label}-${i}', randomblob(${50 + i}))`);
    }
  }

  /**
   * The pending commits as one file (a snapshot if it is the first file);
   * with `snapshot`, every page at the last TXID instead.
   */
  file(options: { snapshot?: boolean } = {}): BuiltFile {
    if (this.#pending.length === 0) throw new Error("nothing committed since the last file");
    const snapshot = options.snapshot || !this.#wroteFile;
    const before = this.#image;
    const commits = this.#pending;
    const minTxid = this.#txid + 1n;
    const maxTxid = this.#txid + BigInt(commits.length);
    const dbSize = commits[commits.length - 1].dbSize;
    const latest = new Map<number, Uint8Array>();
    for (const c of commits) for (const p of c.pages) latest.set(p.pgno, p.data);
    const changed: LtxPage[] = [...latest].filter(([pgno]) => pgno <= dbSize)
      .sort(([a], [b]) => a - b).map(([pgno, data]) => ({ pgno, data }));
    // What applying the file means: cut or grow to the commit size, then the pages.
    const after = new Uint8Array(dbSize * this.pageSize);
    after.set(before.subarray(0, Math.min(before.length, after.length)));
    for (const p of changed) after.set(p.data, (p.pgno - 1) * this.pageSize);
    const pages = snapshot
      ? Array.from({ length: dbSize }, (_, i) => ({ pgno: i + 1, data: this.#page(after, i + 1) }))
      : changed;
    const checksum = databaseChecksum(after, this.pageSize);
    const bytes = encodeLtx({
      header: {
        pageSize: this.pageSize,
        commit: dbSize,
        minTxid: snapshot ? 1n : minTxid,
        maxTxid,
        timestamp: 1_700_000_000_000,
        preApplyChecksum: snapshot ? 0n : databaseChecksum(before, this.pageSize),
      },
      pages,
      postApplyChecksum: checksum,
    });
    this.#image = after;
    this.#txid = maxTxid;
    this.#pending = [];
    this.#wroteFile = true;
    return { minTxid: snapshot ? 1n : minTxid, maxTxid, bytes, checksum };
  }

  /** A snapshot at the TXID of the last file, as a periodic snapshot is taken. */
  snapshot(): BuiltFile {
    if (this.#pending.length > 0) throw new Error("commits pending: take a file first");
    const pages = Array.from({ length: this.#image.length / this.pageSize }, (_, i) => ({
      pgno: i + 1,
      data: this.#page(this.#image, i + 1),
    }));
    const checksum = this.checksum();
    const bytes = encodeLtx({
      header: {
        pageSize: this.pageSize,
        commit: pages.length,
        minTxid: 1n,
        maxTxid: this.#txid,
        timestamp: 1_700_000_000_000,
      },
      pages,
      postApplyChecksum: checksum,
    });
    return { minTxid: 1n, maxTxid: this.#txid, bytes, checksum };
  }

  /** The database as its files build it. */
  image(): Uint8Array {
    return this.#image.slice();
  }

  /** The checksum of the database as its files build it. */
  checksum(): bigint {
    return databaseChecksum(this.#image, this.pageSize);
  }

  /** Every row of `items`, for comparing with a restored copy. */
  rows(): unknown[] {
    return this.#db.prepare("SELECT id, name, hex(body) AS body FROM items ORDER BY id").all();
  }

  /** Closes the database and removes its directory. */
  close(): void {
    this.#db.close();
    Deno.removeSync(this.dir, { recursive: true });
  }

  #page(image: Uint8Array, pgno: number): Uint8Array {
    return image.subarray((pgno - 1) * this.pageSize, pgno * this.pageSize);
  }
}

/** The schema every test database has (two TXIDs). */
export const SCHEMA = `CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, body BLOB);
  CREATE INDEX items_name ON items(name);`;

/**
 * Rows and integrity of a database file, read from a copy so that nothing
 * (no `-wal`, no `-shm`) appears beside the file itself.
 *
 * @example
 * ```ts
 * import { inspect } from "./source_db.ts";
 * const { check, rows } = inspect("/tmp/restored.db");
 * ```
 */
export function inspect(path: string): { check: string; rows: unknown[] } {
  const dir = Deno.makeTempDirSync({ prefix: "wasmkeep-inspect-" });
  try {
    Deno.copyFileSync(path, `${dir}/copy.db`);
    const db = new DatabaseSync(`${dir}/copy.db`);
    try {
      return {
        check: String(db.prepare("PRAGMA integrity_check").get()?.integrity_check),
        rows: db.prepare("SELECT id, name, hex(body) AS body FROM items ORDER BY id").all(),
      };
    } finally {
      db.close();
    }
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
}

/**
 * Puts `file` under generation `generation`.
 *
 * @example
 * ```ts
 * import { ACTOR, putFile, SourceDb } from "./source_db.ts";
 * import { MemoryBucket } from "../../src/bucket/memory.ts";
 * const source = new SourceDb();
 * source.exec("CREATE TABLE t(x)");
 * await putFile(new MemoryBucket(), 1n, source.file());
 * ```
 */
export async function putFile(
  bucket: Bucket,
  generation: bigint,
  file: BuiltFile,
  actor = ACTOR,
): Promise<string> {
  const key = walFileKey(actor, generation, file.minTxid, file.maxTxid);
  await bucket.put(key, file.bytes, { ifNoneMatch: "*" });
  return key;
}

/**
 * Puts the base of `generation` at (`txid`, `checksum`).
 *
 * @example
 * ```ts
 * import { putBase } from "./source_db.ts";
 * import { MemoryBucket } from "../../src/bucket/memory.ts";
 * await putBase(new MemoryBucket(), 1n, 0n, 1n << 63n);
 * ```
 */
export async function putBase(
  bucket: Bucket,
  generation: bigint,
  txid: bigint,
  checksum: bigint,
  actor = ACTOR,
): Promise<string> {
  const key = baseKey(actor, generation);
  await bucket.put(key, encodeBase({ generation, txid, checksum, node: "a", at: 0 }));
  return key;
}

/**
 * Puts the `deleted` marker at (`generation`, `txid`).
 *
 * @example
 * ```ts
 * import { putDeleted } from "./source_db.ts";
 * import { MemoryBucket } from "../../src/bucket/memory.ts";
 * await putDeleted(new MemoryBucket(), 2n, 40n);
 * ```
 */
export async function putDeleted(
  bucket: Bucket,
  generation: bigint,
  txid: bigint,
  actor = ACTOR,
): Promise<string> {
  const key = deletedKey(actor);
  await bucket.put(key, encodeDeleted({ generation, txid, node: "a", at: 0 }));
  return key;
}
