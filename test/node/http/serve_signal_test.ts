/**
 * A node that forwarded a request logs no runtime line about Deno.serve's
 * legacy abort of `request.signal` (issue 28): the node reads the signal to
 * learn that a client left, which is all the new behaviour aborts it for.
 */

import assert from "node:assert/strict";
import { COUNTER_WASM } from "../../../src/testing/node_process.ts";
import { request, scratchDir, startClusterNode } from "../../../src/testing/cluster.ts";

const COUNTER = ["--actor", `counter=${COUNTER_WASM}`];
const LEGACY_LINE = "request.signal aborts on successful responses";

Deno.test("a node that forwarded a request logs nothing of Deno.serve's legacy request abort", async () => {
  const dir = await scratchDir("wk-signal-");
  const bucketUrl = `file://${dir}/bucket`;
  try {
    const [a, b] = await Promise.all([
      startClusterNode("a", dir, bucketUrl, COUNTER, { leaseTtlSecs: 6 }),
      startClusterNode("b", dir, bucketUrl, COUNTER, { leaseTtlSecs: 6 }),
    ]);
    try {
      const first = await request(`${a.url}/actor/counter/alice`, { method: "POST" });
      assert.deepEqual([first.status, first.body, first.node], [200, "1", "a"]);
      for (let count = 2; count <= 4; count++) {
        const forwarded = await request(`${b.url}/actor/counter/alice`, { method: "POST" });
        assert.deepEqual([forwarded.status, forwarded.body, forwarded.node], [
          200,
          String(count),
          "a",
        ]);
      }
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
    assert.match(b.logs(), /node stopped/);
    for (const node of [a, b]) assert.ok(!node.logs().includes(LEGACY_LINE), node.logs());
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
