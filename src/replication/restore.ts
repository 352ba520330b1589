/**
 * Restores an actor's database from the bucket, as ADR 0002's walk says:
 * list the history, read `deleted` and the bases, plan, then read the
 * snapshot and the files after it eight at a time and apply them in order to
 * a file beside the local one, which replaces the local file only once the
 * target is reached and every checksum held.
 *
 * This module holds the walk; the reads and their bounds are in
 * `restore_reads.ts` (the restore's time together in `restore_budget.ts`),
 * applying the plan in `restore_apply.ts`, the files beside the local
 * database in `local_files.ts`.
 *
 * @module
 */

import type { Bucket, ObjectInfo } from "../bucket/bucket.ts";
import type { ActorKey } from "../actor_key.ts";
import { actorPrefix } from "../bucket/keys.ts";
import type { Logger } from "../log.ts";
import type { Clock } from "../time/clock.ts";
import {
  type BaseRecord,
  basesToRead,
  decodeBase,
  decodeDeleted,
  HistoryError,
  type LocalPosition,
  parseHistory,
  planRestore,
  type RestorePlan,
} from "./history.ts";
import { removeIfPresent, RESTORING_SUFFIX } from "./local_files.ts";
import type { ReadLimiter } from "./read_limiter.ts";
import { type Applied, type RestoreOutcome, RestoreRun } from "./restore_apply.ts";
import {
  isBucketError,
  listObjects,
  ReadSession,
  RestoreUnavailable,
  unavailable,
} from "./restore_reads.ts";

// What restoreActor throws when the bucket does not answer in its bounds:
// those who catch it (the executor's runtime, the simulator) import it with it.
export { RestoreUnavailable };

/** What {@linkcode restoreActor} needs. */
export interface RestoreOptions {
  /** The bucket holding the history. */
  bucket: Bucket;
  /** Times every bound. */
  clock: Clock;
  /** Whose history. */
  actor: ActorKey;
  /** The local database file; built beside it, then swapped in. */
  path: string;
  /**
   * Where the local file stands, when it was cleanly closed (its `-wal`
   * empty or absent); without it the local file is not trusted.
   */
  local?: LocalPosition;
  /** The process's limit on restore reads. */
  limiter: ReadLimiter;
  /** Where ignored keys, dropped files and fallbacks are logged. */
  log?: Logger;
  /** Abandons the restore (the local file stays untouched). */
  signal?: AbortSignal;
}

/** What {@linkcode restoreActor} returns. */
export interface RestoreResult {
  /** The TXID the database is at. */
  txid: bigint;
  /** Its rolling checksum. */
  checksum: bigint;
  /**
   * `current`: the local file was already there; `restored`: a new file is
   * in place; `empty`: the database is empty.
   */
  outcome: RestoreOutcome;
  /**
   * LTX files read from the bucket, those read ahead and then not needed
   * included (`base` and `deleted` objects not counted).
   */
  filesRead: number;
  /** Their bytes. */
  bytesRead: number;
  /** The highest generation of the history or its `deleted` marker; 0 when none. */
  highestGeneration: bigint;
  /** The TXID of the snapshot the chain starts from; 0 when it starts from an empty database. */
  snapshotTxid: bigint;
}

/**
 * Restores `actor`'s database to `path`. When the local database (at
 * `local`) lies on the chain, only the files after it are applied, to a copy;
 * with none after it nothing changes (`current`). Otherwise the database is
 * built from the start at `<path>.restoring`. Only once it is complete is the
 * local file (and its `-wal`) moved to `<path>.replaced` (`.replaced-wal`),
 * replacing the previous ones, and the new file renamed to `<path>`. When
 * the history says the database is empty, the local file is moved aside and
 * `path` left absent (`empty`); with no history at all, the local file is
 * left where it is (`empty` at TXID 0): the first node to touch an actor
 * decides its history.
 *
 * Throws {@linkcode HistoryError} (500) on a gap, corruption or a malformed
 * object, {@linkcode RestoreUnavailable} (503) when the bucket does not
 * answer within the bounds. A failure leaves the local file and its `-wal`
 * untouched and removes the partial file.
 *
 * @example
 * ```ts
 * import { restoreActor } from "./restore.ts";
 * import { ReadLimiter } from "./read_limiter.ts";
 * import { MemoryBucket } from "../bucket/memory.ts";
 * import { systemClock } from "../time/clock.ts";
 * const result = await restoreActor({
 *   bucket: new MemoryBucket(),
 *   clock: systemClock,
 *   actor: { tenant: "t", class: "c", name: "n" },
 *   path: "/tmp/n.db",
 *   limiter: new ReadLimiter(),
 * });
 * result.outcome; // "empty": nothing was ever written
 * ```
 */
export async function restoreActor(options: RestoreOptions): Promise<RestoreResult> {
  const { bucket, clock, actor, path, limiter, log, signal } = options;
  const partial = path + RESTORING_SUFFIX;
  // A restore that crashed left its partial file; it is of no use now.
  removeIfPresent(partial);
  let listed: ObjectInfo[];
  try {
    listed = await listObjects(bucket, clock, actorPrefix(actor), signal);
  } catch (e) {
    throw unavailable(e, `listing ${actorPrefix(actor)}`);
  }
  const history = parseHistory(listed, actor);
  for (const key of history.ignored) log?.warn("restore: key of no known shape ignored", { key });

  const session = new ReadSession(bucket, clock, limiter, signal);
  // Bases alone (an owner that took the actor and never got a file into the
  // bucket, an adoption whose snapshot failed among them) are no history
  // either: nothing was ever written, so a local file is still the one to keep.
  const noHistory = history.files.length === 0 && !history.deleted;
  const run = new RestoreRun(session, path, partial, noHistory);
  try {
    let deleted;
    if (history.deleted) {
      session.allow([history.deleted]);
      deleted = decodeDeleted(await session.read(history.deleted), history.deleted.key);
    }
    const toRead = basesToRead(history);
    session.allow(toRead);
    const bases = new Map<bigint, BaseRecord>();
    for await (const body of session.readInOrder(toRead, () => {})) {
      const base = toRead[bases.size];
      bases.set(base.generation, decodeBase(body, base.key));
    }
    const plan = planRestore(history, bases, deleted, options.local);
    for (const { key, reason } of plan.dropped) {
      log?.info("restore: object set aside", { key, reason });
    }

    if (plan.resume) {
      const resumed = await run.resume(plan, plan.resume);
      if (resumed) return resultOf(plan, run, resumed);
      log?.info("restore: the local database is not on the chain; restoring from the start", {
        txid: plan.resume.from.txid,
      });
    }
    return resultOf(plan, run, await run.fromStart(plan));
  } catch (e) {
    removeIfPresent(partial);
    if (e instanceof HistoryError || e instanceof RestoreUnavailable) throw e;
    if (signal?.aborted && e === signal.reason) throw e;
    if (isBucketError(e)) throw unavailable(e, "reading the history");
    throw e;
  } finally {
    session.close();
  }
}

/** The result of `run` applying `plan` as `applied` says. */
function resultOf(plan: RestorePlan, run: RestoreRun, applied: Applied): RestoreResult {
  return {
    txid: applied.at.txid,
    checksum: applied.at.checksum!,
    outcome: applied.outcome,
    filesRead: run.filesRead,
    bytesRead: run.bytesRead,
    highestGeneration: plan.highestGeneration,
    snapshotTxid: plan.start.kind === "snapshot" ? plan.start.txid : 0n,
  };
}
