/**
 * A node's `--access` is refused once its app deploys rules (ADR 0013),
 * whenever the node learns it: at start (test/node/deploys/deploy_test.ts), or,
 * for a node that started before its app had a version, when that first
 * version comes with rules: the node serves nothing and stays not ready,
 * saying why and what to run.
 */

import assert from "node:assert/strict";
import { request, scratchDir, startClusterNode } from "../../../src/testing/cluster.ts";
import { runWasmkeep, TESTBED_WASM } from "../../../src/testing/node_process.ts";
import { until } from "../../helpers/until.ts";
import { APP_POLL_MS } from "../../../src/limits.ts";

Deno.test("deploys: a node started with --access before its app had a version refuses a first version that deploys rules, serving nothing, not ready with the deploy command", async () => {
  const dir = await scratchDir("wk-deploy-access-flags-");
  const url = `file://${dir}/bucket`;
  try {
    const a = await startClusterNode("a", dir, url, [
      "--app",
      "acme/shop",
      "--access",
      "testbed=existing",
    ]);
    try {
      const waiting = await request(`${a.url}/_wasmkeep/ready`);
      assert.equal(waiting.status, 503);
      assert.match(waiting.body, /has no deployed version yet/);

      const deployed = await runWasmkeep([
        "deploy",
        "--app",
        "acme/shop",
        "--bucket",
        url,
        "--actor",
        `testbed=${TESTBED_WASM}`,
        "--access",
        "testbed=internal",
      ]);
      assert.equal(deployed.code, 0, deployed.stderr);
      await until("a refuses the version", async () => {
        const ready = await request(`${a.url}/_wasmkeep/ready`);
        return ready.status === 503 && /--access is refused/.test(ready.body);
      }, APP_POLL_MS + 2_000);
      const ready = await request(`${a.url}/_wasmkeep/ready`);
      assert.match(
        ready.body,
        /the app acme\/shop deploys its own access rules .*remove --access from this node's command line, and change rules with wasmkeep deploy --app acme\/shop --bucket .* --access testbed=existing/,
      );
      const refused = await request(`${a.url}/actor/testbed/r/rows`);
      assert.equal(refused.status, 503, refused.body);
      assert.match(a.logs(), /the node keeps its app version.*--access is refused/);
    } finally {
      await a.stop();
    }
    // Without --access it serves the deployed rule.
    const b = await startClusterNode("b", dir, url, ["--app", "acme/shop"]);
    try {
      assert.equal((await request(`${b.url}/actor/testbed/r/rows`)).status, 403);
    } finally {
      await b.stop();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
