/**
 * Alarms are handed over only within the app (issue 29): two tenants on
 * one bucket prefix, a node of one stopping cleanly hands its alarms to a
 * node of its own app, never to the other tenant's node, and a node
 * handed another tenant's alarms, or alarms from a node of another app,
 * refuses them and arms none.
 */

import assert from "node:assert/strict";
import { request, scratchDir, startClusterNode } from "../../../src/testing/cluster.ts";
import {
  metric,
  type NodeProcess,
  runWasmkeep,
  TESTBED_WASM,
} from "../../../src/testing/node_process.ts";
import { until } from "../../helpers/until.ts";
import { FileBucket } from "../../../src/bucket/file.ts";
import { loadClusterSecret } from "../../../src/security/cluster_secret.ts";
import { signCall } from "../../../src/security/call_signature.ts";
import { ALARM_HANDOVER_PATH } from "../../../src/alarms/alarm_handover.ts";
import { systemClock, systemRandom } from "../../../src/time/clock.ts";
import { createLogger } from "../../../src/log.ts";

/** `wasmkeep deploy --app APP` of the testbed on `bucketUrl`, which must succeed. */
async function deploy(bucketUrl: string, app: string): Promise<void> {
  const run = await runWasmkeep([
    "deploy",
    "--app",
    app,
    "--bucket",
    bucketUrl,
    "--actor",
    `testbed=${TESTBED_WASM}`,
  ]);
  assert.equal(run.code, 0, `deploy ${app}: ${run.stderr}`);
}

/** The testbed actor's rows of t, read through `node`. */
async function rows(node: NodeProcess, name: string): Promise<string[]> {
  const sql = encodeURIComponent("SELECT x FROM t ORDER BY rowid");
  const answer = await request(`${node.url}/actor/testbed/${name}/sql?${sql}`);
  assert.equal(answer.status, 200, answer.body);
  return answer.body === "" ? [] : answer.body.split("\n");
}

const firedAt = (all: string[]) =>
  all.filter((row) => row.startsWith("fired-at:")).map((row) => Number(row.slice(9)));

Deno.test("alarms: a clean stop hands its alarms only to a node of its own app, never to another tenant's node on the same prefix, and they fire there on time", async () => {
  const dir = await scratchDir("wk-alarm-app-");
  const bucketUrl = `file://${dir}/bucket`;
  try {
    await deploy(bucketUrl, "acme/shop");
    await deploy(bucketUrl, "globex/shop");
    const acme = ["--app", "acme/shop"];
    // b, of the other tenant, comes first in the order peers are tried;
    // a, started last, knows both from its join.
    const [b, c] = await Promise.all([
      startClusterNode("b", dir, bucketUrl, ["--app", "globex/shop"]),
      startClusterNode("c", dir, bucketUrl, acme),
    ]);
    const a = await startClusterNode("a", dir, bucketUrl, acme);
    try {
      const due = Date.now() + 6_000;
      for (const name of ["one", "two"]) {
        const set = await request(`${a.url}/actor/testbed/${name}/alarm?${due}`);
        assert.deepEqual([set.status, set.body, set.node], [200, "set", "a"]);
      }
      const status = await a.stop();
      assert.equal(status.code, 0, a.logs());
      assert.match(a.logs(), /alarms handed over.*alarms=2/);
      assert.ok(Date.now() < due, "stopped before the alarms were due");
      assert.equal(await metric(b.url, "wasmkeep_alarms_armed"), 0, b.logs());
      await until(
        "both fired on c",
        async () => await metric(c.url, "wasmkeep_alarms_fired_total", { by: "owner" }) === 2,
        15_000,
      );
      for (const name of ["one", "two"]) {
        const all = await rows(c, name);
        assert.equal(all.filter((row) => row === "alarm").length, 1, all.join(","));
        const [at] = firedAt(all);
        assert.ok(at >= due && at - due < 1_000, `${name} fired ${at - due} ms from due`);
      }
      assert.equal(await metric(b.url, "wasmkeep_alarms_armed"), 0, b.logs());
      assert.equal(await metric(b.url, "wasmkeep_alarms_fired_total", { by: "owner" }), 0);
      // Never offered to b: the stopping node chose among its app's nodes.
      assert.doesNotMatch(b.logs(), /acme\/testbed|refused alarms/);
    } finally {
      await a.kill().catch(() => {});
      await Promise.all([b.stop(), c.stop()]);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("alarms: a node refuses alarms handed over of another tenant or by a node of another app (409, none armed), and arms its own app's", async () => {
  const dir = await scratchDir("wk-alarm-refuse-");
  const bucketUrl = `file://${dir}/bucket`;
  const bucket = new FileBucket(`${dir}/bucket`);
  try {
    await deploy(bucketUrl, "globex/shop");
    const g = await startClusterNode("g", dir, bucketUrl, ["--app", "globex/shop"]);
    try {
      const secret = await loadClusterSecret(bucket, { random: systemRandom, log: createLogger() });
      const handOver = async (body: unknown, caller: string) => {
        const bytes = new TextEncoder().encode(JSON.stringify(body));
        const headers = signCall(secret, {
          targetNode: "g",
          method: "POST",
          path: ALARM_HANDOVER_PATH,
          body: bytes,
          caller,
          chain: [],
        }, { clock: systemClock, random: systemRandom });
        return await request(`${g.url}${ALARM_HANDOVER_PATH}`, {
          method: "POST",
          body: bytes,
          headers,
        });
      };
      const due = Date.now() + 60_000;
      let answer = await handOver(
        { alarms: [["acme", "testbed", "x", due]] },
        "acme/testbed/x",
      );
      assert.equal(answer.status, 409, answer.body);
      assert.match(answer.body, /^this node serves tenant globex, not acme/);
      // One alarm of another tenant among its own: none is armed.
      answer = await handOver(
        { alarms: [["globex", "testbed", "y", due], ["acme", "testbed", "x", due]] },
        "globex/testbed/y",
      );
      assert.equal(answer.status, 409, answer.body);
      // Its own tenant's alarm from a node that says it serves another app.
      const own = [["globex", "testbed", "y", due]];
      answer = await handOver({ app: "globex/admin", alarms: own }, "globex/testbed/y");
      assert.deepEqual([answer.status, answer.body], [
        409,
        "this node serves globex/shop, not globex/admin: no alarm armed",
      ]);
      assert.equal(await metric(g.url, "wasmkeep_alarms_armed"), 0);
      assert.match(g.logs(), /refused alarms a peer handed over/);
      // From its app's node, and from a version that did not name its app.
      answer = await handOver({ app: "globex/shop", alarms: own }, "globex/testbed/y");
      assert.equal(answer.status, 204, answer.body);
      answer = await handOver({ alarms: [["globex", "testbed", "z", due]] }, "globex/testbed/z");
      assert.equal(answer.status, 204, answer.body);
      assert.equal(await metric(g.url, "wasmkeep_alarms_armed"), 2);
    } finally {
      await g.stop();
    }
  } finally {
    await bucket.close();
    await Deno.remove(dir, { recursive: true });
  }
});
