/**
 * Alarms across node processes (issue 19): an alarm whose owner was killed
 * fires once on another node by the overdue sweep (moto), and one whose
 * owner stopped cleanly fires on time on the node it was handed over to
 * (file bucket).
 */

import assert from "node:assert/strict";
import { request, scratchDir, startClusterNode } from "../../../src/testing/cluster.ts";
import { startMoto } from "../../../src/testing/moto.ts";
import { metric, type NodeProcess, TESTBED_WASM } from "../../../src/testing/node_process.ts";
import { until } from "../../helpers/until.ts";
import { leaseTiming } from "../../../src/cluster/lease_timing.ts";
import { ALARM_SWEEP_MS } from "../../../src/limits.ts";

const TESTBED = ["--actor", `testbed=${TESTBED_WASM}`];
const TTL_SECS = 3;

/** The actor's rows of t, read through `node`. */
async function rows(node: NodeProcess, name: string): Promise<string[]> {
  const sql = encodeURIComponent("SELECT x FROM t ORDER BY rowid");
  const answer = await request(`${node.url}/actor/testbed/${name}/sql?${sql}`);
  assert.equal(answer.status, 200, answer.body);
  return answer.body === "" ? [] : answer.body.split("\n");
}

const firedAt = (all: string[]) =>
  all.filter((row) => row.startsWith("fired-at:")).map((row) => Number(row.slice(9)));

Deno.test("alarms: the owner killed before the due time, the alarm fires once on another node, within ttl + grace + one sweep of its due time (moto)", async () => {
  const dir = await scratchDir("wk-alarm-kill-");
  const moto = await startMoto();
  const bucketUrl = `s3://${moto.bucket}/alarms`;
  try {
    const a = await startClusterNode("a", dir, bucketUrl, TESTBED, { env: moto.env });
    const b = await startClusterNode("b", dir, bucketUrl, TESTBED, { env: moto.env });
    try {
      const due = Date.now() + 2_000;
      const set = await request(`${a.url}/actor/testbed/orphan/alarm?${due}`);
      assert.deepEqual([set.status, set.body, set.node], [200, "set", "a"]);
      await a.killTree();
      const { fenceAfterMs } = leaseTiming(TTL_SECS * 1000);
      const bound = fenceAfterMs + ALARM_SWEEP_MS;
      await until(
        "the alarm fired on b",
        async () => await metric(b.url, "wasmkeep_alarms_fired_total", { by: "sweep" }) === 1,
        bound + 10_000,
      );
      const all = await rows(b, "orphan");
      assert.equal(all.filter((row) => row === "alarm").length, 1, all.join(","));
      const [at] = firedAt(all);
      assert.ok(at - due >= fenceAfterMs, `fired ${at - due} ms after due, before the grace`);
      assert.ok(at - due <= bound, `fired ${at - due} ms after due, over ${bound}`);
      const answer = await request(`${b.url}/actor/testbed/orphan/alarm-get`);
      assert.deepEqual([answer.body, answer.node], ["unset", "b"]);
    } finally {
      await a.kill().catch(() => {});
      await b.stop();
    }
  } finally {
    await moto.stop();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("alarms: a clean stop hands the owner's alarms over, and each fires on time on another node, once (file bucket)", async () => {
  const dir = await scratchDir("wk-alarm-stop-");
  const bucketUrl = `file://${dir}/bucket`;
  try {
    const a = await startClusterNode("a", dir, bucketUrl, TESTBED, { extra: ["--idle-secs", "1"] });
    const b = await startClusterNode("b", dir, bucketUrl, TESTBED);
    try {
      const due = Date.now() + 6_000;
      // One resident at the stop, one hibernated by then: both on a's timer.
      for (const name of ["awake", "asleep"]) {
        const set = await request(`${a.url}/actor/testbed/${name}/alarm?${due}`);
        assert.deepEqual([set.status, set.node], [200, "a"]);
      }
      await until(
        "asleep hibernated",
        async () => await metric(a.url, "wasmkeep_resident_actors") === 0,
      );
      await request(`${a.url}/actor/testbed/awake/rows`);
      const status = await a.stop();
      assert.equal(status.code, 0, a.logs());
      assert.match(a.logs(), /alarms handed over.*alarms=2/);
      assert.ok(Date.now() < due, "stopped before the alarms were due");
      await until(
        "both fired on b",
        async () => await metric(b.url, "wasmkeep_alarms_fired_total", { by: "owner" }) === 2,
        15_000,
      );
      for (const name of ["awake", "asleep"]) {
        const all = await rows(b, name);
        assert.equal(all.filter((row) => row === "alarm").length, 1, all.join(","));
        const [at] = firedAt(all);
        assert.ok(at >= due && at - due < 1_000, `${name} fired ${at - due} ms from due`);
      }
    } finally {
      await a.kill().catch(() => {});
      await b.stop();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
