/**
 * The counter benchmark: WasmKeep serving `examples/counter/counter.wasm`
 * against a plain `Deno.serve` + `node:sqlite` baseline
 * (`baseline_server.ts`), both as real processes, loaded by
 * `load_gen.ts` in a third process over loopback. Then the memory of
 * 10,000 resident counter actors, and of each part of one alone
 * (`memory_parts.ts`). Stops by itself and removes what it made.
 *
 * The flags are in {@linkcode USAGE} (`--help` prints it).
 *
 * @module
 */

import type { LoadResult, LoadSpec } from "./load_gen.ts";
import { type PartResult, PARTS } from "./memory_parts.ts";
import { benchTempDir, QUICK, runBench, spawnTracked } from "./command.ts";
import {
  cpuModel,
  defaultDataRoot,
  describeTree,
  flag,
  mapLimit,
  metric,
  ROOT,
  runLoadProcess,
  type ServerProcess,
  startServer,
  stopAll,
  treeCpuMs,
  treeMemory,
} from "./processes.ts";

/** What `--help` prints. */
export const USAGE =
  `Usage: deno run -A bench/counter_bench.ts [--quick] [--rounds N] [--data-root DIR]
         [--wasmkeep-root DIR] [--executors N] [--json FILE]

WasmKeep serving examples/counter/counter.wasm against a Deno.serve + node:sqlite
baseline, then the memory of resident actors and of each part alone (about 60 s).

  --quick              a short run (about 30 s) that shows the benchmark works; figures not to quote
  --rounds N           each throughput case N times, WasmKeep and the baseline alternating which
                       goes first; the median of the N ratios (default 1)
  --data-root DIR      where the servers' data directories go (default /dev/shm when it exists,
                       else the system's temporary directory)
  --wasmkeep-root DIR  the checkout whose main.ts is benchmarked (default this one); the baseline
                       and the memory parts always come from this one
  --executors N        passes --executors N to WasmKeep's serve (default its own, one per core)
  --json FILE          also writes the results to FILE
  -h, --help           show this help`;

/** Concurrent connections of the load generator. */
export const CONNECTIONS = 32;
/** Warm-up of each throughput case, ms (not measured). */
export const WARMUP_MS = QUICK ? 1_000 : 2_000;
/** Measured window of each throughput case, ms. */
export const DURATION_MS = QUICK ? 1_500 : 5_000;
/** Actors of the spread case. */
export const SPREAD_ACTORS = QUICK ? 20 : 1_000;
/** Resident actors of the memory case. */
export const RESIDENT_ACTORS = QUICK ? 100 : 10_000;
/** Items of each part in the memory micro-benchmark. */
export const PART_COUNT = QUICK ? 50 : 5_000;

/** The targets of this stage. */
export const TARGETS = { minThroughputRatio: 0.5, maxKiBPerResidentActor: 100 } as const;

const COUNTER_WASM = "examples/counter/counter.wasm";

interface Case {
  name: string;
  server: string;
  result: LoadResult;
  /** Whether the counts read back afterwards equal the 2xx answers sent. */
  countsMatch: boolean;
  /** Server CPU per 2xx answer over the whole run (warm-up included), µs: its main process, its children. */
  cpuUsPerRequest: { main: number; children: number };
}

interface MemoryResult {
  server: string;
  /** Summed VmRSS of the server and its child processes. */
  rssBeforeKiB: number;
  rssAfterKiB: number;
  /** Summed Pss of the same. */
  pssBeforeKiB: number;
  pssAfterKiB: number;
  residentBefore: number;
  residentAfter: number;
  touched: LoadResult;
  kiBPerActor: number;
  /** Processes and threads of the server in the end. */
  processes: number;
  threads: number;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function names(prefix: string, count: number): string[] {
  return Array.from({ length: count }, (_, i) => `${prefix}${i}`);
}

function log(message: string) {
  console.error(`[bench ${new Date().toISOString().slice(11, 19)}] ${message}`);
}

/** The WasmKeep tree under test: `--wasmkeep-root`, else this repository. */
const WASMKEEP_ROOT = flag("wasmkeep-root") ?? ROOT;

/** `--executors N` for WasmKeep, when given. */
const EXECUTORS = flag("executors");

function startWasmKeep(dataDir: string, extra: string[] = []): Promise<ServerProcess> {
  return startServer(
    "wasmkeep",
    [
      "run",
      "-A",
      "main.ts",
      "serve",
      "--actor",
      `counter=${COUNTER_WASM}`,
      "--data-dir",
      dataDir,
      "--listen",
      "127.0.0.1:0",
      // info, not warn: the port is only known from the "node ready" line,
      // and nothing is logged per request at info.
      "--log-level",
      "info",
      ...(EXECUTORS === undefined ? [] : ["--executors", EXECUTORS]),
      ...extra,
    ],
    /node ready .*url=(http:\/\/\S+)/,
    WASMKEEP_ROOT,
  );
}

function startBaseline(dataDir: string, extra: string[] = []): Promise<ServerProcess> {
  return startServer(
    "baseline",
    ["run", "-A", "bench/baseline_server.ts", "--data-dir", dataDir, ...extra],
    /baseline ready url=(http:\/\/\S+)/,
  );
}

function spec(server: ServerProcess, actorNames: string[], overrides: Partial<LoadSpec> = {}) {
  return {
    host: server.host,
    port: server.port,
    method: "POST",
    paths: actorNames.map((name) => `/actor/counter/${name}`),
    connections: CONNECTIONS,
    warmupMs: WARMUP_MS,
    durationMs: DURATION_MS,
    ...overrides,
  } satisfies LoadSpec;
}

/** Sum of the counts of `actorNames` read back with GET. */
async function countSum(server: ServerProcess, actorNames: string[]): Promise<number> {
  const counts = await mapLimit(actorNames, 16, async (name) => {
    const response = await fetch(`${server.url}/actor/counter/${name}`);
    const text = await response.text();
    if (!response.ok) throw new Error(`GET ${name} on ${server.name}: ${response.status} ${text}`);
    return Number(text.trim());
  });
  return counts.reduce((a, b) => a + b, 0);
}

async function throughput(
  server: ServerProcess,
  caseName: string,
  actorNames: string[],
): Promise<Case> {
  log(`${caseName} on ${server.name}: ${CONNECTIONS} connections, ${actorNames.length} actor(s)`);
  const cpu0 = treeCpuMs(server.pid);
  const result = await runLoadProcess(spec(server, actorNames));
  const cpu1 = treeCpuMs(server.pid);
  const cpuUsPerRequest = {
    main: (cpu1.selfMs - cpu0.selfMs) * 1000 / result.total2xx,
    children: (cpu1.childrenMs - cpu0.childrenMs) * 1000 / result.total2xx,
  };
  const counted = await countSum(server, actorNames);
  const countsMatch = counted === result.total2xx;
  log(
    `  ${result.rps.toFixed(0)} req/s, p50 ${result.p50Ms.toFixed(2)} ms, p99 ${
      result.p99Ms.toFixed(2)
    } ms, errors ${result.totalErrors}, counts ${countsMatch ? "match" : "DIFFER"}`,
  );
  return { name: caseName, server: server.name, result, countsMatch, cpuUsPerRequest };
}

async function memoryOf(
  server: ServerProcess,
  prefix: string,
  count: number,
  resident: () => Promise<number>,
): Promise<MemoryResult> {
  const all = names(prefix, count);
  // Warm-up with one actor, which is the first of the actors touched later.
  await runLoadProcess(spec(server, [all[0]], { connections: 8, exactRequests: 500 }));
  await sleep(1000);
  const before = treeMemory(server.pid);
  const residentBefore = await resident();
  log(`memory of ${server.name}: touching ${count} actors once each`);
  const touched = await runLoadProcess(spec(server, all, { exactRequests: count }));
  await sleep(1000);
  const after = treeMemory(server.pid);
  const residentAfter = await resident();
  const added = residentAfter - residentBefore;
  const kiBPerActor = (after.rssKiB - before.rssKiB) / added;
  log(
    `  RSS ${before.rssKiB} -> ${after.rssKiB} KiB over ${after.processes} process(es), ` +
      `resident ${residentBefore} -> ${residentAfter}, ${kiBPerActor.toFixed(1)} KiB each`,
  );
  return {
    server: server.name,
    rssBeforeKiB: before.rssKiB,
    rssAfterKiB: after.rssKiB,
    pssBeforeKiB: before.pssKiB,
    pssAfterKiB: after.pssKiB,
    residentBefore,
    residentAfter,
    touched,
    kiBPerActor,
    processes: after.processes,
    threads: after.threads,
  };
}

async function memoryPart(part: PartResult["part"], dir: string): Promise<PartResult> {
  log(`memory part: ${PART_COUNT} ${part} alone`);
  const output = await spawnTracked(
    new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        "--v8-flags=--expose-gc",
        `${ROOT}bench/memory_parts.ts`,
        part,
        String(PART_COUNT),
        dir,
      ],
      stdout: "piped",
      stderr: "piped",
    }),
  ).output();
  if (!output.success) {
    throw new Error(`memory_parts.ts ${part} failed:\n${new TextDecoder().decode(output.stderr)}`);
  }
  const result = JSON.parse(new TextDecoder().decode(output.stdout).trim()) as PartResult;
  log(
    `  ${result.rssKiBPerItem.toFixed(1)} KiB RSS each (JS heap ${
      result.heapKiBPerItem.toFixed(1)
    } KiB)`,
  );
  return result;
}

const f0 = (n: number) => n.toFixed(0);
const f2 = (n: number) => n.toFixed(2);

function report(cases: Case[], memory: MemoryResult[], parts: PartResult[], dataRoot: string) {
  const lines: string[] = [];
  if (QUICK) {
    lines.push("--quick: a short run that shows the benchmark works; figures not to quote");
  }
  lines.push(
    `Machine: ${navigator.hardwareConcurrency} cores (${cpuModel()}), Deno ${Deno.version.deno}, ` +
      `${new Date().toISOString()}, data on ${dataRoot}`,
  );
  lines.push(
    `Load: ${CONNECTIONS} keep-alive connections, ${WARMUP_MS / 1000} s warm-up, ` +
      `${DURATION_MS / 1000} s measured, POST /actor/counter/<name>`,
  );
  lines.push(`WasmKeep under test: ${describeTree(WASMKEEP_ROOT)}`);
  if (EXECUTORS !== undefined) lines.push(`WasmKeep flags: --executors ${EXECUTORS}`);
  lines.push("");
  lines.push(
    "| case | server | req/s | p50 ms | p99 ms | max ms | errors | counts check | CPU µs/req main + children |",
  );
  lines.push("|---|---|---:|---:|---:|---:|---:|---|---|");
  for (const c of cases) {
    const r = c.result;
    lines.push(
      `| ${c.name} | ${c.server} | ${f0(r.rps)} | ${f2(r.p50Ms)} | ${f2(r.p99Ms)} | ${
        f2(r.maxMs)
      } | ${r.totalErrors} | ${c.countsMatch ? "ok" : "MISMATCH"} | ${
        f0(c.cpuUsPerRequest.main)
      } + ${f0(c.cpuUsPerRequest.children)} |`,
    );
  }
  lines.push("");
  const ratios: number[] = [];
  for (const name of new Set(cases.map((c) => c.name))) {
    const wk = cases.filter((c) => c.name === name && c.server === "wasmkeep");
    const base = cases.filter((c) => c.name === name && c.server === "baseline");
    const each = wk.map((c, i) => c.result.rps / base[i].result.rps).sort((a, b) => a - b);
    const ratio = each[Math.floor(each.length / 2)];
    ratios.push(ratio);
    const spread = each.length > 1
      ? ` (median of ${each.length} rounds: ${each.map((r) => (r * 100).toFixed(1)).join(", ")} %)`
      : "";
    lines.push(
      `Throughput WasmKeep/baseline, ${name}: ${(ratio * 100).toFixed(1)} %${spread} ` +
        `(target >= ${TARGETS.minThroughputRatio * 100} %: ${
          ratio >= TARGETS.minThroughputRatio ? "met" : "NOT met"
        })`,
    );
  }
  lines.push("");
  lines.push(
    "| memory | RSS before KiB | RSS after KiB | resident/open before | after | RSS KiB each | PSS KiB each | processes/threads |",
  );
  lines.push("|---|---:|---:|---:|---:|---:|---:|---|");
  for (const m of memory) {
    const pssEach = (m.pssAfterKiB - m.pssBeforeKiB) / (m.residentAfter - m.residentBefore);
    lines.push(
      `| ${m.server} | ${m.rssBeforeKiB} | ${m.rssAfterKiB} | ${m.residentBefore} | ${m.residentAfter} | ${
        m.kiBPerActor.toFixed(1)
      } | ${pssEach.toFixed(1)} | ${m.processes}/${m.threads} |`,
    );
  }
  const wkMemory = memory.find((m) => m.server === "wasmkeep")!;
  lines.push("");
  lines.push(
    `WasmKeep per resident actor: ${wkMemory.kiBPerActor.toFixed(1)} KiB ` +
      `(wasmkeep_resident_actors = ${wkMemory.residentAfter}, expected ${RESIDENT_ACTORS}; ` +
      `target < ${TARGETS.maxKiBPerResidentActor} KiB: ${
        wkMemory.residentAfter === RESIDENT_ACTORS &&
          wkMemory.kiBPerActor < TARGETS.maxKiBPerResidentActor
          ? "met"
          : "NOT met"
      })`,
  );
  lines.push("");
  lines.push("| part alone (N = " + PART_COUNT + ") | RSS KiB each | JS heap KiB each | ms each |");
  lines.push("|---|---:|---:|---:|");
  for (const p of parts) {
    lines.push(
      `| ${p.part} | ${p.rssKiBPerItem.toFixed(1)} | ${p.heapKiBPerItem.toFixed(1)} | ${
        p.msPerItem.toFixed(3)
      } |`,
    );
  }
  return { text: lines.join("\n"), ratios };
}

async function main() {
  const dataRoot = flag("data-root") ?? defaultDataRoot();
  const jsonFile = flag("json");
  const tmp = await benchTempDir({ prefix: "wasmkeep-bench-", dir: dataRoot });
  const cases: Case[] = [];
  const memory: MemoryResult[] = [];
  const parts: PartResult[] = [];
  const started = performance.now();
  try {
    log(`data in ${tmp}`);
    const [wasmkeep, baseline] = await Promise.all([
      startWasmKeep(`${tmp}/wasmkeep`),
      startBaseline(`${tmp}/baseline`),
    ]);
    const rounds = Math.max(1, Number(flag("rounds") ?? 1));
    for (let round = 1; round <= rounds; round++) {
      // Fresh actor names each round, so each round's counts check stands alone.
      const spread = names(`s${round}-`, SPREAD_ACTORS);
      for (
        const [caseName, actorNames] of [
          ["1 hot actor", [`hot${round}`]],
          [`${SPREAD_ACTORS.toLocaleString("en-US")} actors`, spread],
        ] as const
      ) {
        const order = round % 2 === 1 ? [wasmkeep, baseline] : [baseline, wasmkeep];
        for (const server of order) cases.push(await throughput(server, caseName, [...actorNames]));
      }
    }
    await Promise.all([wasmkeep.stop(), baseline.stop()]);

    const node = await startWasmKeep(`${tmp}/wasmkeep-memory`, [
      "--max-resident-actors",
      String(RESIDENT_ACTORS),
      "--idle-secs",
      "3600",
    ]);
    memory.push(
      await memoryOf(
        node,
        "m",
        RESIDENT_ACTORS,
        async () => (await metric(node.url, "wasmkeep_resident_actors")) ?? NaN,
      ),
    );
    await node.stop();

    // The baseline keeps at most 5,000 databases open at this open-file
    // limit (as WasmKeep does), so its per-actor figure is per open database.
    const base = await startBaseline(`${tmp}/baseline-memory`);
    const maxOpen = Number(base.logs().match(/max_open=(\d+)/)?.[1]);
    memory.push(
      await memoryOf(
        base,
        "m",
        Math.min(RESIDENT_ACTORS, maxOpen),
        async () => Number(await (await fetch(`${base.url}/open`)).text()),
      ),
    );
    await base.stop();

    for (const part of PARTS) {
      parts.push(await memoryPart(part, tmp));
    }
  } finally {
    await stopAll();
  }
  const { text } = report(cases, memory, parts, dataRoot ?? "the temporary directory");
  console.log(text);
  console.log(`\nTook ${((performance.now() - started) / 1000).toFixed(0)} s.`);
  if (jsonFile) {
    await Deno.writeTextFile(
      jsonFile,
      JSON.stringify({ cases, memory, parts, cpu: cpuModel() }, null, 2),
    );
  }
}

if (import.meta.main) await runBench(USAGE, main);
