/**
 * Deleting history a restore no longer needs (ADR 0002, "History
 * collection"), and erasing all of it when the actor is deleted. Deletes
 * that fail are counted, never thrown: the objects they leave cost bucket
 * space until the next run, never data.
 *
 * @module
 */

import { type Bucket, MAX_KEYS_PER_PAGE } from "../bucket/bucket.ts";
import type { ActorKey } from "../actor_key.ts";
import { actorWalPrefix } from "../bucket/keys.ts";
import { BucketUnavailable } from "../bucket/errors.ts";
import { deadline } from "../bucket/timers.ts";
import type { Logger } from "../log.ts";
import type { Clock } from "../time/clock.ts";
import {
  baseKey,
  type BaseRecord,
  decodeBase,
  type HistoryBase,
  type HistoryFile,
  type HistoryObject,
  parseHistory,
  supersededDelete,
  walFileKey,
} from "./history.ts";
import { listObjects, listPage } from "./restore_reads.ts";

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
  actor: ActorKey;
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
 * Keys the first listing page of each stretch of a collection's walk asks
 * for (32); each further page of the stretch asks for twice as many, up to
 * the bucket's page size.
 *
 * @example
 * ```ts
 * import { COLLECT_FIRST_PAGE_KEYS } from "./collect.ts";
 * console.log(COLLECT_FIRST_PAGE_KEYS); // 32
 * ```
 */
export const COLLECT_FIRST_PAGE_KEYS = 32;

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
 * The listing is walked in key order (generation, then first TXID, then last
 * TXID) and skips what cannot be deleted, so that a collection costs about
 * what it deletes and not the whole history. Within a generation, the files
 * of first TXID 1 (its snapshots) come first, ordered as they were uploaded,
 * then the other files, also in upload order: after the first of either run
 * too young to delete, the rest of that run is younger still, and after a
 * file whose first TXID is above N nothing of the generation can go but its
 * base. Past g's snapshot and its files, nothing can go at all. When nothing
 * is old enough, a collection reads one or two short listing pages.
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
  const cutoff = clock.now() - options.retentionMs;
  const old = (o: HistoryObject) => o.lastModified < cutoff;
  const { files, bases, found } = await collectable(
    bucket,
    clock,
    actor,
    g,
    n,
    old,
    signal,
  );
  const counts = { deleted: 0, failed: 0 };
  if (!found) {
    log?.warn("collection: the snapshot is not listed; nothing deleted", { txid: n });
    return counts;
  }
  // The walk stops at this owner's base, before any later generation's keys.
  if (await laterGenerationListed(bucket, clock, actor, g, signal)) {
    log?.warn("collection: a later owner holds the actor; nothing deleted", { txid: n });
    return counts;
  }
  for (const object of [...files, ...bases]) {
    if (signal?.aborted || !options.stillHolds()) break;
    if (await deleteOnce(bucket, clock, object.key, signal, log)) counts.deleted++;
    else counts.failed++;
  }
  return counts;
}

/**
 * Whether a key of a generation after `g` is listed: a later owner took the
 * actor, and may build on anything of `g`'s (a snapshot of `g`'s that landed
 * late lies past that owner's base, so no restore uses it).
 */
async function laterGenerationListed(
  bucket: Bucket,
  clock: Clock,
  actor: ActorKey,
  g: bigint,
  signal: AbortSignal | undefined,
): Promise<boolean> {
  // Past every key of g's: "~" sorts after hex digits and "base".
  const afterG = baseKey(actor, g).slice(0, -"base".length) + "~";
  const page = await listPage(bucket, clock, actorWalPrefix(actor), {
    startAfter: afterG,
    maxKeys: 1,
  }, signal);
  return page.objects.length > 0;
}

// The highest TXID a key can name: the end of a generation's snapshots.
const LAST_TXID = (1n << 64n) - 1n;

/**
 * Walks the actor's `wal/` listing in key order and returns what the rule
 * lets a collection after the snapshot (g, 1-n) delete, and whether that
 * snapshot is listed. Skips ahead (`startAfter`) over stretches of keys that
 * cannot hold anything to delete; see {@linkcode collectHistory}.
 */
async function collectable(
  bucket: Bucket,
  clock: Clock,
  actor: ActorKey,
  g: bigint,
  n: bigint,
  old: (o: HistoryObject) => boolean,
  signal: AbortSignal | undefined,
): Promise<{ files: HistoryObject[]; bases: HistoryObject[]; found: boolean }> {
  const prefix = actorWalPrefix(actor);
  const generationPrefix = (gen: bigint) => baseKey(actor, gen).slice(0, -"base".length);
  const files: HistoryObject[] = [];
  const bases: HistoryObject[] = [];
  let found = false;
  // Where the walk goes on from: after this key, or at the token's page.
  let startAfter: string | undefined;
  let continuationToken: string | undefined;
  let maxKeys = COLLECT_FIRST_PAGE_KEYS;
  for (;;) {
    const page = await listPage(
      bucket,
      clock,
      prefix,
      continuationToken === undefined ? { startAfter, maxKeys } : { continuationToken, maxKeys },
      signal,
    );
    const history = parseHistory(page.objects, actor);
    const byKey = new Map<string, HistoryFile | HistoryBase>();
    for (const f of history.files) byKey.set(f.key, f);
    for (const b of history.bases.values()) byKey.set(b.key, b);
    // Keys up to this one are skipped (a stretch with nothing to delete).
    let skipTo: string | undefined;
    for (const { key } of page.objects) {
      if (skipTo !== undefined && key <= skipTo) continue;
      skipTo = undefined;
      const object = byKey.get(key);
      if (!object) continue; // Not a history key: never deleted.
      const gen = object.generation;
      if (gen > g) return { files, bases, found };
      let next: string | undefined;
      if (!("minTxid" in object)) {
        // A base: g's is never deleted, and nothing after it can be.
        if (gen === g) return { files, bases, found };
        if (old(object)) bases.push(object);
      } else if (object.minTxid === 1n) {
        // A snapshot. The rest of this run is younger, or past n.
        const afterSnapshots = walFileKey(actor, gen, 1n, LAST_TXID);
        if (gen === g && object.maxTxid === n) {
          found = true;
          next = afterSnapshots;
        } else if (object.maxTxid <= n && old(object)) {
          files.push(object);
        } else if (gen === g && object.maxTxid < n) {
          // Too young, but the snapshot must still be seen: go on from it.
          next = walFileKey(actor, gen, 1n, n - 1n);
        } else {
          next = afterSnapshots;
        }
      } else {
        // The snapshot of g comes before g's other files.
        if (gen === g && !found) return { files, bases, found };
        if (object.minTxid > n || !old(object)) {
          // The rest of the generation's files are younger, or past n.
          if (gen === g) return { files, bases, found };
          next = generationPrefix(gen) + "bas";
        } else if (object.maxTxid <= n) {
          files.push(object);
        }
      }
      // Only forward: a skip never goes back to keys already walked.
      if (next !== undefined && next > key) skipTo = next;
    }
    if (page.continuationToken === undefined) return { files, bases, found };
    const last = page.objects[page.objects.length - 1]?.key;
    if (skipTo !== undefined && last !== undefined && skipTo > last) {
      // The skip reaches past this page: list again from where it lands.
      startAfter = skipTo;
      continuationToken = undefined;
      maxKeys = COLLECT_FIRST_PAGE_KEYS;
    } else {
      continuationToken = page.continuationToken;
      maxKeys = Math.min(maxKeys * 2, MAX_KEYS_PER_PAGE);
    }
  }
}

/** What {@linkcode eraseHistory} needs. */
export interface EraseOptions {
  /** The bucket holding the history. */
  bucket: Bucket;
  /** Times the deletes and the pauses between rounds. */
  clock: Clock;
  /** Whose history. */
  actor: ActorKey;
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
 * wrote since is kept; and nothing is deleted when a newer owner took the
 * actor without the delete (its base starts below D, or at D with a
 * database that is not empty: the marker landed after it took the actor),
 * since that owner builds on the history. Deletes that fail are tried again after
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
  if (g !== undefined && d !== undefined) {
    const later = new Map<bigint, BaseRecord>();
    for (const base of history.bases.values()) {
      if (base.generation > g) {
        later.set(base.generation, await readBase(bucket, clock, base.key, signal));
      }
    }
    if (supersededDelete(later, { generation: g, txid: d })) {
      log?.warn("a later owner took the actor without its delete: the history stays", {
        txid: String(d),
      });
      return { deleted: 0, failed: 0 };
    }
  }
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

/** A base record; `BucketUnavailable` when it cannot be read within the bound. */
async function readBase(
  bucket: Bucket,
  clock: Clock,
  key: string,
  signal: AbortSignal | undefined,
): Promise<BaseRecord> {
  const limit = deadline(clock, COLLECT_DELETE_TIMEOUT_MS, `GET ${key}`, signal);
  try {
    const object = await bucket.get(key, { signal: limit.signal });
    if (!object) {
      throw new BucketUnavailable(`GET ${key}: gone while erasing`, { ambiguous: false });
    }
    return decodeBase(object.body, key);
  } finally {
    limit.done();
  }
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
