/**
 * A burst of alarms (issue 19): 1,000 actors on a 3-node cluster, their
 * alarms due within one second, all fire, each once (no fault here to
 * explain a second firing); at most MAX_ALARMS_FIRING at once per node,
 * the nodes' memory bounded, and the index empty afterwards.
 */

import assert from "node:assert/strict";
import { request, scratchDir, startClusterNode } from "../../../src/testing/cluster.ts";
import {
  metric,
  type NodeProcess,
  peakRss,
  TESTBED_WASM,
} from "../../../src/testing/node_process.ts";
import { until } from "../../helpers/until.ts";
import { FileBucket } from "../../../src/bucket/file.ts";

const TESTBED = ["--actor", `testbed=${TESTBED_WASM}`];
const ACTORS = 1_000;
const PARALLEL = 32;

/** Runs `task` for 0..count-1, `PARALLEL` at a time. */
async function each(count: number, task: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: PARALLEL }, async () => {
    while (next < count) await task(next++);
  }));
}

/** Bucket requests of `op` on `area` by the nodes and their executors (wasmkeep_bucket_requests_total). */
async function requests(nodes: NodeProcess[], op: string, area: string): Promise<number> {
  let total = 0;
  for (const node of nodes) {
    total += await metric(node.url, "wasmkeep_bucket_requests_total", { op, area }) ?? 0;
  }
  return total;
}

/** Every kind of bucket request, summed over the nodes. */
async function allRequests(nodes: NodeProcess[]): Promise<Map<string, number>> {
  const all = new Map<string, number>();
  for (const op of ["get", "head", "put", "delete", "list"]) {
    for (const area of ["nodes", "owners", "actors", "alarms"]) {
      all.set(`${op} ${area}`, await requests(nodes, op, area));
    }
  }
  return all;
}

/** What `after` has more of than `before`, the kinds with none left out. */
function grown(before: Map<string, number>, after: Map<string, number>): Record<string, number> {
  return Object.fromEntries(
    [...after].map(([kind, n]) => [kind, n - (before.get(kind) ?? 0)]).filter(([, n]) => n !== 0),
  );
}

/** Executors tell their node their bucket requests once a second. */
const TALLY_WAIT_MS = 1_500;

async function fired(nodes: NodeProcess[]): Promise<number> {
  let total = 0;
  for (const node of nodes) {
    for (const by of ["owner", "sweep"]) {
      total += await metric(node.url, "wasmkeep_alarms_fired_total", { by }) ?? 0;
    }
  }
  return total;
}

Deno.test("alarms: 1,000 alarms due within one second on a 3-node cluster all fire, each once, with the nodes' memory bounded (file bucket)", async () => {
  const dir = await scratchDir("wk-alarm-burst-");
  const bucketUrl = `file://${dir}/bucket`;
  try {
    const nodes = await Promise.all(
      ["a", "b", "c"].map((id) => startClusterNode(id, dir, bucketUrl, TESTBED)),
    );
    try {
      const due = Date.now() + 20_000;
      const atStart = await allRequests(nodes);
      // Actor i is taken by the node it is first asked through.
      // A set refused with a 503 that says to retry ran nothing (no entry, no
      // upload): a client retries it. On a loaded machine a node's 3 s lease
      // may lapse during the burst; such refusals are counted and shown.
      let retried = 0;
      await each(ACTORS, async (i) => {
        const node = nodes[i % nodes.length];
        const url = `${node.url}/actor/testbed/burst-${i}/alarm?${due + i % 1000}`;
        let set = await request(url);
        for (let tries = 1; set.status === 503 && set.retryAfter !== null && tries < 5; tries++) {
          retried++;
          await new Promise((resolve) => setTimeout(resolve, 250));
          set = await request(url);
        }
        assert.equal(set.status, 200, set.body);
      });
      if (retried > 0) {
        console.log(`sets retried after a 503: ${retried}; the nodes' lease lines:`);
        for (const node of nodes) {
          console.log(node.logs().split("\n").filter((line) => /lease/.test(line)).join("\n"));
        }
      }
      assert.ok(retried < ACTORS / 10, `${retried} sets refused`);
      assert.ok(Date.now() < due, "every alarm was set before the first was due");
      await new Promise((resolve) => setTimeout(resolve, TALLY_WAIT_MS));
      const setDone = await allRequests(nodes);
      const toSet = grown(atStart, setDone);
      console.log(`bucket requests to set ${ACTORS} alarms:`, toSet);
      // One write of the index per alarm set, and no read of it.
      assert.equal(toSet["put alarms"], ACTORS);
      assert.equal(toSet["get alarms"] ?? 0, 0);
      await until("every alarm fired", async () => await fired(nodes) >= ACTORS, 40_000);
      const firedBy = Date.now() - due;
      await until(
        "every entry deleted",
        async () => await requests(nodes, "delete", "alarms") >= ACTORS,
        10_000,
      );
      await new Promise((resolve) => setTimeout(resolve, TALLY_WAIT_MS));
      const toFire = grown(setDone, await allRequests(nodes));
      console.log(`bucket requests from then until every alarm fired:`, toFire);
      // One delete of its entry per alarm fired, no read of an entry, and
      // about one upload per firing (on-alarm's writes) besides the nodes' own.
      assert.equal(toFire["delete alarms"], ACTORS);
      assert.equal(toFire["get alarms"] ?? 0, 0);
      assert.ok((toFire["put actors"] ?? 0) <= 2 * ACTORS, `uploads: ${toFire["put actors"]}`);
      for (const [i, node] of nodes.entries()) {
        // The node's process and each executor, at their peak so far.
        const peaks = [node.pid, ...node.descendants()].map((pid) => peakRss(pid) / 1024 / 1024);
        console.log(`node ${"abc"[i]}: peak RSS ${peaks.map((p) => p.toFixed(0)).join(", ")} MiB`);
        for (const peak of peaks) {
          assert.ok(peak < 384, `a process of node ${"abc"[i]} peaked at ${peak} MiB`);
        }
      }
      console.log(`the last of ${ACTORS} alarms fired ${firedBy} ms after the first was due`);
      const counts = new Map<number, number>();
      await each(ACTORS, async (i) => {
        const sql = encodeURIComponent("SELECT count(*) FROM t WHERE x = 'alarm'");
        const answer = await request(`${nodes[i % 3].url}/actor/testbed/burst-${i}/sql?${sql}`);
        counts.set(i, Number(answer.body));
      });
      const wrong = [...counts].filter(([, n]) => n !== 1);
      assert.deepEqual(wrong, [], "each actor's alarm fired exactly once");
      assert.equal(await fired(nodes), ACTORS);
      // Every entry was deleted once its firing landed.
      const bucket = new FileBucket(`${dir}/bucket`);
      try {
        await until("the index is empty", async () => {
          const page = await bucket.list("alarms/");
          return page.objects.length === 0;
        });
      } finally {
        await bucket.close();
      }
    } finally {
      await Promise.all(nodes.map((node) => node.stop()));
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
