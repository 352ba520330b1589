/**
 * From a `--bucket` URL to a {@linkcode Bucket}: `s3://BUCKET[/PREFIX]` for an
 * S3-compatible store, `file://PATH` for the embedded local one.
 *
 * @module
 */

import { type Clock, type Random, systemClock, systemRandom } from "../time/clock.ts";
import type { Bucket } from "./bucket.ts";
import { FileBucket, requireFileBucketFolder } from "./file.ts";
import { S3Bucket } from "./s3.ts";
import type { Env } from "./s3_config.ts";

/** What opening a bucket may need besides its URL. */
export interface OpenBucketOptions {
  /** The `AWS_*` variables for `s3://`; default the process's environment. */
  env?: Env;
  /** Times every wait; default the system clock. */
  clock?: Clock;
  /** Jitters backoffs and names temp files; default the system's random source. */
  random?: Random;
  /**
   * `file://` only: the folder must exist (`FileBucketMissing` otherwise),
   * for commands that read a cluster's bucket rather than make one.
   */
  existing?: boolean;
}

/**
 * Opens the bucket a URL names. `file://PATH` takes the rest of the URL as a
 * path, relative (`file://.wasmkeep/bucket`) or absolute (`file:///srv/b`).
 *
 * @example
 * ```ts
 * import { openBucket } from "./open.ts";
 * const bucket = openBucket("file:///tmp/wasmkeep-bucket");
 * await bucket.close();
 * ```
 */
export function openBucket(url: string, options: OpenBucketOptions = {}): Bucket {
  const clock = options.clock ?? systemClock;
  const random = options.random ?? systemRandom;
  if (url.startsWith("s3://")) {
    return S3Bucket.fromUrl(url, options.env ?? Deno.env.toObject(), { clock, random });
  }
  if (url.startsWith("file://")) {
    const path = url.slice("file://".length);
    if (path === "") throw new TypeError(`no path in bucket URL ${url} (file://PATH)`);
    if (options.existing) requireFileBucketFolder(path);
    return new FileBucket(path, { clock, random });
  }
  throw new TypeError(
    `unsupported bucket URL ${JSON.stringify(url)}: use s3://BUCKET[/PREFIX] or file://PATH`,
  );
}
