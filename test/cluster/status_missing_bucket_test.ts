import assert from "node:assert/strict";
import { clusterStatus } from "../../src/cluster/status_report.ts";
import { FileBucketMissing } from "../../src/bucket/file.ts";

Deno.test("clusterStatus refuses a file:// folder that does not exist, and makes none", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await assert.rejects(
      clusterStatus({ bucket: `file://${dir}/typo` }),
      (error) => error instanceof FileBucketMissing && /typo does not exist/.test(error.message),
    );
    assert.deepEqual(await Array.fromAsync(Deno.readDir(dir)), []);
    // An empty bucket that exists is read: no node live.
    const report = await clusterStatus({ bucket: `file://${dir}` });
    assert.equal(report.summary.live, 0);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
