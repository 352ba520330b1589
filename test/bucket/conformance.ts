/**
 * What every store must do, written once and run against each of them.
 *
 * @module
 */

import { assert, assertEquals, assertRejects } from "./assert.ts";
import { type Bucket, listAll, PreconditionFailed } from "../../src/bucket/bucket.ts";

const bytes = (text: string) => new TextEncoder().encode(text);
const text = (body: Uint8Array) => new TextDecoder().decode(body);

/** Keys of the pagination case: more than one page of 1,000. */
const MANY_KEYS = 1005;

/** Writes `keys` (body = key) with `concurrency` writes in flight. */
export async function putMany(bucket: Bucket, keys: string[], concurrency = 16): Promise<void> {
  let next = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < keys.length) {
        const key = keys[next++];
        await bucket.put(key, bytes(key));
      }
    }),
  );
}

/**
 * Runs the conformance cases as steps of `t`, each under its own key prefix
 * of the one `bucket`.
 *
 * @example
 * ```ts
 * import { conformance } from "./conformance.ts";
 * import { MemoryBucket } from "../../src/bucket/memory.ts";
 * Deno.test("memory", (t) => conformance(t, new MemoryBucket()));
 * ```
 */
export async function conformance(t: Deno.TestContext, bucket: Bucket): Promise<void> {
  await t.step("get and head of a missing key are null", async () => {
    assertEquals(await bucket.get("missing/x"), null);
    assertEquals(await bucket.head("missing/x"), null);
  });

  await t.step("an object reads back with its ETag, size and time", async () => {
    const before = Date.now();
    const { etag } = await bucket.put("read/a", bytes("hello"));
    const got = await bucket.get("read/a");
    assert(got);
    assertEquals(text(got.body), "hello");
    assertEquals(got.etag, etag);
    const head = await bucket.head("read/a");
    assertEquals(head?.etag, etag);
    assertEquals(head?.size, 5);
    // Stores keep whole seconds (S3's Last-Modified): allow for the rounding.
    assert(Math.abs(got.lastModified - before) < 60_000, `lastModified ${got.lastModified}`);
    await bucket.put("read/empty", new Uint8Array());
    assertEquals((await bucket.get("read/empty"))?.body.length, 0);
  });

  await t.step("create once: a second create is refused", async () => {
    await bucket.put("create/k", bytes("first"), { ifNoneMatch: "*" });
    const error = await assertRejects(
      () => bucket.put("create/k", bytes("second"), { ifNoneMatch: "*" }),
      PreconditionFailed,
    );
    assertEquals(error.condition, "ifNoneMatch");
    assertEquals(error.key, "create/k");
    assertEquals(text((await bucket.get("create/k"))!.body), "first");
  });

  await t.step("replace with the current ETag, refused with a stale one", async () => {
    const first = await bucket.put("replace/k", bytes("v1"), { ifNoneMatch: "*" });
    const second = await bucket.put("replace/k", bytes("v2"), { ifMatch: first.etag });
    assert(second.etag !== first.etag);
    const error = await assertRejects(
      () => bucket.put("replace/k", bytes("v3"), { ifMatch: first.etag }),
      PreconditionFailed,
    );
    assertEquals(error.condition, "ifMatch");
    assertEquals(text((await bucket.get("replace/k"))!.body), "v2");
    await bucket.put("replace/k", bytes("v3"), { ifMatch: second.etag });
    assertEquals(text((await bucket.get("replace/k"))!.body), "v3");
  });

  await t.step("If-Match on a missing key is refused", async () => {
    const { etag } = await bucket.put("ifmatch/other", bytes("x"));
    await assertRejects(
      () => bucket.put("ifmatch/missing", bytes("y"), { ifMatch: etag }),
      PreconditionFailed,
    );
    assertEquals(await bucket.get("ifmatch/missing"), null);
  });

  await t.step("delete, plain and conditional", async () => {
    await bucket.put("delete/plain", bytes("x"));
    await bucket.delete("delete/plain");
    assertEquals(await bucket.get("delete/plain"), null);
    await bucket.delete("delete/plain"); // a missing key is not an error
    const v1 = await bucket.put("delete/cond", bytes("v1"));
    const v2 = await bucket.put("delete/cond", bytes("v2"), { ifMatch: v1.etag });
    await assertRejects(
      () => bucket.delete("delete/cond", { ifMatch: v1.etag }),
      PreconditionFailed,
    );
    assertEquals(text((await bucket.get("delete/cond"))!.body), "v2");
    await bucket.delete("delete/cond", { ifMatch: v2.etag });
    assertEquals(await bucket.head("delete/cond"), null);
    await assertRejects(
      () => bucket.delete("delete/cond", { ifMatch: v2.etag }),
      PreconditionFailed,
    );
  });

  await t.step("list by prefix, in lexicographic order, with metadata", async () => {
    const keys = ["list/a", "list/a-b", "list/a/b", "list/a/c", "list/a0", "list/b/x/y", "listing"];
    await putMany(bucket, keys);
    const page = await bucket.list("list/");
    assertEquals(page.objects.map((o) => o.key), keys.slice(0, 6));
    assertEquals(page.continuationToken, undefined);
    const head = await bucket.head("list/a/b");
    assertEquals(page.objects[2], { ...head!, key: "list/a/b" });
    assertEquals(page.objects[2].size, "list/a/b".length);
    assertEquals((await bucket.list("list/a/")).objects.map((o) => o.key), [
      "list/a/b",
      "list/a/c",
    ]);
    assertEquals((await bucket.list("list/a")).objects.length, 5);
    assertEquals((await bucket.list("list/zzz")).objects, []);
  });

  await t.step("list starts after a key", async () => {
    const after = await bucket.list("list/", { startAfter: "list/a-b" });
    assertEquals(after.objects.map((o) => o.key), [
      "list/a/b",
      "list/a/c",
      "list/a0",
      "list/b/x/y",
    ]);
    const between = await bucket.list("list/", { startAfter: "list/a/bb" });
    assertEquals(between.objects.map((o) => o.key), ["list/a/c", "list/a0", "list/b/x/y"]);
    const all = [];
    for await (const o of listAll(bucket, "list/", "list/a0")) all.push(o.key);
    assertEquals(all, ["list/b/x/y"]);
  });

  await t.step(`pagination over ${MANY_KEYS} keys`, async () => {
    const keys = Array.from({ length: MANY_KEYS }, (_, i) => `many/${String(i).padStart(5, "0")}`);
    await putMany(bucket, keys);
    const first = await bucket.list("many/");
    assertEquals(first.objects.length, 1000);
    assert(first.continuationToken);
    const second = await bucket.list("many/", { continuationToken: first.continuationToken });
    assertEquals(second.objects.map((o) => o.key), keys.slice(1000));
    assertEquals(second.continuationToken, undefined);
    const small = await bucket.list("many/", { maxKeys: 7, startAfter: "many/00100" });
    assertEquals(small.objects.map((o) => o.key), keys.slice(101, 108));
    const listed = [];
    for await (const o of listAll(bucket, "many/")) listed.push(o.key);
    assertEquals(listed, keys);
  });

  await t.step("20 concurrent creates of one key: exactly one wins", async () => {
    const results = await Promise.allSettled(
      Array.from(
        { length: 20 },
        (_, i) => bucket.put("race/k", bytes(`writer ${i}`), { ifNoneMatch: "*" }),
      ),
    );
    const won = results.filter((r) => r.status === "fulfilled");
    const lost = results.filter((r) => r.status === "rejected");
    assertEquals(won.length, 1);
    for (const r of lost) assert((r as PromiseRejectedResult).reason instanceof PreconditionFailed);
    const winner = results.indexOf(won[0]);
    assertEquals(text((await bucket.get("race/k"))!.body), `writer ${winner}`);
  });
}
