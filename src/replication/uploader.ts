/**
 * One actor's uploads at one generation (docs/adr/0002): its `base` before
 * the first file, then an LTX file per upload, coalescing whatever committed
 * while the previous upload was in flight; periodic snapshots on the spec's
 * schedule; the delete marker. An upload that fails gives the actor up.
 *
 * @module
 */

import { setImmediate } from "node:timers";
import type { Bucket } from "../bucket/bucket.ts";
import { PreconditionFailed } from "../bucket/errors.ts";
import type { ActorKey } from "../actor_key.ts";
import { uploadWithAttempts } from "../bucket/upload.ts";
import { BYTES_PER_MB } from "../bucket/bounds.ts";
import type { Clock } from "../time/clock.ts";
import type { Logger } from "../log.ts";
import { AssertionError } from "../assert.ts";
import { CHECKSUM_FLAG } from "../ltx/checksum.ts";
import { encodeLtx, LtxEncoder, type LtxPage } from "../ltx/encoder.ts";
import { lockPgno } from "../ltx/checksum.ts";
import {
  baseKey,
  decodeDeleted,
  deletedKey,
  type DeletedRecord,
  encodeBase,
  encodeDeleted,
  walFileKey,
} from "./history.ts";

/** Uploads between two periodic snapshots. */
export const SNAPSHOT_EVERY_UPLOADS = 64;

/** A failed periodic snapshot is tried again no sooner than this. */
export const SNAPSHOT_RETRY_MS = 30_000;

/**
 * Writes after a failed periodic snapshot before the next try: after the
 * first failure, the second, and every later one.
 */
export const SNAPSHOT_RETRY_WRITES = [1n, 8n, 64n] as const;

/**
 * Pages of a periodic snapshot encoded between two turns of the event loop
 * (1 MiB of 4 KiB pages, a few milliseconds): a large database's snapshot
 * does not hold up the executor's other actors while it is encoded.
 */
export const SNAPSHOT_PAGES_PER_TURN = 256;

/** A periodic snapshot's one attempt: this, plus a second per megabyte… */
export const SNAPSHOT_ATTEMPT_BASE_MS = 5000;

/** …and never more than this (a third of a queued caller's 30 s). */
export const SNAPSHOT_ATTEMPT_MAX_MS = 10_000;

/** Where a database stands: its last TXID and its LTX checksum there. */
export interface ReplicaPosition {
  txid: bigint;
  checksum: bigint;
}

/** What one capture committed, with the checksums around it. */
export interface Commit {
  /** The TXID it takes. */
  txid: bigint;
  pageSize: number;
  /** Database size in pages after it. */
  commit: number;
  /** Changed pages, ascending. */
  pages: LtxPage[];
  preApplyChecksum: bigint;
  postApplyChecksum: bigint;
}

/** The periodic snapshot's failures, remembered while the actor sleeps. */
export interface SnapshotSchedule {
  /** Failed tries in a row. */
  failures: number;
  /** Monotonic time of the last failed try. */
  lastTryAt: number;
  /** The TXID at the last failed try. */
  txidAtLastTry: bigint;
}

/** Options of {@linkcode ActorUploader}. */
export interface ActorUploaderOptions {
  bucket: Bucket;
  clock: Clock;
  log: Logger;
  actor: ActorKey;
  nodeId: string;
  /** The generation of this node's hold. */
  generation: bigint;
  /** Where the database stood when the hold began (after its restore). */
  start: ReplicaPosition;
  /** TXID of the newest snapshot the history has (0 if none). */
  lastSnapshotTxid: bigint;
  /** Remembered failures of the periodic snapshot, if any. */
  schedule?: SnapshotSchedule;
  /** Told once when an upload failed for good: the node gives the actor up. */
  onFailure: (error: unknown) => void;
  /** Counts a metric by name. */
  count: (name: string, by?: number) => void;
  /** Told after each snapshot landed (history collection starts there). */
  onSnapshot?: (txid: bigint) => void;
}

interface PendingFile {
  minTxid: bigint;
  maxTxid: bigint;
  pageSize: number;
  commit: number;
  pages: Map<number, Uint8Array>;
  preApplyChecksum: bigint;
  postApplyChecksum: bigint;
  snapshot: boolean;
}

type Job =
  | { kind: "file"; file: PendingFile }
  | { kind: "delete"; txid: bigint; resolve: () => void; reject: (e: unknown) => void }
  | {
    kind: "periodic-snapshot";
    snapshot: SnapshotSource;
    resolve: (ok: boolean) => void;
  };

/** A periodic snapshot to encode: every page of the database at `maxTxid`. */
interface SnapshotSource {
  maxTxid: bigint;
  pageSize: number;
  commit: number;
  /** Every page, ascending; read as the snapshot is encoded. */
  pages: Iterable<LtxPage>;
  postApplyChecksum: bigint;
}

interface Waiter {
  txid: bigint;
  resolve: () => void;
  reject: (error: unknown) => void;
}

/** Raised to waiters once an upload failed: the actor is being given up. */
export class ReplicationFailed extends Error {
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = "ReplicationFailed";
  }
}

/**
 * Uploads one actor's commits in order.
 *
 * @example
 * ```ts
 * import { ActorUploader, type Commit } from "./uploader.ts";
 * import { CHECKSUM_FLAG } from "../ltx/checksum.ts";
 * import type { Bucket } from "../bucket/bucket.ts";
 * import { systemClock as clock } from "../time/clock.ts";
 * import { createLogger } from "../log.ts";
 * declare const bucket: Bucket;
 * declare const commit: Commit;
 * const actor = { tenant: "default", class: "counter", name: "a" };
 * const uploader = new ActorUploader({ bucket, clock, log: createLogger(), actor, nodeId: "a",
 *   generation: 1n, start: { txid: 0n, checksum: CHECKSUM_FLAG }, lastSnapshotTxid: 0n,
 *   onFailure: () => {}, count: () => {} });
 * uploader.push(commit);
 * await uploader.uploaded(commit.txid);
 * ```
 */
export class ActorUploader {
  readonly #o: ActorUploaderOptions;
  readonly #jobs: Job[] = [];
  #running = false;
  #baseWritten = false;
  #landed: bigint;
  #waiters: Waiter[] = [];
  #failed: ReplicationFailed | undefined;
  /** The next file starts from an empty database, so it must be a snapshot. */
  #fromEmpty: boolean;
  #uploadsSinceSnapshot: number;
  #schedule: SnapshotSchedule;
  #lastTxid: bigint;
  #idle: (() => void)[] = [];

  constructor(options: ActorUploaderOptions) {
    this.#o = options;
    this.#landed = options.start.txid;
    this.#lastTxid = options.start.txid;
    this.#fromEmpty = options.start.checksum === CHECKSUM_FLAG;
    // A node that takes the actor knows of no earlier waits: 64 writes or
    // more without a snapshot make the first event's end try one.
    const unsnapshotted = options.start.txid - options.lastSnapshotTxid;
    this.#uploadsSinceSnapshot = unsnapshotted >= BigInt(SNAPSHOT_EVERY_UPLOADS)
      ? SNAPSHOT_EVERY_UPLOADS
      : Number(unsnapshotted);
    this.#schedule = options.schedule ?? { failures: 0, lastTryAt: 0, txidAtLastTry: 0n };
  }

  /** The periodic snapshot's failures, to remember while the actor sleeps. */
  get schedule(): SnapshotSchedule {
    return { ...this.#schedule };
  }

  /** Set once an upload failed; nothing more is uploaded. */
  get failed(): ReplicationFailed | undefined {
    return this.#failed;
  }

  /** The last TXID in the bucket. */
  get landedTxid(): bigint {
    return this.#landed;
  }

  /** Queues a commit; coalesced with the commits queued behind an upload in flight. */
  push(commit: Commit): void {
    if (this.#failed) return;
    if (commit.txid !== this.#lastTxid + 1n) {
      throw new AssertionError(
        `commits are pushed in TXID order: ${commit.txid} does not follow ${this.#lastTxid}`,
      );
    }
    this.#lastTxid = commit.txid;
    const last = this.#jobs[this.#jobs.length - 1];
    if (last?.kind === "file") {
      mergeInto(last.file, commit);
    } else {
      const snapshot = this.#fromEmpty;
      this.#fromEmpty = false;
      if (snapshot) {
        // This file is the snapshot at its TXID from now on: a periodic one
        // before it lands would take the same key.
        this.#uploadsSinceSnapshot = 0;
        this.#schedule = { failures: 0, lastTryAt: 0, txidAtLastTry: 0n };
      }
      this.#jobs.push({
        kind: "file",
        file: {
          minTxid: snapshot ? 1n : commit.txid,
          maxTxid: commit.txid,
          pageSize: commit.pageSize,
          commit: commit.commit,
          pages: new Map(commit.pages.map((p) => [p.pgno, p.data])),
          preApplyChecksum: snapshot ? 0n : commit.preApplyChecksum,
          postApplyChecksum: commit.postApplyChecksum,
          snapshot,
        },
      });
    }
    this.#run();
  }

  /** Resolves once a file holding `txid` is in the bucket; rejects if uploads failed. */
  uploaded(txid: bigint): Promise<void> {
    if (this.#failed) return Promise.reject(this.#failed);
    if (txid <= this.#landed) return Promise.resolve();
    return new Promise((resolve, reject) => this.#waiters.push({ txid, resolve, reject }));
  }

  /** Resolves once nothing is queued or in flight (landed or failed). */
  settled(): Promise<void> {
    if (!this.#running && this.#jobs.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.#idle.push(resolve));
  }

  /** Whether a periodic snapshot should be tried now. */
  snapshotDue(): boolean {
    if (this.#failed) return false;
    const s = this.#schedule;
    if (s.failures === 0) return this.#uploadsSinceSnapshot >= SNAPSHOT_EVERY_UPLOADS;
    const writes = SNAPSHOT_RETRY_WRITES[Math.min(s.failures, SNAPSHOT_RETRY_WRITES.length) - 1];
    return this.#lastTxid >= s.txidAtLastTry + writes &&
      this.#o.clock.monotonic() - s.lastTryAt >= SNAPSHOT_RETRY_MS;
  }

  /**
   * Tries one periodic snapshot of the database as it is now (`pages`: every
   * page in ascending order, at TXID `position.txid`). One attempt; resolves
   * whether it landed. A failure costs no write. The pages are taken
   * {@linkcode SNAPSHOT_PAGES_PER_TURN} at a time with a turn of the event
   * loop between (they may be read as they are taken), so the database must
   * not change until this resolves: the caller holds the actor meanwhile.
   */
  snapshot(
    position: ReplicaPosition,
    pageSize: number,
    commit: number,
    pages: Iterable<LtxPage>,
  ): Promise<boolean> {
    if (this.#failed) return Promise.resolve(false);
    if (position.txid !== this.#lastTxid) {
      throw new AssertionError(
        `a snapshot is at the last commit: ${position.txid}, the last commit ${this.#lastTxid}`,
      );
    }
    const snapshot: SnapshotSource = {
      maxTxid: position.txid,
      pageSize,
      commit,
      pages,
      postApplyChecksum: position.checksum,
    };
    return new Promise((resolve) => {
      this.#jobs.push({ kind: "periodic-snapshot", snapshot, resolve });
      this.#run();
    });
  }

  /**
   * Records a delete at `txid` (the database is empty after it): queued
   * files not yet sent are dropped, the marker is written, and the next
   * file is a snapshot. Resolves once the marker is in the bucket.
   */
  recordDelete(txid: bigint): Promise<void> {
    if (this.#failed) return Promise.reject(this.#failed);
    if (txid !== this.#lastTxid + 1n) {
      throw new AssertionError(
        `a delete follows the last commit: ${txid} does not follow ${this.#lastTxid}`,
      );
    }
    this.#lastTxid = txid;
    for (let i = this.#jobs.length - 1; i >= 0; i--) {
      // Superseded: the marker makes every earlier file of this generation moot.
      if (this.#jobs[i].kind === "file") this.#jobs.splice(i, 1);
    }
    this.#fromEmpty = true;
    return new Promise((resolve, reject) => {
      this.#jobs.push({ kind: "delete", txid, resolve, reject });
      this.#run();
    });
  }

  async #run() {
    if (this.#running) return;
    this.#running = true;
    try {
      while (this.#jobs.length > 0 && !this.#failed) {
        const job = this.#jobs.shift()!;
        try {
          await this.#perform(job);
        } catch (error) {
          this.#fail(error);
          if (job.kind === "delete") job.reject(this.#failed);
          if (job.kind === "periodic-snapshot") job.resolve(false);
        }
      }
    } finally {
      this.#running = false;
      for (const job of this.#jobs.splice(0)) {
        if (job.kind === "delete") job.reject(this.#failed);
        if (job.kind === "periodic-snapshot") job.resolve(false);
      }
      for (const wake of this.#idle.splice(0)) wake();
    }
  }

  async #perform(job: Job) {
    await this.#writeBase();
    if (job.kind === "file") {
      await this.#upload(job.file);
      this.#uploadsSinceSnapshot = job.file.snapshot ? 0 : this.#uploadsSinceSnapshot + 1;
      this.#land(job.file.maxTxid);
      if (job.file.snapshot) this.#o.onSnapshot?.(job.file.maxTxid);
    } else if (job.kind === "delete") {
      await this.#writeDeleted(job.txid);
      this.#land(job.txid);
      job.resolve();
    } else {
      job.resolve(await this.#periodicSnapshot(job.snapshot));
    }
  }

  async #periodicSnapshot(snapshot: SnapshotSource): Promise<boolean> {
    const bytes = await encodeSnapshot(snapshot, this.#o.clock.now());
    const file = { minTxid: 1n, maxTxid: snapshot.maxTxid };
    const megabytes = Math.max(1, Math.ceil(bytes.length / BYTES_PER_MB));
    const maxAttemptMs = Math.min(
      SNAPSHOT_ATTEMPT_BASE_MS + megabytes * 1000,
      SNAPSHOT_ATTEMPT_MAX_MS,
    );
    try {
      await uploadWithAttempts(
        this.#o.bucket,
        walFileKey(this.#o.actor, this.#o.generation, file.minTxid, file.maxTxid),
        bytes,
        { ifNoneMatch: "*", maxAttempts: 1, maxAttemptMs },
        this.#o.clock,
      );
    } catch (error) {
      if (error instanceof PreconditionFailed) throw error;
      this.#o.count("wasmkeep_snapshot_upload_failures_total");
      this.#schedule = {
        failures: this.#schedule.failures + 1,
        lastTryAt: this.#o.clock.monotonic(),
        txidAtLastTry: file.maxTxid,
      };
      this.#o.log.warn("periodic snapshot not uploaded; tried again later", {
        actor: `${this.#o.actor.tenant}/${this.#o.actor.class}/${this.#o.actor.name}`,
        txid: file.maxTxid.toString(),
        failures: this.#schedule.failures,
        error: String(error),
      });
      return false;
    }
    this.#schedule = { failures: 0, lastTryAt: 0, txidAtLastTry: 0n };
    this.#uploadsSinceSnapshot = 0;
    this.#o.onSnapshot?.(file.maxTxid);
    return true;
  }

  async #writeBase() {
    if (this.#baseWritten) return;
    const { start, generation, actor, nodeId, clock } = this.#o;
    const body = encodeBase({
      generation,
      txid: start.txid,
      checksum: start.checksum,
      node: nodeId,
      at: clock.now(),
    });
    // A refused create means another process holds this generation.
    await uploadWithAttempts(this.#o.bucket, baseKey(actor, generation), body, {
      ifNoneMatch: "*",
    }, clock);
    this.#baseWritten = true;
  }

  async #upload(file: PendingFile) {
    const bytes = encodeFile(file, this.#o.clock.now());
    await uploadWithAttempts(
      this.#o.bucket,
      walFileKey(this.#o.actor, this.#o.generation, file.minTxid, file.maxTxid),
      bytes,
      { ifNoneMatch: "*" },
      this.#o.clock,
    );
  }

  async #writeDeleted(txid: bigint) {
    const { bucket, actor, generation, nodeId, clock } = this.#o;
    const key = deletedKey(actor);
    const current = await bucket.get(key);
    let condition: { ifMatch: string } | { ifNoneMatch: "*" } = { ifNoneMatch: "*" };
    if (current) {
      const marker: DeletedRecord = decodeDeleted(current.body);
      // A newer generation's marker means this node lost the actor.
      if (marker.generation > generation) {
        throw new ReplicationFailed(
          `a delete of generation ${marker.generation} is recorded; this node holds ${generation}`,
        );
      }
      condition = { ifMatch: current.etag };
    }
    const body = encodeDeleted({ generation, txid, node: nodeId, at: clock.now() });
    await uploadWithAttempts(bucket, key, body, condition, clock);
  }

  #land(txid: bigint) {
    this.#landed = txid;
    const waiting = this.#waiters;
    this.#waiters = [];
    for (const waiter of waiting) {
      if (waiter.txid <= txid) waiter.resolve();
      else this.#waiters.push(waiter);
    }
  }

  #fail(error: unknown) {
    if (this.#failed) return;
    this.#failed = error instanceof ReplicationFailed
      ? error
      : new ReplicationFailed(`upload failed: ${(error as Error)?.message ?? error}`, {
        cause: error,
      });
    for (const waiter of this.#waiters.splice(0)) waiter.reject(this.#failed);
    this.#o.onFailure(this.#failed);
  }
}

function mergeInto(file: PendingFile, commit: Commit) {
  file.maxTxid = commit.txid;
  file.commit = commit.commit;
  file.postApplyChecksum = commit.postApplyChecksum;
  for (const pgno of file.pages.keys()) if (pgno > commit.commit) file.pages.delete(pgno);
  for (const page of commit.pages) file.pages.set(page.pgno, page.data);
}

/** A turn of the event loop: timers and I/O run (`setTimeout(0)` would wait 1-4 ms). */
function nextTurn(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * Encodes a periodic snapshot {@linkcode SNAPSHOT_PAGES_PER_TURN} pages at a
 * time, with a turn of the event loop between.
 */
async function encodeSnapshot(snapshot: SnapshotSource, timestamp: number): Promise<Uint8Array> {
  const { maxTxid, pageSize, commit } = snapshot;
  const lock = lockPgno(pageSize);
  const expected = commit >= lock ? commit - 1 : commit;
  const encoder = new LtxEncoder(
    { pageSize, commit, minTxid: 1n, maxTxid, timestamp, preApplyChecksum: 0n },
    snapshot.postApplyChecksum,
    expected,
  );
  let count = 0;
  // Each chunk's pages are taken (and so read) only once its turn has come.
  const pages = snapshot.pages[Symbol.iterator]();
  try {
    for (;;) {
      if (count > 0 && count % SNAPSHOT_PAGES_PER_TURN === 0) await nextTurn();
      const next = pages.next();
      if (next.done) break;
      encoder.add(next.value);
      count++;
    }
  } finally {
    pages.return?.();
  }
  // A snapshot must hold every page: a missing one is a capture bug, and
  // a file the restore would refuse.
  if (count !== expected) {
    throw new AssertionError(`snapshot at ${maxTxid} holds ${count} of ${expected} pages`);
  }
  // Copied out of the encoder's larger buffer at its size, a turn between pieces.
  const view = encoder.finishView();
  const bytes = new Uint8Array(view.length);
  const piece = SNAPSHOT_PAGES_PER_TURN * pageSize * 4;
  for (let at = 0; at < view.length; at += piece) {
    if (at > 0) await nextTurn();
    bytes.set(view.subarray(at, at + piece), at);
  }
  return bytes;
}

function encodeFile(file: PendingFile, timestamp: number): Uint8Array {
  const pgnos = [...file.pages.keys()].sort((a, b) => a - b);
  if (file.snapshot) {
    // A snapshot must hold every page: a missing one is a capture bug, and
    // a file the restore would refuse.
    const lock = lockPgno(file.pageSize);
    const expected = file.commit >= lock ? file.commit - 1 : file.commit;
    if (pgnos.length !== expected) {
      throw new AssertionError(
        `snapshot at ${file.maxTxid} holds ${pgnos.length} of ${expected} pages`,
      );
    }
  }
  return encodeLtx({
    header: {
      pageSize: file.pageSize,
      commit: file.commit,
      minTxid: file.minTxid,
      maxTxid: file.maxTxid,
      timestamp,
      preApplyChecksum: file.preApplyChecksum,
    },
    pages: pgnos.map((pgno) => ({ pgno, data: file.pages.get(pgno)! })),
    postApplyChecksum: file.postApplyChecksum,
  });
}
