/**
 * What the uploader and replica tests share: commits built by hand (a few
 * pages, real `pageChecksum`-based checksums through `PageChecksums`) or
 * captured from a real SQLite database the way `replica.ts` captures them, a
 * bucket wrapper that records calls and can refuse some writes, a logger
 * that keeps its records, and a reader of the LTX files an actor has in a
 * bucket.
 *
 * @module
 */

import type {
  Bucket,
  CallOptions,
  DeleteOptions,
  ListOptions,
  ObjectInfo,
  PutOptions,
} from "../../src/bucket/bucket.ts";
import { listAll } from "../../src/bucket/bucket.ts";
import { type BucketCall as SrcBucketCall, BucketView } from "../../src/bucket/bucket_view.ts";
import type { ActorKey } from "../../src/actors/key.ts";
import { actorWalPrefix } from "../../src/bucket/keys.ts";
import type { LogFields, Logger, LogLevel } from "../../src/log.ts";
import { CHECKSUM_FLAG, lockPgno } from "../../src/ltx/checksum.ts";
import type { LtxPage } from "../../src/ltx/encoder.ts";
import { parseHistory } from "../../src/replication/history.ts";
import { PageChecksums } from "../../src/replication/page_checksums.ts";
import type { Commit, ReplicaPosition } from "../../src/replication/uploader.ts";
import { ActorDatabase } from "../../src/sqlite/actor_database.ts";

/**
 * A database made of hand-written pages: each commit rewrites some pages with
 * new content and sets the size; checksums come from `PageChecksums`.
 */
export class HandMadeDb {
  readonly pageSize: number;
  #pages = new Map<number, Uint8Array>();
  #size = 0;
  #sums: PageChecksums;
  #txid: bigint;
  readonly #random: boolean;

  /**
   * An empty database whose first commit takes TXID `afterTxid + 1`; with
   * `random`, page contents are random bytes (they do not compress).
   */
  constructor(options: { pageSize?: number; afterTxid?: bigint; random?: boolean } = {}) {
    this.pageSize = options.pageSize ?? 512;
    this.#txid = options.afterTxid ?? 0n;
    this.#random = options.random ?? false;
    this.#sums = PageChecksums.empty(this.pageSize);
  }

  /** The last TXID and the checksum there. */
  get position(): ReplicaPosition {
    return { txid: this.#txid, checksum: this.#sums.checksum };
  }

  /** Pages in the database. */
  get size(): number {
    return this.#size;
  }

  /**
   * The next commit: writes `pgnos` (fresh content each) and leaves the
   * database `size` pages long (by default the larger of its size and the
   * highest page written). Growing must write every new page.
   */
  commit(pgnos: number[], size = Math.max(this.#size, ...pgnos)): Commit {
    const pre = this.#sums.checksum;
    const txid = this.#txid + 1n;
    for (let pgno = this.#size + 1; pgno <= size; pgno++) {
      if (!pgnos.includes(pgno) && pgno !== lockPgno(this.pageSize)) {
        throw new Error(`commit grows to ${size} pages without writing page ${pgno}`);
      }
    }
    const pages: LtxPage[] = [...new Set(pgnos)].filter((p) => p <= size).sort((a, b) => a - b)
      .map((pgno) => ({ pgno, data: this.#content(pgno, txid) }));
    this.#sums.apply(pages, size);
    for (const pgno of [...this.#pages.keys()]) if (pgno > size) this.#pages.delete(pgno);
    for (const page of pages) this.#pages.set(page.pgno, page.data);
    this.#size = size;
    this.#txid = txid;
    return {
      txid,
      pageSize: this.pageSize,
      commit: size,
      pages,
      preApplyChecksum: pre,
      postApplyChecksum: this.#sums.checksum,
    };
  }

  /** Every page of the database now (the lock page left out), for a snapshot. */
  allPages(): LtxPage[] {
    const pages: LtxPage[] = [];
    for (let pgno = 1; pgno <= this.#size; pgno++) {
      if (pgno !== lockPgno(this.pageSize)) pages.push({ pgno, data: this.#pages.get(pgno)! });
    }
    return pages;
  }

  /** The database file these pages make. */
  image(): Uint8Array {
    const out = new Uint8Array(this.#size * this.pageSize);
    for (const [pgno, data] of this.#pages) out.set(data, (pgno - 1) * this.pageSize);
    return out;
  }

  #content(pgno: number, txid: bigint): Uint8Array {
    const data = new Uint8Array(this.pageSize);
    if (this.#random) {
      for (let at = 0; at < data.length; at += 65536) {
        crypto.getRandomValues(data.subarray(at, at + 65536));
      }
      return data;
    }
    const label = new TextEncoder().encode(`page ${pgno} at txid ${txid};`);
    for (let at = 0; at < data.length; at += label.length) {
      data.set(label.subarray(0, Math.min(label.length, data.length - at)), at);
    }
    return data;
  }
}

/**
 * A real SQLite database opened through `ActorDatabase`, its commits taken
 * and checksummed exactly as `ActorReplica.capture` does.
 */
export class LiveDb {
  /** The temporary directory (removed by `close`). */
  readonly dir = Deno.makeTempDirSync({ prefix: "wasmkeep-live-" });
  /** The database file. */
  readonly path = `${this.dir}/live.db`;
  readonly db: ActorDatabase;
  #sums: PageChecksums | undefined;
  #txid = 0n;

  constructor() {
    this.db = new ActorDatabase(this.path);
  }

  /** The last TXID and the checksum there. */
  get position(): ReplicaPosition {
    return { txid: this.#txid, checksum: this.#sums?.checksum ?? CHECKSUM_FLAG };
  }

  /** Runs SQL (one statement). */
  exec(sql: string): void {
    this.db.exec(sql, []);
  }

  /** What was committed since the last capture, as the next TXID's commit. */
  capture(): Commit {
    const committed = this.db.takeCommits();
    if (!committed) throw new Error("nothing committed since the last capture");
    this.#sums ??= PageChecksums.empty(committed.pageSize);
    const pre = this.#sums.checksum;
    this.#sums.apply(committed.pages, committed.commit);
    this.#txid++;
    return {
      txid: this.#txid,
      pageSize: committed.pageSize,
      commit: committed.commit,
      pages: committed.pages,
      preApplyChecksum: pre,
      postApplyChecksum: this.#sums.checksum,
    };
  }

  /** Every page of the database file (after the last capture), the lock page left out. */
  allPages(): { pageSize: number; commit: number; pages: LtxPage[] } {
    const sums = this.#sums!;
    const pages: LtxPage[] = [];
    for (let pgno = 1; pgno <= sums.pageCount; pgno++) {
      if (pgno !== lockPgno(sums.pageSize)) pages.push({ pgno, data: this.db.readPage(pgno) });
    }
    return { pageSize: sums.pageSize, commit: sums.pageCount, pages };
  }

  /** The database file's bytes (everything captured is checkpointed into it). */
  image(): Uint8Array {
    return Deno.readFileSync(this.path);
  }

  /** Closes the database and removes its directory. */
  close(): void {
    this.db.close();
    Deno.removeSync(this.dir, { recursive: true });
  }
}

/** One call a {@linkcode SpyBucket} passed on (or refused). */
export interface BucketCall {
  op: "get" | "head" | "put" | "delete" | "list";
  key: string;
  options?: PutOptions | DeleteOptions | ListOptions | CallOptions;
}

/**
 * A bucket that records every call before passing it on, and refuses the
 * PUTs `refusePut` names with the error it returns.
 */
export class SpyBucket extends BucketView {
  /** Returns an error to refuse this PUT with, or undefined to let it through. */
  refusePut: ((key: string) => Error | undefined) | undefined;
  /** Returns an error to refuse this LIST with, or undefined to let it through. */
  refuseList: ((prefix: string) => Error | undefined) | undefined;
  /** Whether this PUT goes unanswered (it fails only when its signal aborts). */
  hangPut: ((key: string) => boolean) | undefined;

  readonly calls: BucketCall[] = [];

  protected override beforeCall({ op, key, options }: SrcBucketCall): Promise<void> | void {
    this.calls.push({ op, key, options });
    const refusal = op === "put"
      ? this.refusePut?.(key)
      : op === "list"
      ? this.refuseList?.(key)
      : undefined;
    if (refusal) throw refusal;
    if (op === "put" && this.hangPut?.(key)) {
      return new Promise((_, reject) => {
        const signal = options?.signal;
        if (signal?.aborted) return reject(signal.reason);
        signal?.addEventListener("abort", () => reject(signal.reason), { once: true });
      });
    }
  }

  /** The keys of the calls of `op`, in order. */
  keys(op: BucketCall["op"]): string[] {
    return this.calls.filter((c) => c.op === op).map((c) => c.key);
  }
}

/** A log record a {@linkcode RecordingLogger} kept. */
export interface LogRecord {
  level: LogLevel;
  message: string;
  fields: LogFields;
}

/** A logger that keeps its records instead of writing them. */
export class RecordingLogger implements Logger {
  constructor(readonly records: LogRecord[] = [], readonly base: LogFields = {}) {}

  debug(message: string, fields?: LogFields): void {
    this.#write("debug", message, fields);
  }
  info(message: string, fields?: LogFields): void {
    this.#write("info", message, fields);
  }
  warn(message: string, fields?: LogFields): void {
    this.#write("warn", message, fields);
  }
  error(message: string, fields?: LogFields): void {
    this.#write("error", message, fields);
  }
  with(fields: LogFields): Logger {
    return new RecordingLogger(this.records, { ...this.base, ...fields });
  }

  /** The fields of the records with this message, in order. */
  find(message: string): LogFields[] {
    return this.records.filter((r) => r.message === message).map((r) => r.fields);
  }

  #write(level: LogLevel, message: string, fields: LogFields = {}) {
    this.records.push({ level, message, fields: { ...this.base, ...fields } });
  }
}

/** An LTX file an actor has in the bucket. */
export interface StoredFile {
  key: string;
  generation: bigint;
  minTxid: bigint;
  maxTxid: bigint;
  bytes: Uint8Array;
}

/** Every LTX file under the actor's `wal/`, by generation, then TXIDs. */
export async function storedFiles(bucket: Bucket, actor: ActorKey): Promise<StoredFile[]> {
  const listed: ObjectInfo[] = [];
  for await (const object of listAll(bucket, actorWalPrefix(actor))) listed.push(object);
  const files: StoredFile[] = [];
  for (const f of parseHistory(listed, actor).files) {
    const got = await bucket.get(f.key);
    if (!got) throw new Error(`${f.key} vanished`);
    files.push({ ...f, bytes: got.body });
  }
  return files;
}

/**
 * The files a restore applies: the newest snapshot (largest `maxTxid`) and
 * then, from the TXID after it, each file that starts where the previous
 * ended. Throws if the files after the snapshot do not chain.
 */
export function chainFromNewestSnapshot(files: StoredFile[]): StoredFile[] {
  const snapshots = files.filter((f) => f.minTxid === 1n);
  if (snapshots.length === 0) throw new Error("no snapshot");
  const newest = snapshots.reduce((a, b) => (b.maxTxid > a.maxTxid ? b : a));
  return chainFrom(newest, files);
}

/** `start`, then each file that starts where the previous one ended. */
export function chainFrom(start: StoredFile, files: StoredFile[]): StoredFile[] {
  const chain = [start];
  for (;;) {
    const last = chain[chain.length - 1];
    const next = files.find((f) => f.minTxid === last.maxTxid + 1n);
    if (!next) break;
    chain.push(next);
  }
  const max = files.reduce((m, f) => (f.maxTxid > m ? f.maxTxid : m), 0n);
  if (chain[chain.length - 1].maxTxid !== max) {
    throw new Error(`the chain from ${start.key} stops at ${chain[chain.length - 1].maxTxid}`);
  }
  return chain;
}
