/**
 * Deleting history a restore no longer needs (ADR 0002, "History
 * collection"), and erasing all of it when the actor is deleted. Deletes
 * that fail are counted, never thrown: the objects they leave cost bucket
 * space until the next run, never data.
 *
 * @module
 */

import type { Bucket } from "../bucket/bucket.ts";
import { type ActorId, actorWalPrefix } from "../bucket/keys.ts";
import { deadline } from "../bucket/timers.ts";
import type { Logger } from "../log.ts";
import type { Clock } from "../time/clock.ts";
import { type HistoryObject, parseHistory } from "./history.ts";
import { listObjects } from "./restore.ts";

/**
 * A delete the bucket does not answer in this long (5 s) is given up and counted as failed.
 *
 * @example
 * ```ts
 * import { COLLECT_DELETE_TIMEOUT_MS } from "./collect.ts";
 * console.log(COLLECT_DELETE_TIMEOUT_MS); // 5000
 * ```
 */
export const COLLECT_DELETE_TIMEOUT_MS = 5_000;

/**
 * Tries of each delete when erasing a deleted actor's history, the first included.
 *
 * @example
 * ```ts
 * import { ERASE_TRIES } from "./collect.ts";
 * console.log(ERASE_TRIES); // 3
 * ```
 */
export const ERASE_TRIES = 3;

/**
 * Pause before erasing again what the previous round failed to delete (1 s).
 *
 * @example
 * ```ts
 * import { ERASE_RETRY_PAUSE_MS } from "./collect.ts";
 * console.log(ERASE_RETRY_PAUSE_MS); // 1000
 * ```
 */
export const ERASE_RETRY_PAUSE_MS = 1_000;

/** What a collection or an erasure did. */
export interface DeleteCounts {
  /** Objects deleted. */
  deleted: number;
  /** Deletes that failed (the objects may remain). */
  failed: number;
}

/** What {@linkcode collectHistory} needs. */
export interface CollectOptions {
  /** The bucket holding the history. */
  bucket: Bucket;
  /** Wall time for the retention, and the delete timeouts. */
  clock: Clock;
  /** Whose history. */
  actor: ActorId;
  /** The generation this node holds the actor at. */
  generation: bigint;
  /** The TXID of the snapshot just uploaded at `generation`. */
  snapshotTxid: bigint;
  /** Only objects whose `lastModified` is older than this many ms are deleted. */
  retentionMs: number;
  /** Whether the node still holds the actor at `generation`; asked before each delete. */
  stillHolds: () => boolean;
  /** Stops the collection between deletes. */
  signal?: AbortSignal;
  /** Where failures are logged. */
  log?: Logger;
}

/**
 * After a snapshot at (`generation` g, `snapshotTxid` N), deletes among the
 * objects older than the retention: first every file with `max` ≤ N of g
 * (other than that snapshot) and of the generations below g, then the bases
 * of the generations below g. Never the snapshot, anything with `max` above
 * N (a file of a lower generation included: the rule keeps anything after the
 * snapshot), the base of g, or the `deleted` marker. Nothing is deleted if
 * the snapshot is not listed. Stops as soon as `stillHolds()` is false or
 * `signal` aborts. Throws `BucketUnavailable` when the listing cannot be read.
 *
 * @example
 * ```ts
 * import { collectHistory } from "./collect.ts";
 * import { MemoryBucket } from "../bucket/memory.ts";
 * import { systemClock } from "../time/clock.ts";
 * const counts = await collectHistory({
 *   bucket: new MemoryBucket(),
 *   clock: systemClock,
 *   actor: { tenant: "t", class: "c", name: "n" },
 *   generation: 2n,
 *   snapshotTxid: 130n,
 *   retentionMs: 3_600_000,
 *   stillHolds: () => true,
 * });
 * counts.deleted; // 0: the snapshot is not there
 * ```
 */
export async function collectHistory(options: CollectOptions): Promise<DeleteCounts> {
  const { bucket, clock, actor, generation: g, snapshotTxid: n, signal, log } = options;
  const history = parseHistory(
    await listObjects(bucket, clock, actorWalPrefix(actor), signal),
    actor,
  );
  const counts = { deleted: 0, failed: 0 };
  const snapshot = history.files.find((f) =>
    f.generation === g && f.minTxid === 1n && f.maxTxid === n
  );
  if (!snapshot) {
    log?.warn("collection: the snapshot is not listed; nothing deleted", { txid: n });
    return counts;
  }
  const cutoff = clock.now() - options.retentionMs;
  const old = (o: HistoryObject) => o.lastModified < cutoff;
  const files = history.files.filter((f) =>
    f !== snapshot && f.generation <= g && f.maxTxid <= n && old(f)
  );
  const bases = [...history.bases.values()].filter((b) => b.generation < g && old(b));
  for (const object of [...files, ...bases]) {
    if (signal?.aborted || !options.stillHolds()) break;
    if (await deleteOnce(bucket, clock, object.key, signal, log)) counts.deleted++;
    else counts.failed++;
  }
  return counts;
}

/** What {@linkcode eraseHistory} needs. */
export interface EraseOptions {
  /** The bucket holding the history. */
  bucket: Bucket;
  /** Times the deletes and the pauses between rounds. */
  clock: Clock;
  /** Whose history. */
  actor: ActorId;
  /** The generation of the `deleted` marker; with `txid`, narrows the erasure to what it makes dead. */
  generation?: bigint;
  /** The TXID of the `deleted` marker. */
  txid?: bigint;
  /** Stops the erasure between deletes. */
  signal?: AbortSignal;
  /** Where failures are logged. */
  log?: Logger;
}

/**
 * Deletes every object under the actor's `wal/` (files and bases of every
 * generation, whatever their age), after its `deleted` marker was written.
 * Given the marker's `generation` G and `txid` D, only what the marker makes
 * dead: the files of generations below G and those of G up to D, and the
 * bases of G and below. What a newer owner, or this one after the delete,
 * wrote since is kept. Deletes that fail are tried again after
 * {@linkcode ERASE_RETRY_PAUSE_MS}, {@linkcode ERASE_TRIES} tries each; those
 * still failing are counted.
 * Throws `BucketUnavailable` when the listing cannot be read.
 *
 * @example
 * ```ts
 * import { eraseHistory } from "./collect.ts";
 * import { MemoryBucket } from "../bucket/memory.ts";
 * import { systemClock } from "../time/clock.ts";
 * const { deleted, failed } = await eraseHistory({
 *   bucket: new MemoryBucket(),
 *   clock: systemClock,
 *   actor: { tenant: "t", class: "c", name: "n" },
 * });
 * ```
 */
export async function eraseHistory(options: EraseOptions): Promise<DeleteCounts> {
  const { bucket, clock, actor, generation: g, txid: d, signal, log } = options;
  const history = parseHistory(
    await listObjects(bucket, clock, actorWalPrefix(actor), signal),
    actor,
  );
  const dead = g === undefined || d === undefined
    ? [...history.files, ...history.bases.values(), ...history.ignored.map((key) => ({ key }))]
    : [
      ...history.files.filter((f) => f.generation < g || (f.generation === g && f.maxTxid <= d)),
      ...[...history.bases.values()].filter((b) => b.generation <= g),
    ];
  let left = dead.map((o) => o.key);
  let deleted = 0;
  for (let round = 1; round <= ERASE_TRIES && left.length > 0; round++) {
    if (round > 1) {
      try {
        await clock.sleep(ERASE_RETRY_PAUSE_MS, signal);
      } catch {
        break;
      }
    }
    const failed: string[] = [];
    for (const key of left) {
      if (signal?.aborted) failed.push(key);
      else if (await deleteOnce(bucket, clock, key, signal, log)) deleted++;
      else failed.push(key);
    }
    left = failed;
  }
  return { deleted, failed: left.length };
}

async function deleteOnce(
  bucket: Bucket,
  clock: Clock,
  key: string,
  signal: AbortSignal | undefined,
  log: Logger | undefined,
): Promise<boolean> {
  const limit = deadline(clock, COLLECT_DELETE_TIMEOUT_MS, `DELETE ${key}`, signal);
  try {
    await bucket.delete(key, { signal: limit.signal });
    return true;
  } catch (e) {
    log?.warn("history delete failed", { key, error: String(e) });
    return false;
  } finally {
    limit.done();
  }
}
