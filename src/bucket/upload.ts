/**
 * An upload the bucket leaves unanswered is given up and sent again, within
 * the bounds of the spec's "Replication" section: an attempt after 5 s plus a
 * second per megabyte (the next one after twice that), three attempts at
 * most, the whole upload within 20 s plus that second per megabyte.
 *
 * @module
 */

import type { Clock } from "../time/clock.ts";
import type { Bucket, PutOptions } from "./bucket.ts";
import {
  BYTES_PER_MB,
  UPLOAD_ATTEMPT_BASE_MS,
  UPLOAD_MAX_ATTEMPTS,
  UPLOAD_MS_PER_MB,
  UPLOAD_TOTAL_BASE_MS,
} from "./bounds.ts";
import { BucketRequestError, BucketUnavailable, PreconditionFailed } from "./errors.ts";
import { deadline, DeadlineExceeded } from "./timers.ts";

/** Conditions of the upload, and how many attempts it gets. */
export interface UploadOptions extends PutOptions {
  /** Attempts at most; default {@linkcode UPLOAD_MAX_ATTEMPTS} (a periodic snapshot gets 1). */
  maxAttempts?: number;
  /** Caps each attempt's time (a periodic snapshot's 10 s). */
  maxAttemptMs?: number;
  /**
   * Called right before each attempt's put, in the same turn: throwing stops
   * the upload with that error (an ownership take whose node's lease ran out
   * while it waited must not write).
   */
  beforeAttempt?: () => void;
}

/** The time limits of uploading `size` bytes. */
export interface UploadBounds {
  /** The first attempt's time; each next one gets twice the one before. */
  firstAttemptMs: number;
  /** All attempts together. */
  totalMs: number;
}

/**
 * The limits for a body of `size` bytes: every started megabyte adds
 * {@linkcode UPLOAD_MS_PER_MB} to both.
 *
 * @example
 * ```ts
 * import { uploadBounds } from "./upload.ts";
 * uploadBounds(500_000); // { firstAttemptMs: 6000, totalMs: 21000 }
 * ```
 */
export function uploadBounds(size: number): UploadBounds {
  const perMb = Math.ceil(size / BYTES_PER_MB) * UPLOAD_MS_PER_MB;
  return { firstAttemptMs: UPLOAD_ATTEMPT_BASE_MS + perMb, totalMs: UPLOAD_TOTAL_BASE_MS + perMb };
}

/**
 * Uploads `body` to `key` in bounded attempts. Each attempt is one
 * `bucket.put`, which resends within itself after error answers. An attempt
 * that fails without a verdict (no answer, a 5xx after the client's resends)
 * is followed by the next while time remains.
 *
 * When an attempt may have landed and a later one is then refused its
 * condition, the object is read back: if it holds exactly `body`, the upload
 * counts as done (the refusal was against our own write).
 *
 * Throws `PreconditionFailed` on a refused condition, `BucketRequestError` on
 * a request the store refuses for good, and `BucketUnavailable` (ambiguous:
 * it may have landed) when no attempt was acknowledged in time.
 *
 * @example Writing an LTX file once
 * ```ts
 * import { uploadWithAttempts } from "./upload.ts";
 * import { MemoryBucket } from "./memory.ts";
 * import { systemClock } from "../time/clock.ts";
 * const bucket = new MemoryBucket();
 * const body = new Uint8Array(1024);
 * await uploadWithAttempts(bucket, "actors/t/c/n/wal/1", body, { ifNoneMatch: "*" }, systemClock);
 * ```
 */
export async function uploadWithAttempts(
  bucket: Bucket,
  key: string,
  body: Uint8Array,
  options: UploadOptions,
  clock: Clock,
): Promise<{ etag: string }> {
  const {
    maxAttempts = UPLOAD_MAX_ATTEMPTS,
    maxAttemptMs = Infinity,
    beforeAttempt,
    signal,
    ...conditions
  } = options;
  const bounds = uploadBounds(body.length);
  const startedAt = clock.monotonic();
  let mayHaveLanded = false;
  let lastError: unknown;
  for (let attempt = 1; attempt <= maxAttempts; attempt++) {
    const remaining = bounds.totalMs - (clock.monotonic() - startedAt);
    if (remaining <= 0) break;
    const attemptMs = Math.min(bounds.firstAttemptMs * 2 ** (attempt - 1), maxAttemptMs, remaining);
    const limit = deadline(clock, attemptMs, `upload ${key} (attempt ${attempt})`, signal);
    try {
      beforeAttempt?.();
      return await bucket.put(key, body, { ...conditions, signal: limit.signal });
    } catch (e) {
      signal?.throwIfAborted();
      if (e instanceof PreconditionFailed) {
        if (mayHaveLanded || e.maybeOwnWrite) {
          return await readBack(bucket, key, body, e, clock, signal);
        }
        throw e;
      }
      if (e instanceof BucketRequestError) throw e;
      if (!(e instanceof BucketUnavailable) && !(e instanceof DeadlineExceeded)) throw e;
      mayHaveLanded ||= e instanceof DeadlineExceeded || e.ambiguous;
      lastError = e;
    } finally {
      limit.done();
    }
  }
  throw new BucketUnavailable(
    `upload of ${key} (${body.length} bytes) not acknowledged within its bounds (${bounds.totalMs} ms, ${maxAttempts} attempts at most)`,
    { ambiguous: mayHaveLanded, cause: lastError },
  );
}

/** Our own earlier attempt may be what the condition ran into: compare bytes. */
async function readBack(
  bucket: Bucket,
  key: string,
  body: Uint8Array,
  refusal: PreconditionFailed,
  clock: Clock,
  signal?: AbortSignal,
): Promise<{ etag: string }> {
  const ms = uploadBounds(body.length).firstAttemptMs;
  const limit = deadline(clock, ms, `read back ${key}`, signal);
  try {
    const current = await bucket.get(key, { signal: limit.signal });
    if (current && equalBytes(current.body, body)) return { etag: current.etag };
  } finally {
    limit.done();
  }
  throw refusal;
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
