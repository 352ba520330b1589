/**
 * A bucket that passes every call to another one and lets a test count
 * calls, fail them, or act in the middle of them (a concurrent deploy).
 *
 * @module
 */

import type {
  Bucket,
  CallOptions,
  DeleteOptions,
  ListOptions,
  ListPage,
  ObjectInfo,
  PutOptions,
  StoredObject,
} from "../../src/bucket/bucket.ts";

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
export class HookedBucket implements Bucket {
  /** Every call so far, in order. */
  readonly calls: Call[] = [];
  /** Runs before each call reaches the inner bucket. */
  before: (call: Call) => void | Promise<void> = () => {};

  /** Wraps `inner`. */
  constructor(readonly inner: Bucket) {}

  async #arrive(call: Call): Promise<void> {
    this.calls.push(call);
    await this.before(call);
  }

  /** The keys written with `put`. */
  puts(): string[] {
    return this.calls.filter((c) => c.method === "put").map((c) => c.key);
  }

  /** Reads an object. */
  async get(key: string, options?: CallOptions): Promise<StoredObject | null> {
    await this.#arrive({ method: "get", key });
    return this.inner.get(key, options);
  }

  /** Reads an object's metadata. */
  async head(key: string, options?: CallOptions): Promise<ObjectInfo | null> {
    await this.#arrive({ method: "head", key });
    return this.inner.head(key, options);
  }

  /** Writes an object. */
  async put(key: string, body: Uint8Array, options?: PutOptions): Promise<{ etag: string }> {
    await this.#arrive({ method: "put", key });
    return this.inner.put(key, body, options);
  }

  /** Deletes an object. */
  async delete(key: string, options?: DeleteOptions): Promise<void> {
    await this.#arrive({ method: "delete", key });
    return this.inner.delete(key, options);
  }

  /** Lists a page. */
  async list(prefix: string, options?: ListOptions): Promise<ListPage> {
    await this.#arrive({ method: "list", key: prefix });
    return this.inner.list(prefix, options);
  }

  /** Closes the inner bucket. */
  close(): Promise<void> {
    return this.inner.close();
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
