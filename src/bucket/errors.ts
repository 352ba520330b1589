/**
 * The three ways a bucket call can fail, so callers decide by type, never by
 * parsing messages: a refused condition, a store that did not answer usefully
 * (try again later), and a request the store rejects for good.
 *
 * @module
 */

/**
 * A conditional write or delete the store refused: `If-None-Match: *` on a key
 * that exists, or `If-Match` with an ETag that is not the object's current one
 * (or on a key that does not exist).
 *
 * @example Telling a lost race from an outage
 * ```ts
 * import { PreconditionFailed } from "./errors.ts";
 * try {
 *   throw new PreconditionFailed("owners/t/c/n", "ifNoneMatch");
 * } catch (e) {
 *   if (e instanceof PreconditionFailed) console.log("another node owns it");
 * }
 * ```
 */
export class PreconditionFailed extends Error {
  /** Always `"PreconditionFailed"`, for logs and structured errors. */
  override name = "PreconditionFailed";
  /** The key the condition was about. */
  readonly key: string;
  /** Which condition was refused. */
  readonly condition: "ifNoneMatch" | "ifMatch";
  /**
   * True when an earlier try of the same call may have applied this very
   * write (its answer was lost, then the resend was refused), so the refusal
   * may be against our own object.
   */
  readonly maybeOwnWrite: boolean;

  /** Describes a refusal of `condition` on `key`. */
  constructor(
    key: string,
    condition: "ifNoneMatch" | "ifMatch",
    options: { maybeOwnWrite?: boolean; cause?: unknown } = {},
  ) {
    super(
      condition === "ifNoneMatch"
        ? `${key}: the object already exists (If-None-Match: * refused)`
        : `${key}: the object is not at the expected ETag (If-Match refused)`,
      { cause: options.cause },
    );
    this.key = key;
    this.condition = condition;
    this.maybeOwnWrite = options.maybeOwnWrite ?? false;
  }
}

/**
 * The store did not answer usefully: a 5xx, 429 or 408 after the client's own
 * resends, a request that timed out, a broken connection, an outage. Trying
 * again later may work.
 *
 * @example
 * ```ts
 * import { BucketUnavailable } from "./errors.ts";
 * const e = new BucketUnavailable("GET nodes/a: 503", { ambiguous: false, status: 503 });
 * console.log(e.ambiguous); // false: nothing was written
 * ```
 */
export class BucketUnavailable extends Error {
  /** Always `"BucketUnavailable"`, for logs and structured errors. */
  override name = "BucketUnavailable";
  /** True when a write may have been applied although no answer said so. */
  readonly ambiguous: boolean;
  /** The HTTP status the store answered with, if it answered at all. */
  readonly status?: number;

  /** Describes an unanswered or failed call. */
  constructor(
    message: string,
    options: { ambiguous: boolean; status?: number; cause?: unknown },
  ) {
    super(message, { cause: options.cause });
    this.ambiguous = options.ambiguous;
    this.status = options.status;
  }
}

/**
 * The store refused the request in a way a retry cannot fix: access denied,
 * a missing bucket, a malformed request, a feature it does not implement.
 *
 * @example
 * ```ts
 * import { BucketRequestError } from "./errors.ts";
 * const e = new BucketRequestError("PUT probe/x: 403 AccessDenied", { status: 403, code: "AccessDenied" });
 * console.log(e.code);
 * ```
 */
export class BucketRequestError extends Error {
  /** Always `"BucketRequestError"`, for logs and structured errors. */
  override name = "BucketRequestError";
  /** The HTTP status of the refusal. */
  readonly status?: number;
  /** The store's error code, e.g. `AccessDenied` or `NoSuchBucket`. */
  readonly code?: string;

  /** Describes a refusal a retry cannot fix. */
  constructor(message: string, options: { status?: number; code?: string; cause?: unknown } = {}) {
    super(message, { cause: options.cause });
    this.status = options.status;
    this.code = options.code;
  }
}
