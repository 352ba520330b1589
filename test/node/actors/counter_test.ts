import assert from "node:assert/strict";
import { COUNTER_WASM, startNode, withNode } from "../../../src/testing/node_process.ts";

Deno.test("the counter counts, names the node, and keeps its count across a restart", async () => {
  const dataDir = await Deno.makeTempDir();
  const args = ["--actor", `counter=${COUNTER_WASM}`, "--data-dir", dataDir, "--node-id", "n1"];
  let node = await startNode(args);
  try {
    for (const expected of ["1", "2"]) {
      const response = await fetch(`${node.url}/actor/counter/alice`, { method: "POST" });
      assert.equal(response.status, 200);
      assert.equal(response.headers.get("x-wasmkeep-node"), "n1");
      assert.equal((await response.text()).trim(), expected);
    }
    const current = await fetch(`${node.url}/actor/counter/alice`);
    assert.equal((await current.text()).trim(), "2");
    const other = await fetch(`${node.url}/actor/counter/bob`);
    assert.equal((await other.text()).trim(), "0");
    const status = await node.stop();
    assert.equal(status.code, 0, node.logs());
    assert.match(node.logs(), /node stopped/);

    node = await startNode(args);
    const after = await fetch(`${node.url}/actor/counter/alice`, { method: "POST" });
    assert.equal((await after.text()).trim(), "3");
  } finally {
    await node.stop();
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("100 concurrent POSTs to one actor run one at a time and end at 100", async () => {
  await withNode(["--actor", `counter=${COUNTER_WASM}`], async (node) => {
    const answers = await Promise.all(
      Array.from(
        { length: 100 },
        () =>
          fetch(`${node.url}/actor/counter/hot`, { method: "POST" }).then(async (r) => {
            assert.equal(r.status, 200);
            return Number((await r.text()).trim());
          }),
      ),
    );
    assert.deepEqual(
      answers.toSorted((a, b) => a - b),
      Array.from({ length: 100 }, (_, i) => i + 1),
    );
    const final = await fetch(`${node.url}/actor/counter/hot`);
    assert.equal((await final.text()).trim(), "100");
  });
});
