/**
 * `/_wasmkeep/metrics` right after a node's start (issue 15): every counter
 * is there at 0 with each value of its labels, not only from its first
 * increment; those of a cluster node (failover waits) and of a cluster
 * listener (refused connections) in that mode only.
 */

import assert from "node:assert/strict";
import {
  COUNTER_WASM,
  KV_WASM,
  type NodeProcess,
  startNode,
} from "../../../src/testing/node_process.ts";
import { scratchDir } from "../../../src/testing/cluster.ts";
import { WAIT_OUTCOMES } from "../../../src/cluster/failover_wait.ts";
import { REFUSAL_REASONS } from "../../../src/http/cluster_listener.ts";
import { EVENT_STATUS_CLASSES, REPLICATION_COUNTERS } from "../../../src/metrics/node_counters.ts";

const ACTORS = ["--actor", `counter=${COUNTER_WASM}`, "--actor", `kv=${KV_WASM}`];

/** Each series of the metrics page (`name{labels}` or `name`) and its value. */
async function series(node: NodeProcess): Promise<Map<string, number>> {
  const answer = await fetch(`${node.url}/_wasmkeep/metrics`);
  assert.equal(answer.status, 200);
  const found = new Map<string, number>();
  for (const line of (await answer.text()).split("\n")) {
    if (line === "" || line.startsWith("#")) continue;
    const space = line.lastIndexOf(" ");
    found.set(line.slice(0, space), Number(line.slice(space + 1)));
  }
  return found;
}

/** The counters every node exports at 0 from its start. */
function everyNodeCounter(): string[] {
  return [
    ...Object.keys(REPLICATION_COUNTERS),
    "wasmkeep_executor_restarts_total",
    ...["counter", "kv"].flatMap((className) =>
      EVENT_STATUS_CLASSES.map((status) =>
        `wasmkeep_events_total{class="${className}",status="${status}"}`
      )
    ),
  ];
}

const waits = WAIT_OUTCOMES.map((outcome) => `wasmkeep_failover_waits_total{outcome="${outcome}"}`);
const refusals = REFUSAL_REASONS.map((reason) =>
  `wasmkeep_cluster_refused_connections_total{reason="${reason}"}`
);

function assertAtZero(found: Map<string, number>, names: string[]): void {
  for (const name of names) assert.equal(found.get(name), 0, `${name} at 0 from the start`);
}

Deno.test("metrics right after a standalone node's start: every counter at 0, with each label value; none of the cluster's", async () => {
  const dataDir = await Deno.makeTempDir({ prefix: "wk-metrics-" });
  try {
    const node = await startNode([...ACTORS, "--data-dir", dataDir]);
    try {
      const found = await series(node);
      assertAtZero(found, everyNodeCounter());
      assert.equal(found.get("wasmkeep_resident_actors"), 0);
      assert.equal(found.get("wasmkeep_events_in_flight"), 0);
      const clusterOnly = [...found.keys()].filter((name) =>
        /^wasmkeep_(failover_waits|cluster_)/.test(name)
      );
      assert.deepEqual(clusterOnly, [], "no cluster series on a standalone node");
      // An event counts on its series, the others stay.
      await (await fetch(`${node.url}/actor/counter/a`, { method: "POST" })).text();
      const after = await series(node);
      assert.equal(after.get('wasmkeep_events_total{class="counter",status="2xx"}'), 1);
      assert.equal(after.get('wasmkeep_events_total{class="kv",status="2xx"}'), 0);
    } finally {
      await node.stop();
    }
  } finally {
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("metrics right after a cluster node's start with a cluster listener: the failover waits of each outcome and the refusals of each reason at 0, the connections gauge", async () => {
  const dir = await scratchDir("wk-metrics-");
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (listener.addr as Deno.NetAddr).port;
  listener.close();
  try {
    const node = await startNode([
      ...ACTORS,
      "--node-id",
      "m",
      "--lease-ttl-secs",
      "3",
      "--data-dir",
      `${dir}/m`,
      "--bucket",
      `file://${dir}/bucket`,
      "--cluster-listen",
      `127.0.0.1:${port}`,
      "--cluster-advertise",
      `https://127.0.0.1:${port}`,
    ]);
    try {
      const found = await series(node);
      assertAtZero(found, [...everyNodeCounter(), ...waits, ...refusals]);
      assert.equal(found.get("wasmkeep_cluster_connections"), 0);
    } finally {
      await node.stop();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a cluster node without a cluster listener has its failover waits at 0, and no listener series", async () => {
  const dir = await scratchDir("wk-metrics-");
  try {
    const node = await startNode([
      ...ACTORS,
      "--node-id",
      "p",
      "--cluster-plaintext",
      "accept",
      "--lease-ttl-secs",
      "3",
      "--data-dir",
      `${dir}/p`,
      "--bucket",
      `file://${dir}/bucket`,
    ]);
    try {
      const found = await series(node);
      assertAtZero(found, [...everyNodeCounter(), ...waits]);
      assert.deepEqual(
        [...found.keys()].filter((name) => name.startsWith("wasmkeep_cluster_")),
        [],
      );
    } finally {
      await node.stop();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
