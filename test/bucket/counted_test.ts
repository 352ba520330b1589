import assert from "node:assert/strict";
import { bucketArea, countedBucket, RequestTally } from "../../src/bucket/counted.ts";
import { MemoryBucket } from "../../src/bucket/memory.ts";
import { PreconditionFailed } from "../../src/bucket/bucket.ts";

Deno.test("a counted bucket counts every request by operation and area, a refused one too, and answers as the bucket does", async () => {
  const seen: string[] = [];
  const bucket = countedBucket(new MemoryBucket(), (op, area) => seen.push(`${op} ${area}`));
  await bucket.put("alarms/default/1/c/n", new Uint8Array([1]));
  await assert.rejects(
    bucket.put("alarms/default/1/c/n", new Uint8Array([2]), { ifNoneMatch: "*" }),
    PreconditionFailed,
  );
  assert.deepEqual((await bucket.get("alarms/default/1/c/n"))?.body, new Uint8Array([1]));
  assert.equal(await bucket.head("owners/x"), null);
  assert.equal((await bucket.list("alarms/")).objects.length, 1);
  await bucket.delete("weird-key");
  assert.deepEqual(seen, [
    "put alarms",
    "put alarms",
    "get alarms",
    "head owners",
    "list alarms",
    "delete other",
  ]);
  assert.equal(bucketArea("nodes/a"), "nodes");
  assert.equal(bucketArea("nodesx"), "other");
  assert.equal(bucketArea("apps/acme/shop/current"), "apps");
});

Deno.test("a tally gives its counts once, then none until more come", () => {
  const tally = new RequestTally();
  assert.equal(tally.take(), undefined);
  tally.add("put", "actors");
  tally.add("put", "actors");
  tally.add("list", "alarms");
  assert.deepEqual(tally.take(), { "put actors": 2, "list alarms": 1 });
  assert.equal(tally.take(), undefined);
});
