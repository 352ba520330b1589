/**
 * Stands in for `src/bucket/open.ts` in a node process started with
 * {@linkcode countingBucketArgs}: a file bucket that appends a line to the
 * file named by `WASMKEEP_TEST_OWNER_READS_FILE` for every read of an
 * ownership record, so a test counts them from the bucket's side.
 *
 * @module
 */

import type { Bucket } from "../../src/bucket/bucket.ts";
import { FileBucket } from "../../src/bucket/file.ts";
import { BucketView } from "../../src/bucket/bucket_view.ts";
import type { OpenBucketOptions } from "../../src/bucket/open.ts";
import { bucketOpenImportMap } from "./bucket_open_map.ts";
import { OWNERS_PREFIX } from "../../src/bucket/keys.ts";

/** The variable naming the file each ownership read appends a line to. */
export const OWNER_READS_FILE_VARIABLE = "WASMKEEP_TEST_OWNER_READS_FILE";

/** A `file://` bucket counting its reads of ownership records. */
export function openBucket(url: string, options: OpenBucketOptions = {}): Bucket {
  const file = Deno.env.get(OWNER_READS_FILE_VARIABLE);
  return new BucketView(new FileBucket(url.slice("file://".length), options), {
    before: ({ op, key }) => {
      if (file && op === "get" && key.startsWith(OWNERS_PREFIX)) {
        Deno.writeTextFileSync(file, `${key}\n`, { append: true });
      }
    },
  });
}

/** The `deno run` flags that make a node open its bucket with this module (the map goes in `dir`). */
export function countingBucketArgs(dir: string): string[] {
  const map = bucketOpenImportMap(dir, "counting_import_map.json", import.meta.url);
  return [`--import-map=${map}`];
}

/** Ownership reads counted in `file` so far. */
export function ownerReads(file: string): number {
  try {
    return Deno.readTextFileSync(file).split("\n").filter((line) => line !== "").length;
  } catch {
    return 0;
  }
}
