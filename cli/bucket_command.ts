/**
 * What the commands that read and write a cluster's bucket alone (`cluster`
 * and `actor`) share: where they print, the `--bucket` flag, opening the
 * bucket (never making it) and the messages for one that cannot be opened.
 *
 * @module
 */

import { type FlagSpec, UsageError } from "./args.ts";
import { openBucket, type OpenBucketOptions } from "../src/bucket/open.ts";
import type { Bucket } from "../src/bucket/bucket.ts";
import { S3ConfigError } from "../src/bucket/s3_config.ts";
import { FileBucketMissing } from "../src/bucket/file.ts";
import { isNodeId } from "../src/node_id.ts";

/** Where the bucket commands print, and the clock they judge ages by (tests replace them). */
export interface ClusterIo {
  /** Prints a line (or lines) of the command's output. */
  stdout(text: string): void;
  /** Prints an error. */
  stderr(text: string): void;
  /** This machine's clock, ms since the epoch; default `Date.now`. */
  now?: () => number;
  /** The `AWS_*` variables for `s3://`; default the process's environment. */
  env?: Record<string, string>;
}

/**
 * The process's stdout and stderr.
 *
 * @example
 * ```ts
 * import { consoleIo } from "./bucket_command.ts";
 * consoleIo.stdout("printed");
 * ```
 */
export const consoleIo: ClusterIo = {
  stdout: (text) => console.log(text),
  stderr: (text) => console.error(text),
};

/**
 * `--bucket URL`, as every bucket command takes it.
 *
 * @example
 * ```ts
 * import { BUCKET_FLAG } from "./bucket_command.ts";
 * BUCKET_FLAG.name; // "bucket"
 * ```
 */
export const BUCKET_FLAG: FlagSpec = {
  name: "bucket",
  kind: "string",
  value: "URL",
  description:
    "the cluster's bucket: s3://BUCKET[/PREFIX] (with the AWS_* variables) or file://PATH",
};

/**
 * `-h, --help`.
 *
 * @example
 * ```ts
 * import { HELP_FLAG } from "./bucket_command.ts";
 * HELP_FLAG.short; // "h"
 * ```
 */
export const HELP_FLAG: FlagSpec = {
  name: "help",
  short: "h",
  kind: "boolean",
  description: "show this help",
};

/**
 * The `--bucket` value of `command`, checked; throws {@linkcode UsageError}.
 *
 * @example
 * ```ts
 * import { bucketUrl } from "./bucket_command.ts";
 * bucketUrl({ bucket: "file:///tmp/b" }, "cluster status"); // "file:///tmp/b"
 * ```
 */
export function bucketUrl(flags: Record<string, unknown>, command: string): string {
  const url = flags.bucket as string | undefined;
  if (url === undefined) {
    throw new UsageError(
      `${command} needs --bucket URL (s3://BUCKET[/PREFIX] or file://PATH)`,
    );
  }
  if (!/^(s3|file):\/\/./.test(url)) {
    throw new UsageError(`--bucket must be s3://BUCKET[/PREFIX] or file://PATH, not '${url}'`);
  }
  return url;
}

/**
 * A node id given to `command` (`--to NODE`, a positional), checked; throws
 * {@linkcode UsageError}.
 *
 * @example
 * ```ts
 * import { nodeIdArgument } from "./bucket_command.ts";
 * nodeIdArgument("node-b", "cluster drain"); // "node-b"
 * ```
 */
export function nodeIdArgument(node: string, command: string): string {
  if (!isNodeId(node)) {
    throw new UsageError(
      `${command}: '${node}' is not a node id (lower-case letters, digits and '-', at most 63)`,
    );
  }
  return node;
}

/**
 * The line for a bucket that cannot be opened: `AWS_*` variables as serve
 * says it, or a `file://` folder that is not there.
 *
 * @example
 * ```ts
 * import { cannotOpen } from "./bucket_command.ts";
 * cannotOpen("file:///tmp/b", new Error("boom")); // undefined: not an opening error
 * ```
 */
export function cannotOpen(url: string, error: unknown): string | undefined {
  if (error instanceof FileBucketMissing) return `wasmkeep: --bucket ${url}: ${error.message}`;
  if (error instanceof S3ConfigError) {
    return `wasmkeep: cannot open the bucket ${url}: ${error.message}`;
  }
  return undefined;
}

/**
 * How a cluster's bucket is opened: read, never made (a `file://` folder
 * that is not there is a typo).
 *
 * @example
 * ```ts
 * import { consoleIo, openOptions } from "./bucket_command.ts";
 * openOptions(consoleIo).existing; // true
 * ```
 */
export function openOptions(io: ClusterIo): OpenBucketOptions {
  return io.env ? { env: io.env, existing: true } : { existing: true };
}

/**
 * Runs `work` on the bucket at `url`, closed after it.
 *
 * @example
 * ```ts
 * import { consoleIo, withBucket } from "./bucket_command.ts";
 * await withBucket("file:///tmp/b", consoleIo, (bucket) => bucket.head("nodes/a"));
 * ```
 */
export async function withBucket<T>(
  url: string,
  io: ClusterIo,
  work: (bucket: Bucket) => Promise<T>,
): Promise<T> {
  const bucket = openBucket(url, openOptions(io));
  try {
    return await work(bucket);
  } finally {
    await bucket.close();
  }
}
