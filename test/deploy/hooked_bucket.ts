/**
 * A bucket that passes every call to another one and lets a test count
 * calls, fail them, or act in the middle of them (a concurrent deploy).
 *
 * @module
 */

import type { Bucket } from "../../src/bucket/bucket.ts";
import { type BucketCall, BucketView } from "../../src/bucket/bucket_view.ts";

/** A call as the hooks see it. */
export interface Call {
  method: "get" | "head" | "put" | "delete" | "list";
  key: string;
}

/**
 * Wraps `inner`; `before` runs before each call reaches it (throw to fail
 * the call, await to hold it).
 *
 * @example
 * ```ts
 * import { HookedBucket } from "./hooked_bucket.ts";
 * import { MemoryBucket } from "../../src/bucket/memory.ts";
 * const bucket = new HookedBucket(new MemoryBucket());
 * await bucket.put("k", new Uint8Array([1]));
 * bucket.calls.length; // 1
 * ```
 */
export class HookedBucket extends BucketView {
  /** Every call so far, in order. */
  readonly calls: Call[] = [];
  /** Runs before each call reaches the inner bucket. */
  before: (call: Call) => void | Promise<void> = () => {};

  protected override async beforeCall({ op, key }: BucketCall): Promise<void> {
    this.calls.push({ method: op, key });
    await this.before({ method: op, key });
  }

  /** The keys written with `put`. */
  puts(): string[] {
    return this.calls.filter((c) => c.method === "put").map((c) => c.key);
  }
}

/**
 * Every object of `bucket` with its bytes, for comparing a bucket before
 * and after.
 *
 * @example
 * ```ts ignore
 * assert.deepEqual(await snapshot(bucket), before);
 * ```
 */
export async function snapshot(bucket: Bucket): Promise<Map<string, string>> {
  const all = new Map<string, string>();
  let continuationToken: string | undefined;
  do {
    const page = await bucket.list("", { continuationToken });
    for (const object of page.objects) {
      const stored = await bucket.get(object.key);
      all.set(object.key, stored ? Array.from(stored.body).join(",") : "(gone)");
    }
    continuationToken = page.continuationToken;
  } while (continuationToken !== undefined);
  return all;
}
