/**
 * Restores an actor's database from the bucket, as ADR 0002's walk says:
 * list the history, read `deleted` and the bases, plan, then read the
 * snapshot and the files after it eight at a time and apply them in order to
 * a file beside the local one, which replaces the local file only once the
 * target is reached and every checksum held.
 *
 * Reads are bounded as the spec's "Replication" section says: a read gets
 * 5 s plus a second per megabyte in flight in the process's limiter before it
 * is abandoned and sent again; a read refused with an error a resend can get
 * past is sent again half a second later, then a second later; three tries.
 * The reads of one restore have 30 s together, plus a second per megabyte and
 * per eight objects they read. Time waiting for a limiter place is not
 * charged to that, nor the seconds other restores' megabytes add to a read.
 *
 * @module
 */

import type { Bucket, ListOptions, ListPage, ObjectInfo } from "../bucket/bucket.ts";
import { BYTES_PER_MB } from "../bucket/bounds.ts";
import { BucketRequestError, BucketUnavailable } from "../bucket/errors.ts";
import type { ActorKey } from "../actor_key.ts";
import { actorPrefix } from "../bucket/keys.ts";
import { deadline, DeadlineExceeded } from "../bucket/timers.ts";
import { applyLtxToFile, type LtxPosition } from "../ltx/apply.ts";
import { decodeLtx, type LtxFile } from "../ltx/decoder.ts";
import { LtxError } from "../ltx/errors.ts";
import { hasNoChecksum } from "../ltx/header.ts";
import type { Logger } from "../log.ts";
import type { Clock, Timer } from "../time/clock.ts";
import {
  type BaseRecord,
  basesToRead,
  decodeBase,
  decodeDeleted,
  EMPTY_DATABASE_CHECKSUM,
  HistoryError,
  type HistoryFile,
  type HistoryObject,
  type LocalPosition,
  parseHistory,
  planRestore,
  type RestorePlan,
  type ResumePlan,
} from "./history.ts";
import type { ReadLimiter } from "./read_limiter.ts";

/**
 * A listing page the bucket sends nothing of for this long (5 s) gives the listing up.
 *
 * @example
 * ```ts
 * import { RESTORE_LIST_SILENCE_MS } from "./restore.ts";
 * console.log(RESTORE_LIST_SILENCE_MS); // 5000
 * ```
 */
export const RESTORE_LIST_SILENCE_MS = 5_000;

/**
 * A read's time before it is abandoned and sent again: this (5 s) plus the per-megabyte time.
 *
 * @example
 * ```ts
 * import { RESTORE_READ_BASE_MS } from "./restore.ts";
 * console.log(RESTORE_READ_BASE_MS); // 5000
 * ```
 */
export const RESTORE_READ_BASE_MS = 5_000;

/**
 * Time a read gets per megabyte in flight in the limiter when it starts (1 s).
 *
 * @example
 * ```ts
 * import { RESTORE_READ_MS_PER_MB } from "./restore.ts";
 * console.log(RESTORE_READ_MS_PER_MB); // 1000
 * ```
 */
export const RESTORE_READ_MS_PER_MB = 1_000;

/**
 * Tries of one read (or listing page), the first included.
 *
 * @example
 * ```ts
 * import { RESTORE_READ_TRIES } from "./restore.ts";
 * console.log(RESTORE_READ_TRIES); // 3
 * ```
 */
export const RESTORE_READ_TRIES = 3;

/**
 * Pauses before resending a refused read: half a second, then a second.
 *
 * @example
 * ```ts
 * import { RESTORE_RETRY_PAUSES_MS } from "./restore.ts";
 * console.log(RESTORE_RETRY_PAUSES_MS); // [500, 1000]
 * ```
 */
export const RESTORE_RETRY_PAUSES_MS: readonly number[] = Object.freeze([500, 1_000]);

/**
 * The reads of one restore have this long together (30 s), plus the allowances below.
 *
 * @example
 * ```ts
 * import { RESTORE_TOTAL_BASE_MS } from "./restore.ts";
 * console.log(RESTORE_TOTAL_BASE_MS); // 30000
 * ```
 */
export const RESTORE_TOTAL_BASE_MS = 30_000;

/**
 * Added to a restore's time per megabyte it reads (1 s).
 *
 * @example
 * ```ts
 * import { RESTORE_TOTAL_MS_PER_MB } from "./restore.ts";
 * console.log(RESTORE_TOTAL_MS_PER_MB); // 1000
 * ```
 */
export const RESTORE_TOTAL_MS_PER_MB = 1_000;

/**
 * Added to a restore's time per group of {@linkcode RESTORE_OBJECTS_PER_GROUP} objects (1 s).
 *
 * @example
 * ```ts
 * import { RESTORE_MS_PER_OBJECT_GROUP } from "./restore.ts";
 * console.log(RESTORE_MS_PER_OBJECT_GROUP); // 1000
 * ```
 */
export const RESTORE_MS_PER_OBJECT_GROUP = 1_000;

/**
 * Objects per group of {@linkcode RESTORE_MS_PER_OBJECT_GROUP} (eight).
 *
 * @example
 * ```ts
 * import { RESTORE_OBJECTS_PER_GROUP } from "./restore.ts";
 * console.log(RESTORE_OBJECTS_PER_GROUP); // 8
 * ```
 */
export const RESTORE_OBJECTS_PER_GROUP = 8;

/**
 * LTX files of one restore read ahead of the one being applied, that one included (eight).
 *
 * @example
 * ```ts
 * import { RESTORE_READS_IN_FLIGHT } from "./restore.ts";
 * console.log(RESTORE_READS_IN_FLIGHT); // 8
 * ```
 */
export const RESTORE_READS_IN_FLIGHT = 8;

/**
 * Suffix of the database being built beside the local one.
 *
 * @example
 * ```ts
 * import { RESTORING_SUFFIX } from "./restore.ts";
 * console.log("actor.db" + RESTORING_SUFFIX); // "actor.db.restoring"
 * ```
 */
export const RESTORING_SUFFIX = ".restoring";

/**
 * Suffix the replaced local database is kept under (one generation).
 *
 * @example
 * ```ts
 * import { REPLACED_SUFFIX } from "./restore.ts";
 * console.log("actor.db" + REPLACED_SUFFIX); // "actor.db.replaced"
 * ```
 */
export const REPLACED_SUFFIX = ".replaced";

/**
 * Suffix of SQLite's write-ahead log beside a database.
 *
 * @example
 * ```ts
 * import { WAL_SUFFIX } from "./restore.ts";
 * console.log("actor.db" + WAL_SUFFIX); // "actor.db-wal"
 * ```
 */
export const WAL_SUFFIX = "-wal";

/**
 * The bucket did not answer within the restore's bounds, or refused it for
 * good. It maps to HTTP 503: the history may be fine, try again later.
 *
 * @example
 * ```ts
 * import { RestoreUnavailable } from "./restore.ts";
 * const e = new RestoreUnavailable("GET a: no answer after 3 tries");
 * console.log(e.status); // 503
 * ```
 */
export class RestoreUnavailable extends Error {
  /** Always `"RestoreUnavailable"`, for logs and structured errors. */
  override name = "RestoreUnavailable";
  /** The HTTP status this maps to. */
  readonly status = 503;

  /** Describes what did not answer. */
  constructor(message: string, options: { cause?: unknown } = {}) {
    super(message, { cause: options.cause });
  }
}

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

/** How the restore ended. */
export type RestoreOutcome = "current" | "restored" | "empty";

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
      if (resumed) return resumed;
      log?.info("restore: the local database is not on the chain; restoring from the start", {
        txid: plan.resume.from.txid,
      });
    }
    return await run.fromStart(plan);
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

/**
 * Every object under `prefix`, page by page. A page the bucket sends
 * nothing of for {@linkcode RESTORE_LIST_SILENCE_MS} gives the listing up; a
 * page refused with `BucketUnavailable` is asked again after the read pauses,
 * {@linkcode RESTORE_READ_TRIES} tries. Throws `BucketUnavailable` when given
 * up, or what the bucket threw for good.
 *
 * @example
 * ```ts
 * import { listObjects } from "./restore.ts";
 * import { MemoryBucket } from "../bucket/memory.ts";
 * import { systemClock } from "../time/clock.ts";
 * const objects = await listObjects(new MemoryBucket(), systemClock, "actors/t/c/n/");
 * objects.length; // 0
 * ```
 */
export async function listObjects(
  bucket: Bucket,
  clock: Clock,
  prefix: string,
  signal?: AbortSignal,
): Promise<ObjectInfo[]> {
  const objects: ObjectInfo[] = [];
  let continuationToken: string | undefined;
  do {
    const page = await listPage(bucket, clock, prefix, { continuationToken }, signal);
    objects.push(...page.objects);
    continuationToken = page.continuationToken;
  } while (continuationToken !== undefined);
  return objects;
}

/**
 * One page of a listing of `prefix`, bounded and retried as
 * {@linkcode listObjects} does each of its pages.
 *
 * @example
 * ```ts
 * import { listPage } from "./restore.ts";
 * import { MemoryBucket } from "../bucket/memory.ts";
 * import { systemClock } from "../time/clock.ts";
 * const page = await listPage(new MemoryBucket(), systemClock, "actors/t/c/n/", { maxKeys: 10 });
 * page.objects.length; // 0
 * ```
 */
export async function listPage(
  bucket: Bucket,
  clock: Clock,
  prefix: string,
  options: Pick<ListOptions, "startAfter" | "continuationToken" | "maxKeys">,
  signal?: AbortSignal,
): Promise<ListPage> {
  for (let attempt = 1;; attempt++) {
    const limit = deadline(clock, RESTORE_LIST_SILENCE_MS, `LIST ${prefix}`, signal);
    try {
      return await bucket.list(prefix, { ...options, signal: limit.signal });
    } catch (e) {
      signal?.throwIfAborted();
      if (e instanceof DeadlineExceeded) {
        throw new BucketUnavailable(
          `LIST ${prefix}: nothing in ${RESTORE_LIST_SILENCE_MS} ms`,
          { ambiguous: false, cause: e },
        );
      }
      if (!(e instanceof BucketUnavailable) || attempt >= RESTORE_READ_TRIES) throw e;
    } finally {
      limit.done();
    }
    await clock.sleep(RESTORE_RETRY_PAUSES_MS[attempt - 1], signal);
  }
}

/**
 * A read's time before it is abandoned: {@linkcode RESTORE_READ_BASE_MS}
 * plus {@linkcode RESTORE_READ_MS_PER_MB} per started megabyte of `bytes`.
 *
 * @example
 * ```ts
 * import { readLimitMs } from "./restore.ts";
 * readLimitMs(1_500_000); // 7000
 * ```
 */
export function readLimitMs(bytes: number): number {
  return RESTORE_READ_BASE_MS + Math.ceil(bytes / BYTES_PER_MB) * RESTORE_READ_MS_PER_MB;
}

/**
 * The time the reads of one restore have together, for `objects` objects of
 * `bytes` bytes in all.
 *
 * @example
 * ```ts
 * import { restoreBudgetMs } from "./restore.ts";
 * restoreBudgetMs(9, 2_000_000); // 30000 + 2000 + 2000
 * ```
 */
export function restoreBudgetMs(objects: number, bytes: number): number {
  return RESTORE_TOTAL_BASE_MS + Math.ceil(bytes / BYTES_PER_MB) * RESTORE_TOTAL_MS_PER_MB +
    Math.ceil(objects / RESTORE_OBJECTS_PER_GROUP) * RESTORE_MS_PER_OBJECT_GROUP;
}

/** Applying a plan, and the counts of what it read. */
class RestoreRun {
  filesRead = 0;
  bytesRead = 0;

  constructor(
    readonly session: ReadSession,
    readonly path: string,
    readonly partial: string,
    readonly noHistory: boolean,
  ) {}

  /** Brings the local database up to the target; undefined when it turns out to be off the chain. */
  async resume(plan: RestorePlan, resume: ResumePlan): Promise<RestoreResult | undefined> {
    const { from } = resume;
    if (resume.files.length === 0) {
      if (resume.confirm) {
        for await (const file of this.#files([resume.confirm])) {
          if (file.postApplyChecksum !== from.checksum) return undefined;
        }
      }
      return this.#result(plan, from, "current");
    }
    try {
      this.session.uncounted(() => Deno.copyFileSync(this.path, this.partial));
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
      // No local file is an empty database, which is only right at the empty checksum.
      if (from.checksum !== EMPTY_DATABASE_CHECKSUM) return undefined;
      Deno.writeFileSync(this.partial, new Uint8Array());
    }
    let position: LtxPosition = from;
    for await (const file of this.#files(resume.files)) {
      if (position === from && file.header.preApplyChecksum !== from.checksum) {
        removeIfPresent(this.partial);
        return undefined;
      }
      position = this.session.uncounted(() =>
        applyChecked(this.partial, file, position, plan.checkpoints)
      );
    }
    swapIn(this.path, this.partial);
    return this.#result(plan, position, "restored");
  }

  /** Builds the database from the plan's start. */
  async fromStart(plan: RestorePlan): Promise<RestoreResult> {
    const { start } = plan;
    const empty = { txid: start.txid, checksum: EMPTY_DATABASE_CHECKSUM };
    if (start.kind === "empty" && plan.files.length === 0) {
      // With no history at all the local file is left for the caller: the
      // first node to touch an actor decides its history.
      if (!this.noHistory) swapIn(this.path, undefined);
      return this.#result(plan, empty, "empty");
    }
    Deno.writeFileSync(this.partial, new Uint8Array());
    let position: LtxPosition | undefined = start.kind === "empty" ? empty : undefined;
    const files = start.kind === "snapshot" ? [start.file, ...plan.files] : plan.files;
    for await (const file of this.#files(files)) {
      position = this.session.uncounted(() =>
        applyChecked(this.partial, file, position, plan.checkpoints)
      );
    }
    swapIn(this.path, this.partial);
    return this.#result(plan, position!, "restored");
  }

  async *#files(files: HistoryFile[]): AsyncGenerator<LtxFile> {
    this.session.allow(files);
    let i = 0;
    const read = (body: Uint8Array) => {
      this.filesRead++;
      this.bytesRead += body.length;
    };
    for await (const body of this.session.readInOrder(files, read)) {
      yield decodeChecked(files[i++], body);
    }
  }

  #result(plan: RestorePlan, at: LtxPosition, outcome: RestoreOutcome): RestoreResult {
    return {
      txid: at.txid,
      checksum: at.checksum!,
      outcome,
      filesRead: this.filesRead,
      bytesRead: this.bytesRead,
      highestGeneration: plan.highestGeneration,
      snapshotTxid: plan.start.kind === "snapshot" ? plan.start.txid : 0n,
    };
  }
}

function decodeChecked(object: HistoryFile, body: Uint8Array): LtxFile {
  let file: LtxFile;
  try {
    file = decodeLtx(body);
  } catch (e) {
    if (e instanceof LtxError) {
      throw new HistoryError("corruption", `${object.key}: ${e.message}`, { cause: e });
    }
    throw e;
  }
  const { header } = file;
  if (header.minTxid !== object.minTxid || header.maxTxid !== object.maxTxid) {
    throw new HistoryError(
      "malformed",
      `${object.key} holds TXIDs ${header.minTxid}-${header.maxTxid}`,
    );
  }
  if (hasNoChecksum(header)) {
    throw new HistoryError("malformed", `${object.key} does not track checksums`);
  }
  return file;
}

function applyChecked(
  path: string,
  file: LtxFile,
  at: LtxPosition | undefined,
  checkpoints: Map<bigint, bigint>,
): LtxPosition {
  const { header } = file;
  const name = `${header.minTxid}-${header.maxTxid}`;
  if (header.minTxid !== 1n && header.preApplyChecksum !== at?.checksum) {
    throw new HistoryError(
      "corruption",
      `file ${name}: pre-apply checksum ${hex(header.preApplyChecksum)}, ` +
        `the database at TXID ${at?.txid} has ${hex(at?.checksum)}`,
    );
  }
  let next: LtxPosition | undefined;
  try {
    next = applyLtxToFile(path, [file], at);
  } catch (e) {
    if (e instanceof LtxError) {
      throw new HistoryError("corruption", `file ${name}: ${e.message}`, { cause: e });
    }
    throw e;
  }
  const expected = checkpoints.get(next!.txid);
  if (expected !== undefined && expected !== next!.checksum) {
    throw new HistoryError(
      "corruption",
      `at TXID ${next!.txid} the database has checksum ${hex(next!.checksum)}, ` +
        `a base says ${hex(expected)}`,
    );
  }
  return next!;
}

/**
 * Moves the local database and its `-wal` aside (replacing the previous ones
 * kept), then renames the new file in. The `-wal` goes first: a stale `-wal`
 * next to the new file would be replayed into it.
 */
function swapIn(path: string, built: string | undefined): void {
  setAside(path);
  if (built) Deno.renameSync(built, path);
}

/**
 * Moves the local database and its `-wal` to `<path>.replaced`
 * (`.replaced-wal`), replacing the ones kept there: the `-wal` first.
 *
 * @example
 * ```ts ignore
 * setAside("/data/actors/default/counter/a.db"); // now a.db.replaced
 * ```
 */
export function setAside(path: string): void {
  const replaced = path + REPLACED_SUFFIX;
  const hasDb = exists(path);
  const hasWal = exists(path + WAL_SUFFIX);
  if (hasDb || hasWal) {
    removeIfPresent(replaced + WAL_SUFFIX);
    removeIfPresent(replaced);
  }
  if (hasWal) Deno.renameSync(path + WAL_SUFFIX, replaced + WAL_SUFFIX);
  if (hasDb) Deno.renameSync(path, replaced);
}

/**
 * Whether a file is at `path`; errors other than "not found" are thrown.
 *
 * @example
 * ```ts
 * import { exists } from "./restore.ts";
 * exists("/nonexistent"); // false
 * ```
 */
export function exists(path: string): boolean {
  try {
    Deno.lstatSync(path);
    return true;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return false;
    throw e;
  }
}

function removeIfPresent(path: string): void {
  try {
    Deno.removeSync(path);
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
}

/**
 * The time the reads of one restore are charged, as a deadline that runs
 * only while it counts: while no read is outstanding (planning) or while at
 * least one read holds a limiter place within its own share of time, or
 * pauses before a resend. It stands still while every outstanding read waits
 * for a place or runs on seconds other restores' megabytes added, and for
 * work on the local disk (applying a file, copying the local database:
 * {@linkcode ReadBudget.uncounted}).
 */
class ReadBudget {
  readonly #clock: Clock;
  readonly #expire: (allowedMs: number) => void;
  #objects = 0;
  #bytes = 0;
  #allowedMs = restoreBudgetMs(0, 0);
  #chargedMs = 0;
  #since: number | undefined;
  #timer: Timer | undefined;
  #outstanding = 0;
  #charging = 0;
  #closed = false;

  constructor(clock: Clock, expire: (allowedMs: number) => void) {
    this.#clock = clock;
    this.#expire = expire;
    this.#update();
  }

  /** Adds the allowance of reading `objects`. */
  allow(objects: readonly HistoryObject[]): void {
    for (const o of objects) {
      this.#objects++;
      this.#bytes += o.size;
    }
    this.#allowedMs = restoreBudgetMs(this.#objects, this.#bytes);
    if (this.#since !== undefined) this.#arm();
  }

  /** A read began (waiting for a place, not charged yet). */
  enter(): void {
    this.#outstanding++;
    this.#update();
  }

  /** A read ended. */
  leave(): void {
    this.#outstanding--;
    this.#update();
  }

  /** A read holds a place within its own time, or pauses before a resend. */
  startCharging(): void {
    this.#charging++;
    this.#update();
  }

  /** It no longer does. */
  stopCharging(): void {
    this.#charging--;
    this.#update();
  }

  /** Stops the deadline for good. */
  close(): void {
    this.#closed = true;
    this.#update();
  }

  #charged(): number {
    return this.#chargedMs +
      (this.#since === undefined ? 0 : this.#clock.monotonic() - this.#since);
  }

  #update(): void {
    const running = !this.#closed && (this.#outstanding === 0 || this.#charging > 0);
    if (running === (this.#since !== undefined)) return;
    if (running) {
      this.#since = this.#clock.monotonic();
      this.#arm();
    } else {
      this.#chargedMs = this.#charged();
      this.#since = undefined;
      this.#timer?.cancel();
      this.#timer = undefined;
    }
  }

  /**
   * Runs `work` on the local disk, whose time is not charged (the spec: the
   * deadline does not count work on the local disk): reads that land
   * meanwhile are only seen once it ends, so the time would be theirs.
   */
  uncounted<T>(work: () => T): T {
    const start = this.#clock.monotonic();
    try {
      return work();
    } finally {
      const spent = this.#clock.monotonic() - start;
      if (this.#since !== undefined && spent > 0) {
        this.#since += spent;
        this.#arm();
      }
    }
  }

  #arm(): void {
    this.#timer?.cancel();
    const left = this.#allowedMs - this.#charged();
    this.#timer = this.#clock.setTimer(Math.max(0, left), () => {
      this.#timer = undefined;
      if (this.#allowedMs - this.#charged() <= 0) this.#expire(this.#allowedMs);
      else this.#arm();
    });
  }
}

/** The reads of one restore: through the limiter, bounded, resent, charged to its budget. */
class ReadSession {
  readonly signal: AbortSignal;
  readonly #bucket: Bucket;
  readonly #clock: Clock;
  readonly #limiter: ReadLimiter;
  readonly #controller = new AbortController();
  readonly #budget: ReadBudget;
  // Bytes of this restore's reads holding limiter places.
  #ownBytes = 0;

  constructor(bucket: Bucket, clock: Clock, limiter: ReadLimiter, parent?: AbortSignal) {
    this.#bucket = bucket;
    this.#clock = clock;
    this.#limiter = limiter;
    this.signal = parent
      ? AbortSignal.any([this.#controller.signal, parent])
      : this.#controller.signal;
    this.#budget = new ReadBudget(clock, (ms) => {
      this.#controller.abort(
        new RestoreUnavailable(`the restore's reads took more than their ${ms} ms`),
      );
    });
  }

  /** Adds the allowance of reading `objects` to the restore's time. */
  allow(objects: readonly HistoryObject[]): void {
    this.#budget.allow(objects);
  }

  /** Runs `work` on the local disk without charging its time to the reads. */
  uncounted<T>(work: () => T): T {
    return this.#budget.uncounted(work);
  }

  /** Ends the session: outstanding reads are abandoned, the deadline stops. */
  close(): void {
    this.#budget.close();
    this.#controller.abort(new RestoreUnavailable("the restore ended"));
  }

  /**
   * Reads `objects` with up to {@linkcode RESTORE_READS_IN_FLIGHT} ahead,
   * yielding them in order; `onRead` hears of each as it arrives.
   */
  async *readInOrder(
    objects: readonly HistoryObject[],
    onRead: (body: Uint8Array) => void,
  ): AsyncGenerator<Uint8Array> {
    const window = new AbortController();
    const signal = AbortSignal.any([this.signal, window.signal]);
    const pending: Promise<Uint8Array>[] = [];
    let next = 0;
    const start = () => {
      const read = this.read(objects[next++], signal);
      // Awaited in order later; a failure meanwhile must not count as unhandled.
      read.then(onRead, () => {});
      pending.push(read);
    };
    try {
      while (next < objects.length && pending.length < RESTORE_READS_IN_FLIGHT) start();
      while (pending.length > 0) {
        yield await pending.shift()!;
        if (next < objects.length) start();
      }
    } finally {
      window.abort(new RestoreUnavailable("reads no longer needed"));
    }
  }

  /** Reads one object: up to {@linkcode RESTORE_READ_TRIES} tries. */
  async read(object: HistoryObject, signal: AbortSignal = this.signal): Promise<Uint8Array> {
    this.#budget.enter();
    try {
      let lastError: unknown;
      for (let attempt = 1; attempt <= RESTORE_READ_TRIES; attempt++) {
        const outcome = await this.#try(object, attempt, signal);
        if (outcome.body) return outcome.body;
        lastError = outcome.error;
        if (attempt < RESTORE_READ_TRIES && outcome.refused) {
          await this.#pause(RESTORE_RETRY_PAUSES_MS[attempt - 1], signal);
        }
      }
      throw new RestoreUnavailable(
        `GET ${object.key}: no answer in ${RESTORE_READ_TRIES} tries`,
        { cause: lastError },
      );
    } finally {
      this.#budget.leave();
    }
  }

  async #try(
    object: HistoryObject,
    attempt: number,
    signal: AbortSignal,
  ): Promise<{ body?: Uint8Array; error?: unknown; refused?: boolean }> {
    const permit = await this.#limiter.acquire(object.size, signal);
    this.#ownBytes += permit.bytes;
    const ownMs = readLimitMs(this.#ownBytes);
    const grantedMs = readLimitMs(this.#limiter.bytes);
    let charging = true;
    this.#budget.startCharging();
    const stopCharging = () => {
      if (!charging) return;
      charging = false;
      this.#budget.stopCharging();
    };
    // Past its own restore's share, a read runs on time other restores' megabytes added.
    const lent = grantedMs > ownMs ? this.#clock.setTimer(ownMs, stopCharging) : undefined;
    const limit = deadline(this.#clock, grantedMs, `GET ${object.key} (try ${attempt})`, signal);
    try {
      const got = await this.#bucket.get(object.key, { signal: limit.signal });
      if (!got) {
        throw new RestoreUnavailable(`${object.key} is gone: the history changed while read`);
      }
      return { body: got.body };
    } catch (e) {
      signal.throwIfAborted();
      if (e instanceof DeadlineExceeded) return { error: e, refused: false };
      if (e instanceof BucketUnavailable) return { error: e, refused: true };
      if (e instanceof BucketRequestError) throw unavailable(e, `GET ${object.key}`);
      throw e;
    } finally {
      limit.done();
      lent?.cancel();
      stopCharging();
      this.#ownBytes -= permit.bytes;
      permit.release();
    }
  }

  // A pause gives the limiter place up; it is charged, as it is not a wait for a place.
  async #pause(ms: number, signal: AbortSignal): Promise<void> {
    this.#budget.startCharging();
    try {
      await this.#clock.sleep(ms, signal);
    } finally {
      this.#budget.stopCharging();
    }
  }
}

function isBucketError(e: unknown): boolean {
  return e instanceof BucketUnavailable || e instanceof BucketRequestError ||
    e instanceof DeadlineExceeded;
}

function unavailable(e: unknown, what: string): unknown {
  if (!isBucketError(e)) return e;
  return new RestoreUnavailable(`${what}: ${(e as Error).message}`, { cause: e });
}

function hex(n: bigint | undefined): string {
  return n === undefined ? "none" : n.toString(16).padStart(16, "0");
}
