/**
 * An actor's database as replication sees it while this node holds the
 * actor at one generation: the restore that comes first, the capture of what
 * each event committed, the uploads, durable writes, the delete, and the
 * clean close that lets the next wake trust the local file once the bucket
 * confirms it.
 *
 * @module
 */

import type { Bucket } from "../bucket/bucket.ts";
import type { ActorKey } from "../actor_key.ts";
import type { Clock } from "../time/clock.ts";
import type { Logger } from "../log.ts";
import type { ActorDatabase } from "../sqlite/actor_database.ts";
import { CHECKSUM_FLAG, lockPgno } from "../ltx/checksum.ts";
import { PageChecksums } from "./page_checksums.ts";
import {
  ActorUploader,
  type Commit,
  type ReplicaPosition,
  type SnapshotSchedule,
} from "./uploader.ts";
import type { ReadLimiter } from "./read_limiter.ts";
import { exists, setAside } from "./local_files.ts";
import { restoreActor } from "./restore.ts";
import { DatabaseSync } from "node:sqlite";
import { collectHistory, eraseHistory } from "./collect.ts";

/** What a replica needs of its node. */
export interface ReplicaContext {
  bucket: Bucket;
  clock: Clock;
  log: Logger;
  nodeId: string;
  /** This executor's share of the node's restore reads. */
  limiter: ReadLimiter;
  /** `--history-retention-secs`, in ms. */
  historyRetentionMs: number;
  /** Counts a metric by name. */
  count: (name: string, by?: number) => void;
}

/** The file that says where a cleanly closed database stood: `<db>.pos`. */
export function positionPath(databasePath: string): string {
  return `${databasePath}.pos`;
}

/** Options of {@linkcode ActorReplica.open}. */
export interface ReplicaOpenOptions {
  actor: ActorKey;
  /** The actor's database file. */
  path: string;
  generation: bigint;
  /** The periodic snapshot's remembered failures, if any. */
  schedule?: SnapshotSchedule;
  /** Told once when an upload failed for good. */
  onFailure: (error: unknown) => void;
  /** Opens the actor's database (through the executor's pool of open databases). */
  openDatabase: () => ActorDatabase;
  /** Abandons the restore; the local file stays as it was. */
  signal?: AbortSignal;
}

/**
 * One actor's replication at one generation.
 *
 * @example
 * ```ts
 * import { ActorReplica, type ReplicaContext, type ReplicaOpenOptions } from "./replica.ts";
 * import type { ActorDatabase } from "../sqlite/actor_database.ts";
 * declare const context: ReplicaContext;
 * declare const options: ReplicaOpenOptions;
 * declare const db: ActorDatabase;
 * const { actor, path } = options;
 * const replica = await ActorReplica.open(context, { ...options, actor, path, generation: 1n });
 * // after each event:
 * replica.capture(db);
 * await replica.close(() => db.close());
 * ```
 */
export class ActorReplica {
  #position: ReplicaPosition;
  #sums: PageChecksums | undefined;
  readonly uploader: ActorUploader;
  #closed = false;
  #collecting = false;
  /** The erasure of the history after a delete, while it runs. */
  #erasing: Promise<void> | undefined;

  private constructor(
    readonly context: ReplicaContext,
    readonly options: ReplicaOpenOptions,
    position: ReplicaPosition,
    sums: PageChecksums | undefined,
    lastSnapshotTxid: bigint,
    /** What the hold's `base` says it started from (an adopted file: empty at 0). */
    base: ReplicaPosition,
  ) {
    this.#position = position;
    this.#sums = sums;
    this.uploader = new ActorUploader({
      bucket: context.bucket,
      clock: context.clock,
      log: context.log,
      actor: options.actor,
      nodeId: context.nodeId,
      generation: options.generation,
      start: base,
      lastSnapshotTxid,
      schedule: options.schedule,
      onFailure: options.onFailure,
      count: context.count,
      onSnapshot: (txid) => this.#collect(txid),
    });
  }

  /**
   * Restores the actor's database from the bucket unless the local file is
   * already current, then opens it. Throws `HistoryError` (500) or
   * `RestoreUnavailable` (503) from the restore.
   */
  static async open(context: ReplicaContext, options: ReplicaOpenOptions): Promise<ActorReplica> {
    const { path } = options;
    const local = readLocalPosition(path);
    const result = await restoreActor({
      bucket: context.bucket,
      clock: context.clock,
      actor: options.actor,
      path,
      local: local?.position,
      limiter: context.limiter,
      log: context.log,
      signal: options.signal,
    });
    options.signal?.throwIfAborted();
    // A database created by this open starts empty: its first pages (the
    // journal mode in page 1, WasmKeep's own table) reach the -wal and the
    // first capture, which is then a whole snapshot.
    let existed = hasData(path);
    // No history at all, and a database here: the first node to touch an
    // actor decides its history (the spec's "Joining a cluster with existing
    // data"), so this file becomes its first snapshot; unless it cannot be
    // read (a power loss tore it): then it is set aside and the actor starts
    // empty, since nothing of it ever reached the bucket, no durable write
    // of it was acknowledged.
    if (result.outcome === "empty" && result.txid === 0n && existed) {
      const problem = unreadable(path);
      if (problem) {
        context.log.warn("a local database without history in the bucket cannot be read", {
          actor: `${options.actor.tenant}/${options.actor.class}/${options.actor.name}`,
          problem,
          kept_as: path + ".replaced",
        });
        setAside(path);
        existed = false;
      }
    }
    const adopt = result.outcome === "empty" && result.txid === 0n && existed;
    const db = options.openDatabase();
    // Frames a crash left in an adopted file's -wal belong to it: fold them
    // into the file before checksumming it.
    if (adopt) db.takeCommits();
    const sums = result.outcome === "current" && local
      ? local.sums
      : existed
      ? readChecksums(db)
      : undefined;
    let position: ReplicaPosition = { txid: result.txid, checksum: result.checksum };
    const localChecksum = sums?.checksum ?? CHECKSUM_FLAG;
    if (adopt) {
      position = { txid: 0n, checksum: localChecksum };
    } else if (localChecksum !== position.checksum) {
      throw new Error(
        `database ${path} has checksum ${hex(localChecksum)} after its restore, expected ${
          hex(position.checksum)
        }`,
      );
    }
    // An adopted file is not in the history yet: the hold starts from the
    // empty database at 0, and its first file is the file's snapshot.
    const base = adopt ? { txid: 0n, checksum: CHECKSUM_FLAG } : position;
    const replica = new ActorReplica(context, options, position, sums, result.snapshotTxid, base);
    context.log.info("actor restored", {
      actor: `${options.actor.tenant}/${options.actor.class}/${options.actor.name}`,
      outcome: adopt ? "adopted" : result.outcome,
      txid: result.txid.toString(),
      snapshot_txid: result.snapshotTxid.toString(),
      files: result.filesRead,
      bytes: result.bytesRead,
      generation: options.generation.toString(),
    });
    if (adopt) await replica.#adoptLocal(db);
    return replica;
  }

  /** Where the database stands: its last TXID and checksum. */
  get position(): ReplicaPosition {
    return this.#position;
  }

  async #adoptLocal(db: ActorDatabase) {
    const sums = this.#sums!;
    const pages = [];
    for (let pgno = 1; pgno <= sums.pageCount; pgno++) {
      if (pgno !== lockPgno(sums.pageSize)) pages.push({ pgno, data: db.readPage(pgno) });
    }
    this.#push({
      txid: 1n,
      pageSize: sums.pageSize,
      commit: sums.pageCount,
      pages,
      preApplyChecksum: 0n,
      postApplyChecksum: sums.checksum,
    });
    await this.uploader.uploaded(1n);
  }

  #push(commit: Commit) {
    this.#position = { txid: commit.txid, checksum: commit.postApplyChecksum };
    this.uploader.push(commit);
  }

  /**
   * Takes what the database committed since the last capture, gives it the
   * next TXID and queues its upload. Returns that TXID, or `undefined` when
   * nothing was committed.
   */
  capture(db: ActorDatabase): bigint | undefined {
    const committed = db.takeCommits();
    if (!committed) return undefined;
    this.#sums ??= PageChecksums.empty(committed.pageSize);
    const pre = this.#sums.checksum;
    this.#sums.apply(committed.pages, committed.commit);
    const commit: Commit = {
      txid: this.#position.txid + 1n,
      pageSize: committed.pageSize,
      commit: committed.commit,
      pages: committed.pages,
      preApplyChecksum: this.#position.txid === 0n && pre === CHECKSUM_FLAG ? 0n : pre,
      postApplyChecksum: this.#sums.checksum,
    };
    this.#push(commit);
    return commit.txid;
  }

  /** Resolves once TXID `txid` is in the bucket; rejects if the upload failed. */
  uploaded(txid: bigint): Promise<void> {
    return this.uploader.uploaded(txid);
  }

  /**
   * Records that the actor deleted itself: the database file is already
   * gone (the caller wiped it); the delete takes the next TXID. Resolves
   * once the marker is in the bucket, then erases the history.
   */
  async recordDelete(): Promise<void> {
    const txid = this.#position.txid + 1n;
    this.#position = { txid, checksum: CHECKSUM_FLAG };
    this.#sums = undefined;
    await this.uploader.recordDelete(txid);
    const { bucket, clock, count } = this.context;
    // Only an owner that still held the actor when its marker landed
    // erases: a later holder may have restored without a marker that
    // landed late, and builds on what is here (the walk then ignores the
    // marker).
    if (this.#closed || this.uploader.failed) {
      this.context.log.warn("the actor was given up before its delete marker landed: no erasure");
      return;
    }
    // A clean close waits for it (close()): the history is gone once the actor is given up.
    this.#erasing = eraseHistory({
      bucket,
      clock,
      actor: this.options.actor,
      generation: this.options.generation,
      txid,
    })
      .then(({ deleted, failed }) => {
        if (deleted) count("wasmkeep_history_collected_total", deleted);
        if (failed) count("wasmkeep_history_collect_failures_total", failed);
      }, (error) => {
        // The history stays until the actor's next snapshot collects it.
        count("wasmkeep_history_collect_failures_total");
        this.context.log.warn("history erasure after a delete failed", { error: String(error) });
      });
  }

  /** Whether a periodic snapshot should be tried before the next event. */
  snapshotDue(): boolean {
    return this.uploader.snapshotDue();
  }

  /** Tries one periodic snapshot of the database as it stands. */
  async snapshot(db: ActorDatabase): Promise<boolean> {
    const sums = this.#sums;
    if (!sums) return false;
    const pages = [];
    for (let pgno = 1; pgno <= sums.pageCount; pgno++) {
      if (pgno === lockPgno(sums.pageSize)) continue;
      pages.push({ pgno, data: db.readPage(pgno) });
    }
    return await this.uploader.snapshot(this.#position, sums.pageSize, sums.pageCount, pages);
  }

  #collect(snapshotTxid: bigint) {
    if (this.#collecting || this.#closed) return;
    this.#collecting = true;
    const { bucket, clock, count, historyRetentionMs, log } = this.context;
    collectHistory({
      bucket,
      clock,
      actor: this.options.actor,
      generation: this.options.generation,
      snapshotTxid,
      retentionMs: historyRetentionMs,
      stillHolds: () => !this.#closed && !this.uploader.failed,
    }).then(({ deleted, failed }) => {
      if (deleted) count("wasmkeep_history_collected_total", deleted);
      if (failed) count("wasmkeep_history_collect_failures_total", failed);
    }, (error) => {
      count("wasmkeep_history_collect_failures_total");
      log.warn("history collection failed", { error: String(error) });
    }).finally(() => this.#collecting = false);
  }

  /**
   * Waits for the uploads (bounded by their own limits), closes the
   * database, and, when everything landed, writes where it stands so the
   * next wake can trust the file once the bucket confirms it. Resolves
   * whether the uploads all landed.
   */
  async close(closeDatabase: () => void): Promise<boolean> {
    await this.uploader.settled();
    // An erasure after a delete, bounded by its own tries, ends before the
    // actor is given up: the next holder finds only what came after it.
    await this.#erasing;
    this.#closed = true;
    closeDatabase();
    const path = positionPath(this.options.path);
    // Synchronous, like the rest of this file's local I/O: a few bytes, and
    // an executor's events already run SQLite synchronously. An asynchronous
    // write would end at a moment the thread pool decides, which the
    // simulator (sim/) could not replay.
    if (this.uploader.failed) {
      removePosition(path);
      return false;
    }
    const { txid, checksum } = this.#position;
    Deno.writeTextFileSync(path, JSON.stringify({ txid: hex(txid), checksum: hex(checksum) }));
    return true;
  }

  /** Drops the replica without waiting: the executor discards the actor. */
  abandon(): void {
    this.#closed = true;
    removePosition(positionPath(this.options.path));
  }
}

/**
 * Why the database at `path` cannot be adopted, or `undefined` when SQLite's
 * `quick_check` finds it sound. A `-shm` the check made is removed (the
 * actor's own connection uses exclusive locking, without one).
 */
function unreadable(path: string): string | undefined {
  const shm = `${path}-shm`;
  const hadShm = exists(shm);
  let db: DatabaseSync | undefined;
  try {
    db = new DatabaseSync(path);
    const rows = db.prepare("PRAGMA quick_check").all() as { quick_check: string }[];
    const verdict = rows.map((row) => row.quick_check).join("; ");
    return verdict === "ok" ? undefined : verdict;
  } catch (error) {
    return (error as Error).message;
  } finally {
    try {
      db?.close();
    } catch {
      // A connection that failed to open has nothing to close.
    }
    if (!hadShm && exists(shm)) Deno.removeSync(shm);
  }
}

/** Removes a `.pos` file; one that is missing or cannot be removed changes nothing here. */
function removePosition(path: string): void {
  try {
    Deno.removeSync(path);
  } catch {
    // Missing, or the disk refused: the next wake checks the file against the bucket anyway.
  }
}

function hex(value: bigint): string {
  return value.toString(16).padStart(16, "0");
}

function hasData(path: string): boolean {
  for (const file of [path, `${path}-wal`]) {
    try {
      if (Deno.statSync(file).size > 0) return true;
    } catch {
      // Missing.
    }
  }
  return false;
}

function readChecksums(db: ActorDatabase): PageChecksums | undefined {
  const pages = db.filePageCount;
  if (pages === 0) return undefined;
  return PageChecksums.fromPages(db.pageSize, pages, (pgno) => db.readPage(pgno));
}

/**
 * A cleanly closed database's position, with its checksums read from the
 * file, or `undefined` when the file cannot be vouched for: no position
 * file, frames in a `-wal` (a crash), or a file whose content is not what
 * the position says.
 */
function readLocalPosition(
  path: string,
): { position: ReplicaPosition; sums: PageChecksums } | undefined {
  let recorded: { txid: string; checksum: string };
  try {
    recorded = JSON.parse(Deno.readTextFileSync(positionPath(path)));
  } catch {
    return undefined;
  }
  try {
    if (Deno.statSync(`${path}-wal`).size > 0) return undefined;
  } catch {
    // No -wal: closed cleanly.
  }
  let file: Deno.FsFile;
  try {
    file = Deno.openSync(path, { read: true });
  } catch {
    return undefined;
  }
  try {
    const header = new Uint8Array(100);
    if (file.readSync(header) !== 100) return undefined;
    const raw = new DataView(header.buffer).getUint16(16);
    const pageSize = raw === 1 ? 65536 : raw;
    const sums = PageChecksums.readFile(file, pageSize);
    const position = {
      txid: BigInt(`0x${recorded.txid}`),
      checksum: BigInt(`0x${recorded.checksum}`),
    };
    return sums.checksum === position.checksum ? { position, sums } : undefined;
  } catch {
    return undefined;
  } finally {
    file.close();
  }
}
