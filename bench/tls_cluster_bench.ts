/**
 * What mutual TLS between nodes costs (issue 7): a forwarded request and an
 * actors.call between two nodes, over plain HTTP and over the cluster
 * listener, in the same run.
 *
 * Two pairs of WasmKeep nodes run as real processes, each pair on its own
 * file bucket (lease ttl 3 s): `plain` (`--cluster-plaintext accept`, no
 * listener) and `tls` (`--cluster-listen`, refusing plain HTTP). In each
 * pair, actor `x` is woken on node `a` and actor `y` on node `b`; then, with
 * `load_gen.ts` in its own process, closed loop over kept-alive connections:
 *
 * - `local`: `GET /actor/testbed/x/rows` sent to `a` (no hop);
 * - `forwarded`: the same request sent to `b`, which forwards it to `a`;
 * - `call`: `GET /actor/testbed/y/call?testbed/x/rows` sent to `b`: y's
 *   event calls x on `a` (a signed call between nodes);
 * - `call-local`: `GET /actor/testbed/x/call?testbed/x2/rows` sent to `a`,
 *   x calling x2 on the same node (the call without the hop).
 *
 * The requests commit nothing (a `SELECT count(*)`), so no replication
 * upload is mixed in. The pairs alternate which goes first from round to
 * round. Reported: median latency with 1 connection, and requests per
 * second with 16; the TLS cost is the difference of the hop cases.
 *
 * The flags are in {@linkcode USAGE} (`--help` prints it).
 *
 * @module
 */

import type { LoadResult } from "./load_gen.ts";
import { benchTempDir, QUICK, runBench } from "./command.ts";
import {
  cpuModel,
  defaultDataRoot,
  flag,
  runLoadProcess,
  type ServerProcess,
  startBenchNode,
  stopAll,
} from "./processes.ts";

/** What `--help` prints. */
export const USAGE =
  `Usage: deno run -A bench/tls_cluster_bench.ts [--quick] [--rounds N] [--data-root DIR]
         [--json FILE]

Requests and calls between two nodes over plain HTTP and over mutual TLS, local against
forwarded, in the same run (about 60 s a round).

  --quick          a short run (1 round, 0.5 s windows) that shows the benchmark works
  --rounds N       rounds, the pairs alternating which goes first (default 3)
  --data-root DIR  where the bucket and the data directories go (default /dev/shm when it exists)
  --json FILE      also writes the measurements to FILE
  -h, --help       show this help`;

/** Connections of the latency case and of the throughput case. */
export const CONNECTIONS = [1, 16] as const;
/** Warm-up of each case, ms (not measured). */
export const WARMUP_MS = QUICK ? 300 : 1_000;
/** Measured window of each case, ms. */
export const DURATION_MS = QUICK ? 500 : 3_000;

type Mode = "plain" | "tls";
const CASES = ["local", "forwarded", "call", "call-local"] as const;
type CaseName = typeof CASES[number];

interface Measured {
  round: number;
  mode: Mode;
  name: CaseName;
  connections: number;
  result: LoadResult;
}

function log(message: string) {
  console.error(`[tls ${new Date().toISOString().slice(11, 19)}] ${message}`);
}

function startNode(mode: Mode, id: string, tmp: string): Promise<ServerProcess> {
  return startBenchNode({
    id,
    bucketUrl: `file://${tmp}/${mode}/bucket`,
    dataDir: `${tmp}/${mode}/${id}`,
    mode,
  });
}

/** GETs `path` through `server`; checks the status and the node that answered. */
async function check(server: ServerProcess, path: string, node: string): Promise<void> {
  const response = await fetch(`${server.url}${path}`);
  const body = (await response.text()).trim();
  const answered = response.headers.get("x-wasmkeep-node");
  if (response.status !== 200 || answered !== node) {
    throw new Error(`${server.name} ${path}: ${response.status} from ${answered}: ${body}`);
  }
}

const call = (target: string) => `call?${encodeURIComponent(target)}`;

function caseOf(name: CaseName, a: ServerProcess, b: ServerProcess) {
  switch (name) {
    case "local":
      return { server: a, path: "/actor/testbed/x/rows" };
    case "forwarded":
      return { server: b, path: "/actor/testbed/x/rows" };
    case "call":
      return { server: b, path: `/actor/testbed/y/${call("testbed/x/rows")}` };
    case "call-local":
      return { server: a, path: `/actor/testbed/x/${call("testbed/x2/rows")}` };
  }
}

function median(values: number[]): number {
  const sorted = [...values].sort((x, y) => x - y);
  return sorted[Math.floor(sorted.length / 2)];
}

async function main() {
  const rounds = Number(flag("rounds") ?? (QUICK ? 1 : 3));
  const tmp = await benchTempDir({
    dir: flag("data-root") ?? defaultDataRoot(),
    prefix: "wk-tlsb-",
  });
  const measured: Measured[] = [];
  try {
    const pairs = {} as Record<Mode, { a: ServerProcess; b: ServerProcess }>;
    for (const mode of ["plain", "tls"] as const) {
      const [a, b] = await Promise.all([startNode(mode, "a", tmp), startNode(mode, "b", tmp)]);
      pairs[mode] = { a, b };
      // Wake x (and x2) on a and y on b, then check every case's route.
      await check(a, "/actor/testbed/x/rows", "a");
      await check(a, "/actor/testbed/x2/rows", "a");
      await check(b, "/actor/testbed/y/rows", "b");
      for (const name of CASES) {
        const { server, path } = caseOf(name, a, b);
        await check(server, path, server === a ? "a" : name === "forwarded" ? "a" : "b");
      }
    }
    // Let the TLS node's readiness wait and first connections settle.
    await new Promise((resolve) => setTimeout(resolve, 2000));
    for (let round = 1; round <= rounds; round++) {
      const order: Mode[] = round % 2 === 1 ? ["plain", "tls"] : ["tls", "plain"];
      for (const mode of order) {
        const { a, b } = pairs[mode];
        for (const name of CASES) {
          const { server, path } = caseOf(name, a, b);
          for (const connections of CONNECTIONS) {
            const result = await runLoadProcess({
              host: server.host,
              port: server.port,
              method: "GET",
              paths: [path],
              connections,
              warmupMs: WARMUP_MS,
              durationMs: DURATION_MS,
            });
            measured.push({ round, mode, name, connections, result });
            log(
              `round ${round} ${mode} ${name} c=${connections}: ${
                result.rps.toFixed(0)
              } req/s p50 ${(result.p50Ms * 1000).toFixed(0)} µs, ${result.errors} errors`,
            );
          }
        }
      }
    }
  } finally {
    await stopAll();
  }

  const p50 = (mode: Mode, name: CaseName) =>
    median(
      measured.filter((m) => m.mode === mode && m.name === name && m.connections === 1)
        .map((m) => m.result.p50Ms * 1000),
    );
  const rps = (mode: Mode, name: CaseName) =>
    median(
      measured.filter((m) => m.mode === mode && m.name === name && m.connections === 16)
        .map((m) => m.result.rps),
    );
  const lines = [
    `bench/tls_cluster_bench.ts --rounds ${rounds} (${cpuModel()}, ${navigator.hardwareConcurrency} cores)`,
    "",
    "| case | plain p50 (µs, 1 conn) | TLS p50 (µs, 1 conn) | TLS − plain (µs) | plain req/s (16 conn) | TLS req/s (16 conn) | TLS / plain |",
    "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
  ];
  for (const name of CASES) {
    const [pp, tp, pr, tr] = [
      p50("plain", name),
      p50("tls", name),
      rps("plain", name),
      rps("tls", name),
    ];
    lines.push(
      `| ${name} | ${pp.toFixed(0)} | ${tp.toFixed(0)} | ${(tp - pp).toFixed(0)} | ${
        pr.toFixed(0)
      } | ${tr.toFixed(0)} | ${(tr / pr * 100).toFixed(1)} % |`,
    );
  }
  const hop = (mode: Mode, hopCase: CaseName, base: CaseName) =>
    p50(mode, hopCase) - p50(mode, base);
  lines.push(
    "",
    `hop of a forwarded request (forwarded − local): plain ${
      hop("plain", "forwarded", "local").toFixed(0)
    } µs, TLS ${
      hop("tls", "forwarded", "local").toFixed(0)
    } µs; hop of a call (call − call-local): plain ${
      hop("plain", "call", "call-local").toFixed(0)
    } µs, TLS ${hop("tls", "call", "call-local").toFixed(0)} µs`,
  );
  if (QUICK) {
    lines.unshift("--quick: a short run that shows the benchmark works; figures not to quote");
  }
  console.log(lines.join("\n"));
  const json = flag("json");
  if (json) await Deno.writeTextFile(json, JSON.stringify(measured, null, 2));
}

if (import.meta.main) await runBench(USAGE, main);
