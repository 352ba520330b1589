import assert from "node:assert/strict";
import { openBucket } from "../../src/bucket/open.ts";
import { FileBucketMissing } from "../../src/bucket/file.ts";

Deno.test("openBucket with existing: a file:// folder that does not exist is refused, naming it", async () => {
  const dir = await Deno.makeTempDir();
  try {
    for (const path of [`${dir}/none`, `${dir}/none/deeper`]) {
      assert.throws(
        () => openBucket(`file://${path}`, { existing: true }),
        (error) =>
          error instanceof FileBucketMissing && error.root === path &&
          error.message ===
            `the file bucket's folder ${path} does not exist (a file bucket is made by the first node or deploy that writes to it)`,
        path,
      );
    }
    // Nothing was made.
    assert.deepEqual(await Array.fromAsync(Deno.readDir(dir)), []);
    // An existing folder opens; without `existing` a missing one is made by the first write.
    await openBucket(`file://${dir}`, { existing: true }).close();
    const made = openBucket(`file://${dir}/none`);
    await made.put("k", new Uint8Array([1]));
    await made.close();
    await openBucket(`file://${dir}/none`, { existing: true }).close();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
