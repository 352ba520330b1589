/**
 * A node killed with SIGKILL, with the default lease timings: its actors are
 * served again by another node 15 to about 21 s after its last heartbeat, a
 * GET that arrives meanwhile is kept until then, a POST is answered 503 at
 * once, and nothing acknowledged is lost.
 */

import assert from "node:assert/strict";
import { metric, TESTBED_WASM } from "../../../src/testing/node_process.ts";
import { request, scratchDir, startClusterNode } from "../../../src/testing/cluster.ts";
import { startMoto } from "../../../src/testing/moto.ts";

const TESTBED = ["--actor", `testbed=${TESTBED_WASM}`];

for (const store of ["file", "moto"] as const) {
  Deno.test(`SIGKILL of the owner: a kept GET is answered by the new owner 15 to about 21 s after the owner's last write; a POST gets 503 at once; nothing acknowledged is lost (${store} bucket)`, async () => {
    const dir = await scratchDir("wk-failover-");
    const moto = store === "moto" ? await startMoto() : undefined;
    const bucketUrl = moto ? `s3://${moto.bucket}/${store}` : `file://${dir}/bucket`;
    const env = moto?.env;
    try {
      // The default ttl (10 s): the spec's timings.
      const [a, b] = await Promise.all([
        startClusterNode("a", dir, bucketUrl, TESTBED, { leaseTtlSecs: 10, env }),
        startClusterNode("b", dir, bucketUrl, TESTBED, { leaseTtlSecs: 10, env }),
      ]);
      try {
        const durable = await request(`${a.url}/actor/testbed/victim/durable`);
        assert.deepEqual([durable.status, durable.body, durable.node], [200, "ok", "a"]);
        const through = await request(`${b.url}/actor/testbed/victim/durable`);
        assert.deepEqual([through.status, through.body, through.node], [200, "ok", "a"]);

        await a.killTree();
        const killedAt = performance.now();
        // a wrote its heartbeat at most a period (3 s) before it died.
        const sinceKill = () => (performance.now() - killedAt) / 1000;

        // Until its heartbeat leaves b's view (10 s after its last write), a
        // request is sent to a and gets the 503 at once.
        const early = await request(`${b.url}/actor/testbed/victim/rows`);
        assert.equal(early.status, 503);
        assert.equal(early.retryAfter, "1");
        await new Promise((r) => setTimeout(r, 11_000));

        // Out of view: a GET is kept, a POST is not.
        const kept = request(`${b.url}/actor/testbed/victim/rows`);
        const post = await request(`${b.url}/actor/testbed/victim/insert?late`, { method: "POST" });
        assert.equal(post.status, 503, post.body);
        assert.equal(post.retryAfter, "1");
        assert.ok(sinceKill() < 12.5, `the POST was answered at once (${sinceKill()} s)`);

        const answer = await kept;
        const answeredAfter = sinceKill();
        assert.deepEqual([answer.status, answer.body, answer.node], [200, "2", "b"]);
        // 15 to about 21 s after a's last write, which was 0 to 3 s before the kill.
        assert.ok(
          answeredAfter >= 12 && answeredAfter <= 23,
          `answered ${answeredAfter.toFixed(1)} s after the kill`,
        );
        assert.equal(
          await metric(b.url, 'wasmkeep_failover_waits_total{outcome="served"}'),
          1,
        );
      } finally {
        await a.kill().catch(() => {});
        await b.stop();
      }
    } finally {
      await moto?.stop();
      await Deno.remove(dir, { recursive: true });
    }
  });
}
