/**
 * The object store the nodes share: one {@linkcode Bucket} interface, the S3,
 * file and memory stores, the upload bounds and the start-up probe.
 *
 * @example
 * ```ts
 * import { openBucket, probeBucket } from "./mod.ts";
 * import { systemClock, systemRandom } from "../time/clock.ts";
 * const bucket = openBucket("file:///tmp/wasmkeep-bucket");
 * const result = await probeBucket(bucket, { clock: systemClock, random: systemRandom });
 * await bucket.close();
 * ```
 *
 * @module
 */

export type { Clock, Random, Timer } from "../time/clock.ts";
export * from "./bucket.ts";
export * from "./bounds.ts";
export * from "./keys.ts";
export { FileBucket, type FileBucketOptions } from "./file.ts";
export { LOCK_POLL_MS, LOCK_STALE_MS, LOCK_WAIT_MS } from "./file_lock.ts";
export { FILE_TEMP_MAX_AGE_MS, removeFileLeftovers } from "./file_leftovers.ts";
export {
  MemoryBucket,
  type MemoryBucketOptions,
  type MemoryFaults,
  type TimeWindow,
} from "./memory.ts";
export { S3Bucket, type S3BucketOptions } from "./s3.ts";
export {
  type Env,
  parseS3Url,
  type S3Location,
  type S3Settings,
  s3SettingsFromEnv,
} from "./s3_config.ts";
export { openBucket, type OpenBucketOptions } from "./open.ts";
export {
  type BucketCall,
  type BucketHooks,
  type BucketOutcome,
  BucketView,
} from "./bucket_view.ts";
export {
  type UploadBounds,
  uploadBounds,
  type UploadOptions,
  uploadWithAttempts,
} from "./upload.ts";
export {
  CREATE_IGNORED,
  PROBE_RETRY_BASE_MS,
  PROBE_RETRY_MAX_MS,
  probeBucket,
  type ProbeOptions,
  type ProbeResult,
  REPLACE_IGNORED,
} from "./probe.ts";
export { randomHex, seededRandom } from "./random.ts";
