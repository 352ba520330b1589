/**
 * A `file://` bucket typo given to a `cluster` command is said as such, in
 * one line naming `--bucket`, instead of reading an empty bucket ("no live
 * node") or making the folder.
 */

import assert from "node:assert/strict";
import { runWasmkeep } from "../../../src/testing/node_process.ts";

Deno.test("cluster status, fence and forget refuse a file:// bucket folder that does not exist, naming --bucket", async () => {
  const dir = await Deno.makeTempDir({ prefix: "wk-bucket-missing-" });
  const url = `file://${dir}/no/such/dir`;
  try {
    for (
      const args of [
        ["status"],
        ["status", "--json"],
        ["fence", "a"],
        ["forget", "a"],
      ]
    ) {
      const { code, stdout, stderr } = await runWasmkeep(["cluster", ...args, "--bucket", url]);
      assert.equal(code, 1, stderr);
      assert.equal(stdout, "", args.join(" "));
      assert.equal(
        stderr,
        `wasmkeep: --bucket ${url}: the file bucket's folder ${dir}/no/such/dir does not exist (a file bucket is made by the first node or deploy that writes to it)\n`,
      );
    }
    assert.deepEqual(await Array.fromAsync(Deno.readDir(dir)), [], "no folder was made");
    // A folder that exists but holds no cluster: no live node, as before.
    const empty = await runWasmkeep(["cluster", "status", "--bucket", `file://${dir}`]);
    assert.equal(empty.code, 1, empty.stderr);
    assert.match(empty.stdout, /warning: no live node/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
