/**
 * The start-up probe: before a node writes or takes anything, it proves that
 * the bucket refuses the two writes that would let two nodes own one actor.
 * On a throwaway object under `probe/`, a create over an existing object
 * (`If-None-Match: *`) and a replace with a stale ETag (`If-Match`) must both
 * be refused.
 *
 * @module
 */

import type { Clock, Random } from "../time/clock.ts";
import { describeError } from "../describe_error.ts";
import type { Bucket } from "./bucket.ts";
import { BucketRequestError, BucketUnavailable, PreconditionFailed } from "./errors.ts";
import { probeKey } from "./keys.ts";
import { randomHex } from "./random.ts";

/**
 * First pause before probing again a bucket that does not answer yet (500 ms);
 * it doubles up to {@linkcode PROBE_RETRY_MAX_MS}, with jitter.
 *
 * @example
 * ```ts
 * import { PROBE_RETRY_BASE_MS } from "./probe.ts";
 * console.log(PROBE_RETRY_BASE_MS); // 500
 * ```
 */
export const PROBE_RETRY_BASE_MS = 500;

/**
 * Longest pause between two probes of a bucket that does not answer (10 s).
 *
 * @example
 * ```ts
 * import { PROBE_RETRY_MAX_MS } from "./probe.ts";
 * console.log(PROBE_RETRY_MAX_MS); // 10000
 * ```
 */
export const PROBE_RETRY_MAX_MS = 10_000;

/** The verdict: the bucket keeps conditions, or why it cannot be used. */
export type ProbeResult = { ok: true } | { ok: false; reason: string };

/** What the probe needs. */
export interface ProbeOptions {
  /** Times the pauses between tries. */
  clock: Clock;
  /** Names the throwaway object and jitters pauses. */
  random: Random;
  /** Told about each failed try and the verdict. */
  log?: (level: "info" | "warn", message: string) => void;
  /**
   * Stops retrying a bucket that does not answer or refuses the credentials:
   * the probe rejects with its reason.
   */
  signal?: AbortSignal;
}

/** Why a store that accepted the create over an existing object cannot be used. */
export const CREATE_IGNORED: string =
  "the bucket accepted a create over an existing object (If-None-Match: * ignored): " +
  "it cannot keep two nodes from owning one actor";

/** Why a store that accepted the replace with a stale ETag cannot be used. */
export const REPLACE_IGNORED: string =
  "the bucket accepted a replace with a stale ETag (If-Match ignored): " +
  "it cannot keep two nodes from owning one actor";

/**
 * Probes `bucket` until it answers, then tells whether it keeps conditional
 * writes. A bucket that does not answer (network error, 5xx) or refuses the
 * credentials (403: a key not valid yet, a policy not applied yet) is tried
 * again with backoff until `signal` aborts; any other refusal (no such
 * bucket, conditions not implemented) is a verdict.
 *
 * @example Refusing to start on a store that ignores conditions
 * ```ts
 * import { probeBucket } from "./probe.ts";
 * import { MemoryBucket } from "./memory.ts";
 * import { systemClock, systemRandom } from "../time/clock.ts";
 * const result = await probeBucket(new MemoryBucket(), { clock: systemClock, random: systemRandom });
 * if (!result.ok) throw new Error(result.reason);
 * ```
 */
export async function probeBucket(bucket: Bucket, options: ProbeOptions): Promise<ProbeResult> {
  const { clock, random, log, signal } = options;
  for (let attempt = 1;; attempt++) {
    signal?.throwIfAborted();
    const key = probeKey(randomHex(random, 12));
    let failure: BucketUnavailable | BucketRequestError;
    try {
      const result = await probeOnce(bucket, key, signal);
      log?.(
        result.ok ? "info" : "warn",
        result.ok
          ? "the bucket refuses conflicting conditional writes"
          : `the bucket cannot be used: ${result.reason}`,
      );
      return result;
    } catch (e) {
      if (!(e instanceof BucketUnavailable) && !refusesCredentials(e)) throw e;
      failure = e;
    } finally {
      await bucket.delete(key, { signal }).catch((e) => {
        log?.("warn", `could not remove the probe object ${key}: ${describeError(e)}`);
      });
    }
    const pause = Math.min(PROBE_RETRY_MAX_MS, PROBE_RETRY_BASE_MS * 2 ** (attempt - 1)) *
      (0.5 + random.next() / 2);
    const why = failure instanceof BucketUnavailable
      ? "the bucket does not answer yet"
      : "the bucket refused this node's credentials";
    log?.("warn", `${why} (${failure.message}); probing again in ${Math.round(pause)} ms`);
    await clock.sleep(pause, signal);
  }
}

/**
 * A 403 (AccessDenied, InvalidAccessKeyId, SignatureDoesNotMatch): the
 * credentials, not the bucket, and they may be fixed while the node waits.
 */
function refusesCredentials(e: unknown): e is BucketRequestError {
  return e instanceof BucketRequestError && e.status === 403;
}

async function probeOnce(bucket: Bucket, key: string, signal?: AbortSignal): Promise<ProbeResult> {
  const bytes = (text: string) => new TextEncoder().encode(`${text} ${key}`);
  try {
    const first = await bucket.put(key, bytes("first"), { ifNoneMatch: "*", signal });
    if (!(await refused(() => bucket.put(key, bytes("second"), { ifNoneMatch: "*", signal })))) {
      return { ok: false, reason: CREATE_IGNORED };
    }
    await bucket.put(key, bytes("third"), { ifMatch: first.etag, signal });
    if (!(await refused(() => bucket.put(key, bytes("fourth"), { ifMatch: first.etag, signal })))) {
      return { ok: false, reason: REPLACE_IGNORED };
    }
    return { ok: true };
  } catch (e) {
    if (e instanceof PreconditionFailed && e.maybeOwnWrite) throw inconclusive(e);
    if (refusesCredentials(e)) throw e;
    if (e instanceof BucketRequestError || e instanceof PreconditionFailed) {
      return {
        ok: false,
        reason: `the bucket refused a conditional write the cluster needs: ${e.message}`,
      };
    }
    throw e;
  }
}

/** True when the write is refused its condition; other failures propagate. */
async function refused(write: () => Promise<unknown>): Promise<boolean> {
  try {
    await write();
    return false;
  } catch (e) {
    if (e instanceof PreconditionFailed && e.maybeOwnWrite) throw inconclusive(e);
    if (e instanceof PreconditionFailed) return true;
    throw e;
  }
}

/**
 * A refusal that may have been of the probe's own write (a try answered 5xx
 * was resent): it tells nothing of the bucket, so it is probed again.
 */
function inconclusive(e: PreconditionFailed): BucketUnavailable {
  return new BucketUnavailable(
    `a write's answer was lost and its resend refused: ${e.message}`,
    { ambiguous: true, cause: e },
  );
}
