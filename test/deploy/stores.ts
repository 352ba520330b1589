/**
 * The two local stores the deploy tests run on: the memory bucket and the
 * file bucket in a scratch directory.
 *
 * @module
 */

import type { Bucket } from "../../src/bucket/bucket.ts";
import { FileBucket } from "../../src/bucket/file.ts";
import { MemoryBucket } from "../../src/bucket/memory.ts";

/** A store under test and how to remove it. */
export interface Store {
  bucket: Bucket;
  done(): Promise<void>;
}

/** The stores by name: each call makes a fresh, empty one. */
export const STORES: [string, () => Promise<Store>][] = [
  ["memory", () => Promise.resolve({ bucket: new MemoryBucket(), done: () => Promise.resolve() })],
  ["file", async () => {
    const dir = await Deno.makeTempDir({ prefix: "wk-deploy-" });
    const bucket = new FileBucket(dir);
    return {
      bucket,
      done: async () => {
        await bucket.close();
        await Deno.remove(dir, { recursive: true });
      },
    };
  }],
];

/**
 * Runs `body` once on each store, as its own step.
 *
 * @example
 * ```ts ignore
 * Deno.test("x", (t) => onEachStore(t, async (bucket) => { ... }));
 * ```
 */
export async function onEachStore(
  t: Deno.TestContext,
  body: (bucket: Bucket) => Promise<void>,
): Promise<void> {
  for (const [name, make] of STORES) {
    await t.step(name, async () => {
      const store = await make();
      try {
        await body(store.bucket);
      } finally {
        await store.done();
      }
    });
  }
}
