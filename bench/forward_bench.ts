/**
 * The forwarding benchmark (issue 5): what a request forwarded from one
 * node to the node that holds its actor costs over the same request sent
 * to the holder directly.
 *
 * Two WasmKeep nodes, `a` and `b`, run as real processes on one file bucket
 * (plain HTTP between them, lease ttl 3 s, as `test/node/cluster_test.ts`
 * starts them), serving the host's test component
 * (`test/fixtures/components/testbed.wasm`). One actor is woken on `a`;
 * then `GET /actor/testbed/<name>/rows` (a `SELECT count(*)`, which commits
 * nothing, so no replication upload is mixed into the hop) is sent by
 * `load_gen.ts` in its own process to `a` (direct) and to `b`, which reads
 * the actor's ownership record and forwards the request to `a`.
 *
 * In the same run, the hop alone outside WasmKeep: a trivial `Deno.serve`
 * echo that answers `0`, and a trivial `Deno.serve` proxy that forwards
 * every request to it with WasmKeep's `Forwarder` (`src/http/forward.ts`),
 * the way `ClusterPlane.forward` does.
 *
 * Each case runs closed-loop with 1 connection (latency) and with 32
 * (throughput); direct and forwarded (echo and proxy) alternate which goes
 * first from round to round. CPU per request is read from `/proc/PID/stat`
 * of every server before and after each case.
 *
 * The flags are in {@linkcode USAGE} (`--help` prints it).
 *
 * @module
 */

import type { LoadResult, LoadSpec } from "./load_gen.ts";
import { benchTempDir, QUICK, runBench } from "./command.ts";
import {
  cpuModel,
  defaultDataRoot,
  describeTree,
  flag,
  ROOT,
  runLoadProcess,
  type ServerProcess,
  startBenchNode,
  startServer,
  stopAll,
  treeCpuMs,
} from "./processes.ts";
import { Forwarder, type ForwardRequest } from "../src/http/forward.ts";
import { FileBucket } from "../src/bucket/file.ts";
import { ownerKey } from "../src/bucket/keys.ts";
import { DEFAULT_TENANT } from "../src/actors/key.ts";

/** What `--help` prints. */
export const USAGE =
  `Usage: deno run -A bench/forward_bench.ts [--quick] [--rounds N] [--data-root DIR]
         [--wasmkeep-root DIR] [--json FILE]

A request forwarded from one node to the holder of its actor against the same request sent
to the holder directly, and the hop alone outside WasmKeep (about 45 s a round).

  --quick              a short run (about 30 s) that shows the benchmark works; figures not to quote
  --rounds N           each case N times, direct and forwarded alternating which goes first (default 1)
  --data-root DIR      where the bucket and the data directories go (default /dev/shm when it exists)
  --wasmkeep-root DIR  the checkout whose main.ts the nodes run (default this one); the echo, the
                       proxy and its Forwarder always come from this one
  --json FILE          also writes the results to FILE
  -h, --help           show this help

Used internally, by the benchmark's own processes: --role echo, --role proxy --target URL.`;

/** Connections of the latency case and of the throughput case. */
export const CONNECTIONS = [1, 32] as const;
/** Warm-up of each case, ms (not measured). */
export const WARMUP_MS = QUICK ? 500 : 1_000;
/** Measured window of each case, ms. */
export const DURATION_MS = QUICK ? 1_000 : 4_000;
/** Sequential reads of the owner record timed in process. */
export const RECORD_READS = QUICK ? 500 : 5_000;

const ACTOR = "fwd";
const ACTOR_PATH = `/actor/testbed/${ACTOR}/rows`;

type Pair = "wasmkeep" | "hop";
type Side = "direct" | "forwarded";

interface Case {
  round: number;
  pair: Pair;
  side: Side;
  /** Server the load was sent to. */
  server: string;
  connections: number;
  result: LoadResult;
  /** CPU µs per 2xx answer (warm-up included), main process of each server, and their children. */
  cpuUs: Record<string, { main: number; children: number }>;
}

interface RecordReads {
  reads: number;
  wallUsEach: number;
  cpuUsEach: number;
}

function log(message: string) {
  console.error(`[forward ${new Date().toISOString().slice(11, 19)}] ${message}`);
}

// ---------------------------------------------------------------------------
// The hop outside WasmKeep: an echo and a proxy using our Forwarder.

function runEcho() {
  const body = new TextEncoder().encode("0");
  Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    onListen: ({ hostname, port }) => console.error(`echo ready url=http://${hostname}:${port}`),
  }, () =>
    new Response(body, {
      headers: { "content-type": "text/plain; charset=utf-8", "x-wasmkeep-node": "echo" },
    }));
}

function runProxy(target: string) {
  const forwarder = new Forwarder({ nodeId: "proxy" });
  const empty = new Uint8Array(0);
  Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    onListen: ({ hostname, port }) => console.error(`proxy ready url=http://${hostname}:${port}`),
  }, async (request) => {
    // What the client handler and ClusterPlane.forward do with a request
    // and its answer, without the actor routing.
    const url = new URL(request.url);
    const headers: [string, string][] = [];
    request.headers.forEach((value, name) => headers.push([name, value]));
    const body = request.body ? new Uint8Array(await request.arrayBuffer()) : empty;
    const forward: ForwardRequest = {
      method: request.method,
      path: url.pathname + url.search,
      headers,
      body,
    };
    const result = await forwarder.forward(target, forward, { signal: request.signal });
    if (result.kind !== "response") {
      return new Response(`forwarding failed: ${JSON.stringify(result)}\n`, { status: 503 });
    }
    return new Response(result.body as Uint8Array<ArrayBuffer>, {
      status: result.status,
      headers: result.headers.filter(([name]) => name !== "content-length"),
    });
  });
}

// ---------------------------------------------------------------------------
// The benchmark.

/** The WasmKeep tree under test: `--wasmkeep-root`, else this repository. */
const WASMKEEP_ROOT = flag("wasmkeep-root") ?? ROOT;

function startNode(id: string, tmp: string): Promise<ServerProcess> {
  return startBenchNode({
    id,
    bucketUrl: `file://${tmp}/bucket`,
    dataDir: `${tmp}/${id}`,
    mode: "plain",
    root: WASMKEEP_ROOT,
    // The port is only known from the "node ready" line; nothing is logged
    // per request at info.
    extra: ["--log-level", "info"],
  });
}

/** GETs the actor's path through `server` and checks that `a` answered `0`. */
async function check(server: ServerProcess, expectedNode: string): Promise<void> {
  const response = await fetch(`${server.url}${ACTOR_PATH}`);
  const body = (await response.text()).trim();
  const node = response.headers.get("x-wasmkeep-node");
  if (response.status !== 200 || body !== "0" || node !== expectedNode) {
    throw new Error(
      `GET ${ACTOR_PATH} on ${server.name}: ${response.status} ${JSON.stringify(body)} ` +
        `from node ${node}, expected 200 "0" from ${expectedNode}`,
    );
  }
}

async function runCase(
  round: number,
  pair: Pair,
  side: Side,
  target: ServerProcess,
  connections: number,
  servers: ServerProcess[],
): Promise<Case> {
  const spec: LoadSpec = {
    host: target.host,
    port: target.port,
    method: "GET",
    paths: [ACTOR_PATH],
    connections,
    warmupMs: WARMUP_MS,
    durationMs: DURATION_MS,
  };
  const before = servers.map((s) => treeCpuMs(s.pid));
  const result = await runLoadProcess(spec);
  const after = servers.map((s) => treeCpuMs(s.pid));
  const cpuUs: Case["cpuUs"] = {};
  servers.forEach((s, i) => {
    cpuUs[s.name] = {
      main: (after[i].selfMs - before[i].selfMs) * 1000 / result.total2xx,
      children: (after[i].childrenMs - before[i].childrenMs) * 1000 / result.total2xx,
    };
  });
  if (result.totalErrors > 0) {
    throw new Error(
      `${pair} ${side} on ${target.name}: ${result.totalErrors} answers were not 2xx: ` +
        JSON.stringify(result.statuses),
    );
  }
  log(
    `round ${round} ${pair} ${side} (${target.name}) c=${connections}: ${
      result.rps.toFixed(0)
    } req/s, p50 ${(result.p50Ms * 1000).toFixed(0)} µs, p99 ${
      (result.p99Ms * 1000).toFixed(0)
    } µs`,
  );
  return { round, pair, side, server: target.name, connections, result, cpuUs };
}

/** CPU time of this process (all its threads) so far, ms. */
function selfCpuMs(): number {
  const stat = Deno.readTextFileSync("/proc/self/stat");
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/**
 * What `b`'s router pays per forwarded request before the hop: one
 * `FileBucket.get` of the actor's ownership record (b reads it on every
 * request for an actor it does not hold), timed here in process on the
 * same bucket, sequentially.
 */
async function timeRecordReads(bucketRoot: string): Promise<RecordReads> {
  const bucket = new FileBucket(bucketRoot);
  const key = ownerKey({ tenant: DEFAULT_TENANT, class: "testbed", name: ACTOR });
  if (!(await bucket.get(key))) throw new Error(`no ownership record at ${key}`);
  for (let i = 0; i < 500; i++) await bucket.get(key);
  const cpu0 = selfCpuMs();
  const t0 = performance.now();
  for (let i = 0; i < RECORD_READS; i++) await bucket.get(key);
  const wallMs = performance.now() - t0;
  const cpuMs = selfCpuMs() - cpu0;
  return {
    reads: RECORD_READS,
    wallUsEach: wallMs * 1000 / RECORD_READS,
    cpuUsEach: cpuMs * 1000 / RECORD_READS,
  };
}

function median(values: number[]): number {
  const sorted = [...values].sort((x, y) => x - y);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** Mean latency of a closed loop, µs: connections × time / answers (Little's law). */
function meanUs(c: Case): number {
  return c.connections * c.result.seconds * 1e6 / c.result.requests;
}

const us = (ms: number) => ms * 1000;
const f0 = (n: number) => Math.round(n).toLocaleString("en-US");
const signed = (n: number) => (n >= 0 ? "+" : "") + f0(n);

function report(cases: Case[], reads: RecordReads, dataRoot: string, rounds: number): string {
  const lines: string[] = [];
  lines.push(
    `Machine: ${navigator.hardwareConcurrency} cores (${cpuModel()}), Deno ${Deno.version.deno}, ` +
      `${new Date().toISOString()}, data on ${dataRoot}`,
  );
  lines.push(`Nodes run ${describeTree(WASMKEEP_ROOT)}; echo and proxy from ${describeTree(ROOT)}`);
  lines.push(
    `Load: load_gen.ts, closed loop, ${WARMUP_MS / 1000} s warm-up + ${
      DURATION_MS / 1000
    } s measured per case, GET ${ACTOR_PATH}; ${rounds} round(s)`,
  );
  lines.push("");
  lines.push(
    "| round | pair | side | conns | req/s | p50 µs | p99 µs | mean µs | CPU µs/req main (children) |",
  );
  lines.push("|---:|---|---|---:|---:|---:|---:|---:|---|");
  for (const c of cases) {
    const cpu = Object.entries(c.cpuUs)
      .filter(([name]) =>
        c.pair === "wasmkeep" ? name === "a" || name === "b" : name === "echo" || name === "proxy"
      )
      .map(([name, v]) =>
        `${name} ${f0(v.main)}` + (name === "a" || name === "b" ? ` (${f0(v.children)})` : "")
      )
      .join(", ");
    lines.push(
      `| ${c.round} | ${c.pair} | ${c.side} (${c.server}) | ${c.connections} | ${
        f0(c.result.rps)
      } | ${f0(us(c.result.p50Ms))} | ${f0(us(c.result.p99Ms))} | ${f0(meanUs(c))} | ${cpu} |`,
    );
  }
  lines.push("");
  lines.push(
    "Forwarded − direct, median over rounds of each round's difference (round values in brackets):",
  );
  lines.push("");
  lines.push(
    "| pair | conns | added p50 µs | added p99 µs | added mean µs | throughput forwarded / direct | CPU µs/req of the forwarding process, main |",
  );
  lines.push("|---|---:|---:|---:|---:|---:|---:|");
  for (const pair of ["wasmkeep", "hop"] as const) {
    for (const connections of CONNECTIONS) {
      const pick = (side: Side) =>
        cases.filter((c) => c.pair === pair && c.side === side && c.connections === connections);
      const direct = pick("direct");
      const forwarded = pick("forwarded");
      const diff = (f: (c: Case) => number) => forwarded.map((c, i) => f(c) - f(direct[i]));
      const fmt = (values: number[], format: (n: number) => string) =>
        `${format(median(values))} (${values.map(format).join(", ")})`;
      const p50 = diff((c) => us(c.result.p50Ms));
      const p99 = diff((c) => us(c.result.p99Ms));
      const mean = diff(meanUs);
      const ratio = forwarded.map((c, i) => c.result.rps / direct[i].result.rps);
      const forwarder = pair === "wasmkeep" ? "b" : "proxy";
      const cpu = forwarded.map((c) => c.cpuUs[forwarder].main);
      lines.push(
        `| ${pair} | ${connections} | ${fmt(p50, signed)} | ${fmt(p99, signed)} | ${
          fmt(mean, signed)
        } | ${fmt(ratio, (r) => `${(r * 100).toFixed(1)} %`)} | ${forwarder}: ${fmt(cpu, f0)} |`,
      );
    }
  }
  lines.push("");
  lines.push(
    `In process, FileBucket.get of the actor's ownership record (what b's router reads for every ` +
      `request it forwards), ${reads.reads} sequential reads: ${
        reads.wallUsEach.toFixed(1)
      } µs wall, ${reads.cpuUsEach.toFixed(1)} µs CPU each.`,
  );
  return lines.join("\n");
}

async function main() {
  const dataRoot = flag("data-root") ?? defaultDataRoot();
  const jsonFile = flag("json");
  const rounds = Math.max(1, Number(flag("rounds") ?? 1));
  const tmp = await benchTempDir({ prefix: "wasmkeep-forward-", dir: dataRoot });
  const started = performance.now();
  const cases: Case[] = [];
  let reads: RecordReads;
  try {
    log(`data in ${tmp}; starting nodes a and b (the node id check takes about 4.5 s)`);
    const self = new URL(import.meta.url).pathname;
    const [a, b, echo] = await Promise.all([
      startNode("a", tmp),
      startNode("b", tmp),
      startServer("echo", ["run", "-A", self, "--role", "echo"], /echo ready url=(\S+)/),
    ]);
    const proxy = await startServer(
      "proxy",
      ["run", "-A", self, "--role", "proxy", "--target", echo.url],
      /proxy ready url=(\S+)/,
    );
    const servers = [a, b, echo, proxy];
    // Wake the actor on a (it takes the ownership record), then b forwards to it.
    await check(a, "a");
    await check(b, "a");
    const first = await fetch(`${proxy.url}${ACTOR_PATH}`);
    if ((await first.text()) !== "0") throw new Error("the proxy did not answer 0");
    for (let round = 1; round <= rounds; round++) {
      for (const connections of CONNECTIONS) {
        for (
          const [pair, direct, forwarded] of [
            ["wasmkeep", a, b],
            ["hop", echo, proxy],
          ] as const
        ) {
          const order: [Side, ServerProcess][] = [["direct", direct], ["forwarded", forwarded]];
          if (round % 2 === 0) order.reverse();
          for (const [side, target] of order) {
            cases.push(await runCase(round, pair, side, target, connections, servers));
          }
        }
      }
      // Still held by a, still forwarded by b.
      await check(a, "a");
      await check(b, "a");
    }
    log("timing reads of the ownership record in process");
    reads = await timeRecordReads(`${tmp}/bucket`);
    if (/forwarding failed/.test(b.logs())) {
      throw new Error(`b logged a failed forward:\n${b.logs().slice(-2000)}`);
    }
  } finally {
    await stopAll();
  }
  if (QUICK) {
    console.log("--quick: a short run that shows the benchmark works; figures not to quote");
  }
  console.log(report(cases, reads, dataRoot ?? "the temporary directory", rounds));
  console.log(`\nTook ${((performance.now() - started) / 1000).toFixed(0)} s.`);
  if (jsonFile) {
    await Deno.writeTextFile(
      jsonFile,
      JSON.stringify({ cases, reads, cpu: cpuModel() }, null, 2),
    );
  }
}

if (import.meta.main) {
  const role = flag("role");
  if (role === "echo") runEcho();
  else if (role === "proxy") runProxy(flag("target")!);
  else await runBench(USAGE, main);
}
