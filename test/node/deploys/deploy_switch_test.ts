/**
 * Deploys through real node processes (issue 20): two nodes following an
 * app (`serve --app`) switch to each version within a poll, keep every
 * actor's data and run on-init once per version, on moto and the file
 * bucket; a lagging node refuses an actor that ran a newer version, then
 * serves it once caught up.
 */

import assert from "node:assert/strict";
import { clusterStatus, scratchDir, startClusterNode } from "../../../src/testing/cluster.ts";
import { startMoto } from "../../../src/testing/moto.ts";
import { onBucket } from "../../helpers/bucket_target.ts";
import { startCountingProxy } from "../../../src/testing/counting_proxy.ts";
import { TESTBED_V2_WASM, TESTBED_WASM } from "../../../src/testing/node_process.ts";
import { openBucket } from "../../../src/bucket/open.ts";
import { readCurrent } from "../../../src/deploy/app_objects.ts";
import { APP_POLL_MS } from "../../../src/limits.ts";
import { APP, deploy, get, servesVersion } from "./deploy_helpers.ts";

/**
 * Two nodes on `url` serve v1, then v2 within a poll with each actor's data
 * kept and on-init once per version, `cluster status` shows the app, and a
 * rollback brings v1's code back as seq 3.
 */
async function twoNodesSwitch(dir: string, url: string, env: Record<string, string>) {
  await deploy(url, env, "--actor", `testbed=${TESTBED_WASM}`);
  const a = await startClusterNode("a", dir, url, APP, { env });
  const b = await startClusterNode("b", dir, url, APP, { env });
  const bucket = openBucket(url, { env });
  try {
    // One actor held by each node.
    for (const [node, name] of [[a, "p"], [b, "q"]] as const) {
      assert.equal((await get(node, name, "/insert?one")).status, 200);
      assert.deepEqual(
        [(await get(node, name, "/version")).body, (await get(node, name, "/inits")).body],
        ["1", "1"],
      );
      assert.equal((await get(node, name, "/self")).body, `acme/testbed/${name}`);
    }
    await deploy(url, env, "--actor", `testbed=${TESTBED_V2_WASM}`);
    // A poll every 3 s, and the answer's own time.
    for (const [node, name] of [[a, "p"], [b, "q"]] as const) {
      await servesVersion(node, name, "2", APP_POLL_MS + 2_000);
      for (let i = 0; i < 3; i++) {
        assert.deepEqual(
          [(await get(node, name, "/rows")).body, (await get(node, name, "/inits")).body],
          ["1", "2"],
          `${name}: its row kept, on-init once more`,
        );
      }
    }
    const status = await clusterStatus(url, env);
    assert.equal(status.code, 0, status.stderr);
    assert.match(status.stdout, /^a +yes .* acme\/shop /m);
    const current = await readCurrent(bucket, { tenant: "acme", app: "shop" });
    assert.match(status.stdout, new RegExp(`^acme/shop +${current!.current.version} +2$`, "m"));

    // A rollback is a new version (seq 3) with the code of the first.
    await deploy(url, env, "--rollback");
    await servesVersion(a, "p", "1", APP_POLL_MS + 2_000);
    assert.deepEqual([(await get(a, "p", "/rows")).body, (await get(a, "p", "/inits")).body], [
      "1",
      "3",
    ]);
  } finally {
    await bucket.close();
    await a.stop();
    await b.stop();
  }
}

Deno.test("deploys (file bucket): two nodes switch to a new version within a poll, each actor's data kept and on-init once per version; cluster status shows the app", () =>
  onBucket("file", "switch", (bucket, dir) => twoNodesSwitch(dir, bucket.url, bucket.env)));

Deno.test("deploys (moto): two nodes switch to a new version within a poll, each actor's data kept and on-init once per version; cluster status shows the app", () =>
  onBucket("moto", "switch", (bucket, dir) => twoNodesSwitch(dir, bucket.url, bucket.env)));

Deno.test("deploys (moto): a node whose bucket reads lag refuses an actor that ran the new version with 503, and serves it once it caught up", async () => {
  const dir = await scratchDir("wk-deploy-lag-");
  const moto = await startMoto();
  const url = `s3://${moto.bucket}/lag`;
  let lagging = false;
  const proxy = startCountingProxy(moto.endpoint, moto.bucket, "lag/", {
    delayMs: (which) => lagging && which === "GET apps" ? 6_000 : 0,
  });
  try {
    await deploy(url, moto.env, "--actor", `testbed=${TESTBED_WASM}`);
    const a = await startClusterNode("a", dir, url, APP, { env: moto.env });
    const b = await startClusterNode("b", dir, url, APP, {
      env: { ...moto.env, AWS_ENDPOINT: proxy.endpoint },
    });
    try {
      assert.equal((await get(a, "x", "/insert?one")).node, "a");
      lagging = true;
      await deploy(url, moto.env, "--actor", `testbed=${TESTBED_V2_WASM}`);
      await servesVersion(a, "x", "2", APP_POLL_MS + 2_000);
      // a gives x up; b, still on version 1, must not run it.
      await a.stop();
      const refused = await get(b, "x", "/version");
      assert.equal(refused.status, 503, refused.body);
      assert.equal(refused.retryAfter, "1");
      assert.match(refused.body, /older than the seq 2 this actor ran/);
      lagging = false;
      // The refusal made b read current at once; its read lags 6 s at most.
      await servesVersion(b, "x", "2", 6_000 + APP_POLL_MS + 2_000);
      assert.deepEqual([(await get(b, "x", "/rows")).body, (await get(b, "x", "/inits")).body], [
        "1",
        "2",
      ]);
    } finally {
      await a.stop();
      await b.stop();
    }
  } finally {
    await proxy.stop();
    await moto.stop();
    await Deno.remove(dir, { recursive: true });
  }
});
