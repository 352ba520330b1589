import assert from "node:assert/strict";
import { openBucket } from "../../src/bucket/open.ts";
import { FileBucketMissing } from "../../src/bucket/file.ts";

Deno.test("openBucket with existing: a file:// folder that is missing or a file is refused, naming it", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/file`, "");
    for (
      const [path, problem] of [
        [
          `${dir}/none`,
          /^the file bucket's folder .*\/none does not exist \(a file bucket is made/,
        ],
        [`${dir}/file`, /^the file bucket's folder .*\/file is a file, not a folder$/],
        [
          `${dir}/file/b`,
          /^the file bucket's folder .*\/file\/b does not exist: a file is in its path$/,
        ],
      ] as const
    ) {
      assert.throws(
        () => openBucket(`file://${path}`, { existing: true }),
        (error) => error instanceof FileBucketMissing && problem.test(error.message),
        path,
      );
    }
    // Nothing was made.
    assert.deepEqual((await Array.fromAsync(Deno.readDir(dir))).map((e) => e.name), ["file"]);
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
