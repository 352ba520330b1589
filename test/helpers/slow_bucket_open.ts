/**
 * Stands in for `src/bucket/open.ts` in an executor process started with
 * {@linkcode slowBucketExecutorCommand}: a file bucket whose writes first
 * wait the milliseconds written in the file named by
 * `WASMKEEP_TEST_SLOW_PUT_FILE` (none while it is missing or empty), so a
 * test can hold an actor's uploads, and with them its drop, for as long as
 * it needs.
 *
 * @module
 */

import type { Bucket } from "../../src/bucket/bucket.ts";
import { FileBucket } from "../../src/bucket/file.ts";
import { BucketView } from "../../src/bucket/bucket_view.ts";
import type { OpenBucketOptions } from "../../src/bucket/open.ts";
import { bucketOpenImportMap } from "./bucket_open_map.ts";

/** The variable naming the file that holds the delay of each write, in ms. */
export const SLOW_PUT_FILE_VARIABLE = "WASMKEEP_TEST_SLOW_PUT_FILE";

/** A `file://` bucket whose writes wait the delay the file says. */
export function openBucket(url: string, options: OpenBucketOptions = {}): Bucket {
  return new BucketView(new FileBucket(url.slice("file://".length), options), {
    before: (call) => {
      const delayMs = call.op === "put" ? Number(readDelay() || 0) : 0;
      if (delayMs > 0) return new Promise<void>((resolve) => setTimeout(resolve, delayMs));
    },
  });
}

function readDelay(): string {
  try {
    return Deno.readTextFileSync(Deno.env.get(SLOW_PUT_FILE_VARIABLE)!);
  } catch {
    return "";
  }
}

/**
 * The pool's `command` for executors that open their bucket with this
 * module: an import map sends `src/bucket/open.ts` here. Writes the map into
 * `dir`.
 */
export function slowBucketExecutorCommand(
  dir: string,
): (socketPath: string) => { program: string; args: string[] } {
  const map = bucketOpenImportMap(dir, "import_map.json", import.meta.url);
  const module = new URL("../../src/executor/main.ts", import.meta.url).href;
  return (socketPath) => ({
    program: Deno.execPath(),
    args: ["run", "-A", "--no-prompt", `--import-map=${map}`, module, socketPath],
  });
}
