/**
 * The log says what `/_wasmkeep/ready` says: a node following an app with
 * no deployed version yet logs that it serves but is not ready, and why,
 * and logs `node ready` only once its first version is applied.
 */

import assert from "node:assert/strict";
import { request, scratchDir } from "../../../src/testing/cluster.ts";
import { runWasmkeep, startNode, TESTBED_WASM } from "../../../src/testing/node_process.ts";
import { until } from "../../helpers/until.ts";
import { APP_POLL_MS } from "../../../src/limits.ts";

Deno.test("serve --app logs not ready with the ready check's reason until its app's first deploy, then node ready", async () => {
  const dir = await scratchDir("wk-ready-log-");
  const url = `file://${dir}/bucket`;
  try {
    const node = await startNode(["--app", "acme/shop", "--bucket", url, "--data-dir", `${dir}/a`]);
    try {
      const waiting = await request(`${node.url}/_wasmkeep/ready`);
      assert.equal(waiting.status, 503);
      const reason = waiting.body.replace(/^not ready: /, "").trim();
      assert.match(reason, /the app acme\/shop has no deployed version yet/);
      assert.doesNotMatch(node.logs(), /node ready/);
      const notReady = node.logs().split("\n").filter((line) =>
        /node serving, not ready/.test(line)
      );
      assert.equal(notReady.length, 1, node.logs());
      assert.ok(notReady[0].includes(`reason=${JSON.stringify(reason)}`), notReady[0]);
      assert.ok(notReady[0].includes(`url=${node.url}`), notReady[0]);

      // Still one line while the reason stays the same (the node looks again every 250 ms).
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      assert.equal(node.logs().match(/node serving, not ready/g)?.length, 1, node.logs());

      const deployed = await runWasmkeep([
        "deploy",
        "--app",
        "acme/shop",
        "--bucket",
        url,
        "--actor",
        `testbed=${TESTBED_WASM}`,
      ]);
      assert.equal(deployed.code, 0, deployed.stderr);
      await until(
        "the node is ready",
        async () => (await request(`${node.url}/_wasmkeep/ready`)).status === 200,
        APP_POLL_MS + 2_000,
      );
      await until("the node logs that it is ready", () => /node ready .*url=/.test(node.logs()));
      const logs = node.logs();
      assert.ok(logs.indexOf("app version applied") < logs.indexOf("node ready"), logs);
      assert.equal(logs.match(/node ready/g)?.length, 1, logs);
    } finally {
      await node.stop();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
