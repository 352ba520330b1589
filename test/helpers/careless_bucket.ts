/**
 * A store that ignores conditional writes, as some S3-compatible stores do:
 * what the start-up probe must refuse to run on.
 *
 * @module
 */

import { BucketView } from "../../src/bucket/bucket_view.ts";
import { MemoryBucket } from "../../src/bucket/memory.ts";

/** Which conditions the careless store ignores. */
export interface CarelessOptions {
  /** Accept a create over an existing object; default true. */
  ignoreIfNoneMatch?: boolean;
  /** Accept a replace with a stale ETag; default true. */
  ignoreIfMatch?: boolean;
}

/**
 * A {@linkcode Bucket} in memory that drops the conditions it is told to.
 *
 * @example
 * ```ts
 * import { CarelessBucket } from "./careless_bucket.ts";
 * const bucket = new CarelessBucket({ ignoreIfMatch: false });
 * await bucket.put("k", new Uint8Array([1]), { ifNoneMatch: "*" });
 * await bucket.put("k", new Uint8Array([2]), { ifNoneMatch: "*" }); // accepted
 * ```
 */
export class CarelessBucket extends BucketView {
  /** A careless store, ignoring both conditions unless told otherwise. */
  constructor(options: CarelessOptions = {}) {
    const ignoreIfNoneMatch = options.ignoreIfNoneMatch ?? true;
    const ignoreIfMatch = options.ignoreIfMatch ?? true;
    super(new MemoryBucket(), {
      before: (call) => {
        if (call.op !== "put" && call.op !== "delete") return;
        const { signal, ifMatch } = call.options ?? {};
        const ifNoneMatch = call.op === "put" ? call.options?.ifNoneMatch : undefined;
        return {
          ...call,
          options: {
            signal,
            ifNoneMatch: ignoreIfNoneMatch ? undefined : ifNoneMatch,
            ifMatch: ignoreIfMatch ? undefined : ifMatch,
          },
        };
      },
    });
  }
}
