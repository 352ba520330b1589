/**
 * The alarms benchmark (issue 19), counted from the bucket's side: one
 * cluster node (lease ttl 3 s) on moto behind a counting proxy
 * (src/testing/counting_proxy.ts), which sees every request of the node and of its
 * executors.
 *
 * - `per alarm`: `--actors` testbed actors, each woken first, then each
 *   sets an alarm (one event), which then fires (its on-alarm, one event):
 *   the requests of each phase over the number of alarms, by kind; the
 *   node's own background (heartbeats, listings) counted over an idle
 *   window as long, and taken off.
 * - `sweep`: `--pending` index entries written straight into the bucket,
 *   due in a year, then a fresh node started on them: the requests of its
 *   alarm sweeps (listings of `alarms/`, reads of entries) over the runs
 *   that happened in the window. Target: one listing call a run, no read
 *   of an entry.
 *
 * The flags are in {@linkcode USAGE} (`--help` prints it).
 *
 * @module
 */

import { flag, startBenchNode, stopAll } from "./processes.ts";
import { type RequestCounts, startCountingProxy } from "../src/testing/counting_proxy.ts";
import { startMoto } from "../src/testing/moto.ts";
import { openBucket } from "../src/bucket/open.ts";
import { alarmKey } from "../src/bucket/keys.ts";
import { ALARM_SWEEP_MS } from "../src/limits.ts";
import { benchTempDir, onCleanup, QUICK, runBench } from "./command.ts";

/** What `--help` prints. */
export const USAGE = `Usage: deno run -A bench/alarm_bench.ts [--quick] [--actors N] [--pending N]

The requests to the bucket per alarm set and fired, and of the alarm sweep over pending
alarms, counted on moto behind a counting proxy (about two minutes, most of it writing the
pending entries). Needs Python with moto[server].

  --quick       a short run (20 actors, 500 pending) that shows the benchmark works
  --actors N    actors that set and fire an alarm each (default 200)
  --pending N   index entries written for the sweep (default 100000)
  -h, --help    show this help`;

const PREFIX = "bench";
const PARALLEL = 16;

async function each(count: number, parallel: number, task: (i: number) => Promise<void>) {
  let next = 0;
  await Promise.all(Array.from({ length: parallel }, async () => {
    while (next < count) await task(next++);
  }));
}

async function ok(url: string): Promise<string> {
  const response = await fetch(url);
  const body = await response.text();
  if (!response.ok) throw new Error(`${url}: ${response.status} ${body}`);
  return body.trim();
}

async function metric(url: string, name: string): Promise<number> {
  const text = await ok(`${url}/_wasmkeep/metrics`);
  return text.split("\n").filter((line) => line.startsWith(name)).reduce(
    (sum, line) => sum + Number(line.split(" ").pop()),
    0,
  );
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** `counts` less `background`, per alarm, the kinds with anything left. */
function perAlarm(counts: RequestCounts, background: RequestCounts, alarms: number) {
  const kinds = new Set([...Object.keys(counts), ...Object.keys(background)]);
  const rows: [string, number][] = [];
  for (const kind of [...kinds].sort()) {
    const net = (counts[kind] ?? 0) - (background[kind] ?? 0);
    if (Math.abs(net) / alarms >= 0.005) rows.push([kind, net / alarms]);
  }
  return rows;
}

async function main(): Promise<void> {
  const actors = Number(flag("actors") ?? (QUICK ? 20 : 200));
  const pending = Number(flag("pending") ?? (QUICK ? 500 : 100_000));
  const moto = await startMoto();
  onCleanup(() => moto.stop());
  const proxy = startCountingProxy(moto.endpoint, moto.bucket, `${PREFIX}/`);
  onCleanup(() => proxy.stop().catch(() => {}));
  const dir = await benchTempDir({ prefix: "wk-alarm-bench-" });
  for (const [name, value] of Object.entries(moto.env)) Deno.env.set(name, value);
  Deno.env.set("AWS_ENDPOINT", proxy.endpoint);
  const lines: string[] = [
    `bench/alarm_bench.ts --actors ${actors} --pending ${pending} (moto behind a counting proxy)`,
    "",
  ];
  try {
    // Per alarm: set, then fired.
    const node = await startBenchNode({
      id: "a",
      bucketUrl: `s3://${moto.bucket}/${PREFIX}`,
      dataDir: `${dir}/a`,
      mode: "plain",
    });
    const actor = (i: number) => `${node.url}/actor/testbed/alarm-${i}`;
    await each(actors, PARALLEL, async (i) => void await ok(`${actor(i)}/rows`));
    await sleep(3_000);
    const window = async (work: () => Promise<void>) => {
      proxy.reset();
      const started = Date.now();
      await work();
      const took = Date.now() - started;
      const counts = proxy.counts();
      proxy.reset();
      await sleep(took);
      return { counts, background: proxy.counts(), took };
    };
    const due = Date.now() + 60_000;
    const set = await window(() =>
      each(actors, PARALLEL, async (i) => void await ok(`${actor(i)}/alarm?${due + i}`))
    );
    // Moved to fire now, one event each again: the firing's own requests follow.
    // Far enough ahead that every move is done before the first fires.
    const soon = Date.now() + 2 * set.took + 2_000;
    await each(actors, PARALLEL, async (i) => void await ok(`${actor(i)}/alarm?${soon}`));
    await sleep(Math.max(0, soon - Date.now() - 500));
    const fired = await window(async () => {
      while (await metric(node.url, "wasmkeep_alarms_fired_total") < actors) await sleep(50);
      // The firings' uploads and the entries' deletes land just after their events.
      await sleep(500);
    });
    lines.push(
      `Requests per alarm (${actors} alarms), by kind, the node's background over as long taken off:`,
      "",
      "| phase | requests per alarm |",
      "| --- | --- |",
      `| set (${set.took} ms) | ${
        perAlarm(set.counts, set.background, actors).map(([k, n]) => `${k} ${n.toFixed(2)}`).join(
          ", ",
        )
      } |`,
      `| fired (${fired.took} ms) | ${
        perAlarm(fired.counts, fired.background, actors).map(([k, n]) => `${k} ${n.toFixed(2)}`)
          .join(", ")
      } |`,
      "",
    );
    await node.stop();

    // The sweep with `pending` entries, none due.
    const direct = openBucket(`s3://${moto.bucket}/${PREFIX}-sweep`, {
      env: { ...moto.env, AWS_ENDPOINT: moto.endpoint },
    });
    const year = Date.now() + 365 * 24 * 3600 * 1000;
    const writeStart = Date.now();
    await each(pending, 64, async (i) => {
      await direct.put(
        alarmKey(year + i, { tenant: "default", class: "testbed", name: `p${i}` }),
        new Uint8Array(0),
      );
    });
    await direct.close();
    console.error(`wrote ${pending} entries in ${Date.now() - writeStart} ms`);
    const sweepProxy = startCountingProxy(moto.endpoint, moto.bucket, `${PREFIX}-sweep/`);
    Deno.env.set("AWS_ENDPOINT", sweepProxy.endpoint);
    const sweeper = await startBenchNode({
      id: "s",
      bucketUrl: `s3://${moto.bucket}/${PREFIX}-sweep`,
      dataDir: `${dir}/s`,
      mode: "plain",
    });
    // The first run at the lease's start, then one every 10 s.
    const runs = 3;
    await sleep(ALARM_SWEEP_MS * (runs - 1) + 1_000);
    const counts = sweepProxy.counts();
    await sweeper.stop();
    await sweepProxy.stop();
    lines.push(
      `The sweep with ${pending} pending alarms, none due (${runs} runs in the window):`,
      "",
      "| per run | count |",
      "| --- | ---: |",
      `| listings of alarms/ | ${((counts["LIST alarms"] ?? 0) / runs).toFixed(2)} |`,
      `| reads of entries (GET or HEAD alarms/) | ${
        ((counts["GET alarms"] ?? 0) + (counts["HEAD alarms"] ?? 0)) / runs
      } |`,
      "",
    );
  } finally {
    await stopAll();
    await proxy.stop().catch(() => {});
    await moto.stop();
  }
  console.log(lines.join("\n"));
}

if (import.meta.main) await runBench(USAGE, main);
