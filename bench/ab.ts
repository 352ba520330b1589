/**
 * A/B comparison of WasmKeep checkouts under the counter load: each tree's
 * node is started in turn (the baseline too, with `--baseline`), loaded for
 * a short window, and its throughput and CPU per request (main process and
 * executors apart) printed. Rounds alternate the order, so a noisy machine
 * hits every tree alike. CPU per request is steadier than req/s here.
 *
 * The flags are in {@linkcode USAGE} (`--help` prints it).
 *
 * @module
 */

import type { LoadSpec } from "./load_gen.ts";
import {
  flag,
  ROOT,
  runLoadProcess,
  type ServerProcess,
  startServer,
  stopAll,
  treeCpuMs,
} from "./processes.ts";
import { benchTempDir, endBench, QUICK, startBench } from "./command.ts";

/** What `--help` prints. */
export const USAGE =
  `Usage: deno run -A bench/ab.ts [--quick] [--baseline] [--rounds N] [--seconds N]
         [--case hot|spread|both] ROOT...

Throughput and CPU per request of WasmKeep checkouts under the counter load, in turn, rounds
alternating the order. Each ROOT a checkout with main.ts; . for this one.

  --quick        a short run (1 round of 1 s) that shows it works
  --baseline     the counter baseline too
  --rounds N     rounds (default 5)
  --seconds N    measured seconds of each case (default 3)
  --case CASE    hot, spread or both (default both)
  -h, --help     show this help`;

startBench(USAGE);

const rounds = Number(flag("rounds") ?? (QUICK ? 1 : 5));
const seconds = Number(flag("seconds") ?? (QUICK ? 1 : 3));
const which = flag("case") ?? "both";
const valued = new Set(["--rounds", "--seconds", "--case"]);
const roots = Deno.args.filter((arg, i) =>
  !arg.startsWith("--") && !valued.has(Deno.args[i - 1] ?? "")
).map((root) =>
  root === "."
    ? ROOT
    : new URL(root.endsWith("/") ? root : root + "/", `file://${Deno.cwd()}/`).pathname
);

interface Server {
  label: string;
  start(dataDir: string): Promise<ServerProcess>;
}

const servers: Server[] = roots.map((root) => ({
  label: root,
  start: (dataDir) =>
    startServer(
      root,
      [
        "run",
        "-A",
        "main.ts",
        "serve",
        "--actor",
        `counter=${ROOT}examples/counter/counter.wasm`,
        "--data-dir",
        dataDir,
        "--listen",
        "127.0.0.1:0",
        "--log-level",
        "info",
      ],
      /node ready .*url=(http:\/\/\S+)/,
      root,
    ),
}));
if (Deno.args.includes("--baseline")) {
  servers.push({
    label: "baseline",
    start: (dataDir) =>
      startServer(
        "baseline",
        ["run", "-A", `${ROOT}bench/baseline_server.ts`, "--data-dir", dataDir],
        /baseline ready url=(http:\/\/\S+)/,
      ),
  });
}

const cases: [string, string[]][] = [];
if (which !== "spread") cases.push(["hot", ["hot"]]);
if (which !== "hot") cases.push(["spread", Array.from({ length: 1000 }, (_, i) => `s${i}`)]);

const tmp = await benchTempDir({ prefix: "wasmkeep-ab-", dir: "/dev/shm" });
const results = new Map<string, { rps: number; main: number; children: number }[]>();
try {
  // All servers run throughout (idle while another is loaded), so rounds are
  // short and many, and a burst of noise on the machine hits every tree alike.
  const started: [Server, ServerProcess][] = [];
  for (const [i, server] of servers.entries()) {
    started.push([server, await server.start(`${tmp}/s${i}`)]);
  }
  for (let round = 0; round < rounds; round++) {
    for (const [caseName, names] of cases) {
      const order = round % 2 === 0 ? started : [...started].reverse();
      for (const [server, process] of order) {
        const spec: LoadSpec = {
          host: process.host,
          port: process.port,
          method: "POST",
          paths: names.map((name) => `/actor/counter/${name}`),
          connections: 32,
          warmupMs: 1000,
          durationMs: seconds * 1000,
        };
        const cpu0 = treeCpuMs(process.pid);
        const result = await runLoadProcess(spec);
        const cpu1 = treeCpuMs(process.pid);
        const row = {
          rps: result.rps,
          main: (cpu1.selfMs - cpu0.selfMs) * 1000 / result.total2xx,
          children: (cpu1.childrenMs - cpu0.childrenMs) * 1000 / result.total2xx,
        };
        if (result.totalErrors > 0) console.error(`${server.label}: ${result.totalErrors} errors`);
        const key = `${caseName} ${server.label}`;
        results.set(key, [...(results.get(key) ?? []), row]);
        console.error(
          `round ${round + 1} ${key}: ${row.rps.toFixed(0)} req/s, CPU µs/req ${
            row.main.toFixed(1)
          } + ${row.children.toFixed(1)}`,
        );
      }
    }
  }
} finally {
  await stopAll();
  await endBench();
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[values.length >> 1];
const min = (values: number[]) => Math.min(...values);
const max = (values: number[]) => Math.max(...values);
console.log(
  "| case | server | req/s median (max) | main µs/req median (min) | executors µs/req median (min) |",
);
console.log("|---|---|---:|---:|---:|");
for (const [key, rows] of results) {
  const [caseName, ...label] = key.split(" ");
  const f = (values: number[], other: (v: number[]) => number, digits: number) =>
    `${median(values).toFixed(digits)} (${other(values).toFixed(digits)})`;
  console.log(
    `| ${caseName} | ${label.join(" ")} | ${f(rows.map((r) => r.rps), max, 0)} | ${
      f(rows.map((r) => r.main), min, 1)
    } | ${f(rows.map((r) => r.children), min, 1)} |`,
  );
}
