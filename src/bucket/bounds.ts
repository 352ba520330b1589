/**
 * Every time and count that bounds a bucket call, named once. The spec's
 * "Replication" section fixes the upload and read bounds; the resend and
 * conflict bounds are ours.
 *
 * @module
 */

/**
 * Longest a single request to the store may last before it is abandoned
 * (30 s). An upload abandoned this way is not resent by the client.
 *
 * @example
 * ```ts
 * import { REQUEST_TIMEOUT_MS } from "./bounds.ts";
 * console.log(REQUEST_TIMEOUT_MS / 1000); // 30
 * ```
 */
export const REQUEST_TIMEOUT_MS = 30_000;

/**
 * A read (GET, HEAD, LIST) that hears nothing from the store for this long
 * (5 s) is abandoned and resent.
 *
 * @example
 * ```ts
 * import { READ_SILENCE_MS } from "./bounds.ts";
 * console.log(READ_SILENCE_MS); // 5000
 * ```
 */
export const READ_SILENCE_MS = 5_000;

/**
 * Tries of one request within one client call (the first included), when
 * the store answers 5xx, 429 or 408 or the request could not be sent.
 *
 * @example
 * ```ts
 * import { CLIENT_MAX_TRIES } from "./bounds.ts";
 * console.log(CLIENT_MAX_TRIES); // 3
 * ```
 */
export const CLIENT_MAX_TRIES = 3;

/**
 * Pause before the client's first resend (100 ms); each later one doubles it,
 * with full jitter, so nodes that failed together do not resend together.
 *
 * @example
 * ```ts
 * import { CLIENT_RETRY_BASE_MS } from "./bounds.ts";
 * console.log(CLIENT_RETRY_BASE_MS); // 100
 * ```
 */
export const CLIENT_RETRY_BASE_MS = 100;

/**
 * Tries of a conditional write that S3 answers with 409
 * ConditionalRequestConflict (a concurrent write to the same key was in
 * progress), the first included. S3's documentation says to retry it.
 *
 * @example
 * ```ts
 * import { CONFLICT_MAX_TRIES } from "./bounds.ts";
 * console.log(CONFLICT_MAX_TRIES); // 5
 * ```
 */
export const CONFLICT_MAX_TRIES = 5;

/**
 * Pause before resending after a 409 conflict (50 ms, doubling, with jitter):
 * short, since the conflicting write is already under way.
 *
 * @example
 * ```ts
 * import { CONFLICT_RETRY_MS } from "./bounds.ts";
 * console.log(CONFLICT_RETRY_MS); // 50
 * ```
 */
export const CONFLICT_RETRY_MS = 50;

/**
 * Bytes in the "megabyte" of the upload bounds: each started one adds a
 * second to an attempt (`"6 s under a megabyte"`).
 *
 * @example
 * ```ts
 * import { BYTES_PER_MB } from "./bounds.ts";
 * console.log(BYTES_PER_MB); // 1000000
 * ```
 */
export const BYTES_PER_MB = 1_000_000;

/**
 * An upload's first attempt is given up after this (5 s) plus
 * {@linkcode UPLOAD_MS_PER_MB} per megabyte; each next attempt gets twice
 * the time of the one before.
 *
 * @example
 * ```ts
 * import { UPLOAD_ATTEMPT_BASE_MS } from "./bounds.ts";
 * console.log(UPLOAD_ATTEMPT_BASE_MS); // 5000
 * ```
 */
export const UPLOAD_ATTEMPT_BASE_MS = 5_000;

/**
 * Time added per megabyte (1 s) to an upload attempt and to the whole upload.
 *
 * @example
 * ```ts
 * import { UPLOAD_MS_PER_MB } from "./bounds.ts";
 * console.log(UPLOAD_MS_PER_MB); // 1000
 * ```
 */
export const UPLOAD_MS_PER_MB = 1_000;

/**
 * Attempts of one upload at most (3).
 *
 * @example
 * ```ts
 * import { UPLOAD_MAX_ATTEMPTS } from "./bounds.ts";
 * console.log(UPLOAD_MAX_ATTEMPTS); // 3
 * ```
 */
export const UPLOAD_MAX_ATTEMPTS = 3;

/**
 * A whole upload, all attempts together, ends within this (20 s) plus
 * {@linkcode UPLOAD_MS_PER_MB} per megabyte.
 *
 * @example
 * ```ts
 * import { UPLOAD_TOTAL_BASE_MS } from "./bounds.ts";
 * console.log(UPLOAD_TOTAL_BASE_MS); // 20000
 * ```
 */
export const UPLOAD_TOTAL_BASE_MS = 20_000;
