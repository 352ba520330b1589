/**
 * The bucket reads of one restore, bounded as the spec's "Replication"
 * section says: a read gets 5 s plus a second per megabyte in flight in the
 * process's limiter before it is abandoned and sent again; a read refused
 * with an error a resend can get past is sent again half a second later,
 * then a second later; three tries. A listing page gets 5 s of silence and
 * the same tries. Up to eight objects are read ahead of the one in use, and
 * every read is charged to the restore's {@linkcode ReadBudget}.
 *
 * Apart from the walk (`restore.ts`) because these are the rules of talking
 * to a slow or refusing bucket, which the collection's listings share, while
 * the walk decides what to read and applies it.
 *
 * @module
 */

import type { Bucket, ListOptions, ListPage, ObjectInfo } from "../bucket/bucket.ts";
import { BYTES_PER_MB } from "../bucket/bounds.ts";
import { BucketRequestError, BucketUnavailable } from "../bucket/errors.ts";
import { deadline, DeadlineExceeded } from "../bucket/timers.ts";
import type { Clock } from "../time/clock.ts";
import type { HistoryObject } from "./history.ts";
import type { ReadLimiter } from "./read_limiter.ts";
import { ReadBudget } from "./restore_budget.ts";

/**
 * A listing page the bucket sends nothing of for this long (5 s) gives the listing up.
 *
 * @example
 * ```ts
 * import { RESTORE_LIST_SILENCE_MS } from "./restore_reads.ts";
 * console.log(RESTORE_LIST_SILENCE_MS); // 5000
 * ```
 */
export const RESTORE_LIST_SILENCE_MS = 5_000;

/**
 * A read's time before it is abandoned and sent again: this (5 s) plus the per-megabyte time.
 *
 * @example
 * ```ts
 * import { RESTORE_READ_BASE_MS } from "./restore_reads.ts";
 * console.log(RESTORE_READ_BASE_MS); // 5000
 * ```
 */
export const RESTORE_READ_BASE_MS = 5_000;

/**
 * Time a read gets per megabyte in flight in the limiter when it starts (1 s).
 *
 * @example
 * ```ts
 * import { RESTORE_READ_MS_PER_MB } from "./restore_reads.ts";
 * console.log(RESTORE_READ_MS_PER_MB); // 1000
 * ```
 */
export const RESTORE_READ_MS_PER_MB = 1_000;

/**
 * Tries of one read (or listing page), the first included.
 *
 * @example
 * ```ts
 * import { RESTORE_READ_TRIES } from "./restore_reads.ts";
 * console.log(RESTORE_READ_TRIES); // 3
 * ```
 */
export const RESTORE_READ_TRIES = 3;

/**
 * Pauses before resending a refused read: half a second, then a second.
 *
 * @example
 * ```ts
 * import { RESTORE_RETRY_PAUSES_MS } from "./restore_reads.ts";
 * console.log(RESTORE_RETRY_PAUSES_MS); // [500, 1000]
 * ```
 */
export const RESTORE_RETRY_PAUSES_MS: readonly number[] = Object.freeze([500, 1_000]);

/**
 * LTX files of one restore read ahead of the one being applied, that one included (eight).
 *
 * @example
 * ```ts
 * import { RESTORE_READS_IN_FLIGHT } from "./restore_reads.ts";
 * console.log(RESTORE_READS_IN_FLIGHT); // 8
 * ```
 */
export const RESTORE_READS_IN_FLIGHT = 8;

/**
 * The bucket did not answer within the restore's bounds, or refused it for
 * good. It maps to HTTP 503: the history may be fine, try again later.
 *
 * @example
 * ```ts
 * import { RestoreUnavailable } from "./restore_reads.ts";
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

/**
 * Every object under `prefix`, page by page. A page the bucket sends
 * nothing of for {@linkcode RESTORE_LIST_SILENCE_MS} gives the listing up; a
 * page refused with `BucketUnavailable` is asked again after the read pauses,
 * {@linkcode RESTORE_READ_TRIES} tries. Throws `BucketUnavailable` when given
 * up, or what the bucket threw for good.
 *
 * @example
 * ```ts
 * import { listObjects } from "./restore_reads.ts";
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
 * import { listPage } from "./restore_reads.ts";
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
 * import { readLimitMs } from "./restore_reads.ts";
 * readLimitMs(1_500_000); // 7000
 * ```
 */
export function readLimitMs(bytes: number): number {
  return RESTORE_READ_BASE_MS + Math.ceil(bytes / BYTES_PER_MB) * RESTORE_READ_MS_PER_MB;
}

/**
 * The reads of one restore: through the limiter, bounded, resent, charged to its budget.
 *
 * @example
 * ```ts
 * import { ReadSession } from "./restore_reads.ts";
 * import { ReadLimiter } from "./read_limiter.ts";
 * import { MemoryBucket } from "../bucket/memory.ts";
 * import { systemClock } from "../time/clock.ts";
 * const bucket = new MemoryBucket();
 * await bucket.put("actors/t/c/n/deleted", new Uint8Array(8));
 * const session = new ReadSession(bucket, systemClock, new ReadLimiter());
 * const object = { key: "actors/t/c/n/deleted", size: 8, lastModified: 0 };
 * try {
 *   session.allow([object]);
 *   (await session.read(object)).length; // 8
 * } finally {
 *   session.close();
 * }
 * ```
 */
export class ReadSession {
  /** Aborts the session's reads: at its end, when its time ran out, or with the parent signal. */
  readonly signal: AbortSignal;
  readonly #bucket: Bucket;
  readonly #clock: Clock;
  readonly #limiter: ReadLimiter;
  readonly #controller = new AbortController();
  readonly #budget: ReadBudget;
  // Bytes of this restore's reads holding limiter places.
  #ownBytes = 0;

  /** Reads from `bucket` through `limiter`, timed on `clock`, abandoned too when `parent` aborts. */
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

/**
 * Whether `e` is the bucket not answering or refusing: what a restore
 * reports as {@linkcode RestoreUnavailable}.
 *
 * @example
 * ```ts
 * import { isBucketError } from "./restore_reads.ts";
 * import { BucketUnavailable } from "../bucket/errors.ts";
 * isBucketError(new BucketUnavailable("no answer", { ambiguous: false })); // true
 * isBucketError(new Error("a bug")); // false
 * ```
 */
export function isBucketError(e: unknown): boolean {
  return e instanceof BucketUnavailable || e instanceof BucketRequestError ||
    e instanceof DeadlineExceeded;
}

/**
 * `e` as a {@linkcode RestoreUnavailable} naming `what` was being read, when
 * it is a bucket error ({@linkcode isBucketError}); anything else as it is.
 *
 * @example
 * ```ts
 * import { unavailable } from "./restore_reads.ts";
 * import { BucketUnavailable } from "../bucket/errors.ts";
 * const e = unavailable(new BucketUnavailable("no answer", { ambiguous: false }), "GET a");
 * (e as Error).message; // "GET a: no answer"
 * ```
 */
export function unavailable(e: unknown, what: string): unknown {
  if (!isBucketError(e)) return e;
  return new RestoreUnavailable(`${what}: ${(e as Error).message}`, { cause: e });
}
