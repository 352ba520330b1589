/**
 * The node's cache of transpiled components stays bounded: the components
 * served and the spare ones most recently used are kept, the rest and the
 * writes a crash left are deleted; a cached load counts as a use.
 */

import assert from "node:assert/strict";
import {
  cachedComponent,
  componentFromBytes,
  pruneComponentCache,
} from "../../src/actors/component.ts";
import { COUNTER_WASM } from "../../src/testing/node_process.ts";

const HOUR_MS = 3_600_000;

async function entries(dir: string): Promise<string[]> {
  const names: string[] = [];
  for await (const entry of Deno.readDir(dir)) names.push(entry.name);
  return names.sort();
}

/** A cache holding the counter, transpiled: its directory and the counter's entry. */
async function cacheWithCounter() {
  const dir = await Deno.makeTempDir({ prefix: "wk-component-cache-" });
  const bytes = await Deno.readFile(COUNTER_WASM);
  return { dir, counter: await componentFromBytes("counter", COUNTER_WASM, bytes, dir) };
}

Deno.test("component cache: the served and the most recently used spare entries stay, older ones and a crash's half-written entry go", async () => {
  const { dir, counter } = await cacheWithCounter();
  try {
    const now = Date.now();
    // Five other entries, used 1 to 5 hours ago; the served one is the oldest of all.
    for (let i = 1; i <= 5; i++) {
      await Deno.mkdir(`${dir}/old${i}`);
      const at = new Date(now - i * HOUR_MS);
      await Deno.utime(`${dir}/old${i}`, at, at);
    }
    const long = new Date(now - 10 * HOUR_MS);
    await Deno.utime(`${dir}/${counter.hash}`, long, long);
    await Deno.mkdir(`${dir}/${counter.hash}.tmp-crashed`);
    await Deno.utime(`${dir}/${counter.hash}.tmp-crashed`, long, long);
    await Deno.mkdir(`${dir}/${counter.hash}.tmp-writing`);

    const removed = await pruneComponentCache(dir, [counter.hash], 2, now);

    assert.deepEqual(
      removed.sort(),
      ["old3", "old4", "old5", `${counter.hash}.tmp-crashed`].sort(),
    );
    assert.deepEqual(
      await entries(dir),
      [counter.hash, `${counter.hash}.tmp-writing`, "old1", "old2"].sort(),
    );
    // What is kept still loads from the cache, without a transpile.
    const cached = await cachedComponent("counter", counter.hash, COUNTER_WASM, dir);
    assert.equal(cached?.glue, counter.glue);
    assert.equal(cached?.directModule, counter.directModule);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("component cache: a cached load is a use, so the entry outlives spare ones used before it", async () => {
  const { dir, counter } = await cacheWithCounter();
  try {
    const now = Date.now();
    const long = new Date(now - 10 * HOUR_MS);
    await Deno.utime(`${dir}/${counter.hash}`, long, long);
    await Deno.mkdir(`${dir}/other`);
    const hourAgo = new Date(now - HOUR_MS);
    await Deno.utime(`${dir}/other`, hourAgo, hourAgo);

    assert.ok(await cachedComponent("counter", counter.hash, COUNTER_WASM, dir));
    const removed = await pruneComponentCache(dir, [], 1);

    assert.deepEqual(removed, ["other"]);
    assert.deepEqual(await entries(dir), [counter.hash]);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("component cache: a cache that was never written is nothing to prune", async () => {
  const dir = await Deno.makeTempDir({ prefix: "wk-component-cache-" });
  try {
    assert.deepEqual(await pruneComponentCache(`${dir}/absent`, []), []);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
