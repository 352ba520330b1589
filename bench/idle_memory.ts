/**
 * What an idle node costs in memory: the demo (`deno task demo`'s node, one
 * counter actor) after one request to `/actor/counter/x`, once idle, read
 * from `/proc` for the node and each of its descendants (its executors), and
 * with `--task` for the `deno task` wrapper too. Each process's `VmRSS`,
 * `RssAnon` and `RssFile` of `/proc/PID/status` and its `Pss` of
 * `/proc/PID/smaps_rollup` (the pages it shares with other processes, such as
 * the `deno` binary's, split between them). Linux only.
 *
 * Runs:
 * - `cold`: a fresh data directory, so the component is transpiled first;
 * - `warm`: the same directory again, the transpile cached;
 * - `task`: the warm run started as `deno task serve ...`, the wrapper counted;
 * - `parts`: what a fresh `deno` process holds after importing one part
 *   (nothing, the executor's modules, the node's modules, a Worker), with
 *   V8's heap (`Deno.memoryUsage()` after the import).
 *
 * Usage: `deno run -A bench/idle_memory.ts [--quick] [--idle-ms N] [--json]`.
 * `--quick` runs `cold` only, idle 2 s. See docs/performance.md "Idle memory".
 *
 * @module
 */

import { benchTempDir, endBench, onCleanup, QUICK, startBench } from "./command.ts";
import { processTree, ROOT, type ServerProcess, startServer, stopAll } from "./processes.ts";

const HELP = `Usage: deno run -A bench/idle_memory.ts [--quick] [--idle-ms N] [--json]

The memory of an idle demo node (node + executors), from /proc.

  --quick      a short run: the cold run only (fresh data directory), idle 2 s: about 15 s
  --idle-ms N  how long the node idles after its one request (default 5000)
  --json       one JSON line per run instead of the table
  --help       this text

Runs cold (a fresh data directory), warm (its cache), task (warm, under
'deno task serve', the wrapper counted) and parts (what a fresh deno process
holds after importing a part). Linux only.`;

/** One process's memory, KiB. */
export interface ProcessMemory {
  role: "wrapper" | "node" | "executor" | "other";
  pid: number;
  rssKiB: number;
  anonKiB: number;
  fileKiB: number;
  pssKiB: number;
}

/** One run: its processes and their sums, KiB. */
export interface IdleRun {
  run: string;
  processes: ProcessMemory[];
  /** Summed VmRSS of the node and its executors. */
  nodeRssKiB: number;
  /** The same with the `deno task` wrapper, when there is one. */
  totalRssKiB: number;
  /** Summed Pss of every process of the run. */
  totalPssKiB: number;
  /** The one request's time, ms: it starts the actor's executor. */
  firstRequestMs: number;
}

function statusKiB(text: string, field: string): number {
  return Number(text.match(new RegExp(`^${field}:\\s+(\\d+) kB`, "m"))?.[1] ?? 0);
}

/**
 * The memory of process `pid` from `/proc`, or undefined once it is gone.
 *
 * @example
 * ```ts ignore
 * const me = processMemory(Deno.pid, "other");
 * console.log(me?.rssKiB);
 * ```
 */
export function processMemory(pid: number, role: ProcessMemory["role"]): ProcessMemory | undefined {
  try {
    const status = Deno.readTextFileSync(`/proc/${pid}/status`);
    const rollup = Deno.readTextFileSync(`/proc/${pid}/smaps_rollup`);
    return {
      role,
      pid,
      rssKiB: statusKiB(status, "VmRSS"),
      anonKiB: statusKiB(status, "RssAnon"),
      fileKiB: statusKiB(status, "RssFile"),
      pssKiB: statusKiB(rollup, "Pss"),
    };
  } catch {
    return undefined;
  }
}

function roleOf(pid: number, wrapper: boolean, root: number): ProcessMemory["role"] {
  const args = Deno.readTextFileSync(`/proc/${pid}/cmdline`).split("\0");
  if (args.includes("serve")) {
    return pid === root && wrapper && args.includes("task") ? "wrapper" : "node";
  }
  if (args.some((arg) => arg.endsWith("executor/main.ts") || arg === "__executor")) {
    return "executor";
  }
  return "other";
}

async function idleRun(
  run: string,
  dataDir: string,
  idleMs: number,
  task: boolean,
): Promise<IdleRun> {
  const serve = [
    "--actor",
    `counter=${ROOT}examples/counter/counter.wasm`,
    "--data-dir",
    dataDir,
    "--listen",
    "127.0.0.1:0",
  ];
  const args = task ? ["task", "serve", ...serve] : ["run", "-A", "main.ts", "serve", ...serve];
  const server: ServerProcess = await startServer(run, args, /node ready .*url=(http:\S+)/);
  try {
    const started = performance.now();
    const answer = await fetch(`${server.url}/actor/counter/x`, { method: "POST" });
    await answer.body?.cancel();
    const firstRequestMs = Math.round(performance.now() - started);
    if (!answer.ok) throw new Error(`POST /actor/counter/x answered ${answer.status}`);
    await new Promise((resolve) => setTimeout(resolve, idleMs));
    const processes = processTree(server.pid)
      .map((pid) => processMemory(pid, roleOf(pid, task, server.pid)))
      .filter((memory) => memory !== undefined);
    const sum = (list: ProcessMemory[], field: "rssKiB" | "pssKiB") =>
      list.reduce((total, memory) => total + memory[field], 0);
    return {
      run,
      processes,
      nodeRssKiB: sum(processes.filter((memory) => memory.role !== "wrapper"), "rssKiB"),
      totalRssKiB: sum(processes, "rssKiB"),
      totalPssKiB: sum(processes, "pssKiB"),
      firstRequestMs,
    };
  } finally {
    await server.stop();
  }
}

/** The parts a fresh process imports in `parts`, by name. */
const PARTS: Record<string, string | undefined> = {
  "deno alone": undefined,
  "executor modules": `${ROOT}src/executor/main.ts`,
  "node modules": `${ROOT}main.ts`,
  "a Worker": "worker",
};

/** In a child: imports one part, settles, prints its memory and V8's heap. */
async function measurePart(part: string): Promise<void> {
  if (part === "worker") {
    new Worker("data:application/javascript,setInterval(() => {}, 1000)", { type: "module" });
  } else if (part !== "none") {
    await import(part);
  }
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const memory = processMemory(Deno.pid, "other")!;
  const heap = Deno.memoryUsage();
  console.log(JSON.stringify({
    ...memory,
    heapUsedKiB: Math.round(heap.heapUsed / 1024),
    heapTotalKiB: Math.round(heap.heapTotal / 1024),
    externalKiB: Math.round(heap.external / 1024),
  }));
  Deno.exit(0);
}

async function parts(): Promise<Record<string, unknown>[]> {
  const results = [];
  for (const [name, module] of Object.entries(PARTS)) {
    const output = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", import.meta.filename!, "--part", module ?? "none"],
      stdin: "null",
      stderr: "inherit",
    }).output();
    results.push({ part: name, ...JSON.parse(new TextDecoder().decode(output.stdout)) });
  }
  return results;
}

const mib = (kib: number) => (kib / 1024).toFixed(1);

function printRun(result: IdleRun): void {
  console.log(`\n${result.run}:`);
  for (const memory of result.processes) {
    console.log(
      `  ${memory.role.padEnd(9)} pid ${String(memory.pid).padEnd(8)} RSS ${
        mib(memory.rssKiB)
      } MiB` +
        ` (anon ${mib(memory.anonKiB)}, file ${mib(memory.fileKiB)}), PSS ${
          mib(memory.pssKiB)
        } MiB`,
    );
  }
  console.log(`  node + executors: RSS ${mib(result.nodeRssKiB)} MiB`);
  if (result.totalRssKiB !== result.nodeRssKiB) {
    console.log(`  with the wrapper: RSS ${mib(result.totalRssKiB)} MiB`);
  }
  console.log(`  all, PSS: ${mib(result.totalPssKiB)} MiB`);
  console.log(`  the request (starting the executor): ${result.firstRequestMs} ms`);
}

if (import.meta.main) {
  const args = Deno.args;
  if (args[0] === "--part") await measurePart(args[1]);
  // The benchmarks' command line (bench/command.ts): --help, --quick, and
  // the cleanups at the end or on SIGINT and SIGTERM.
  startBench(HELP);
  const idleAt = args.indexOf("--idle-ms");
  const short = QUICK;
  const idleMs = idleAt >= 0 ? Number(args[idleAt + 1]) : short ? 2000 : 5000;
  if (!(idleMs >= 0)) {
    console.error(`idle_memory: --idle-ms takes milliseconds, not '${args[idleAt + 1]}'`);
    Deno.exit(2);
  }
  if (Deno.build.os !== "linux") {
    console.error("idle_memory: reads /proc, so it runs on Linux only");
    Deno.exit(2);
  }
  const json = args.includes("--json");
  const dir = await benchTempDir({ prefix: "wasmkeep-idle-" });
  onCleanup(stopAll);
  try {
    const runs: [string, boolean][] = short
      ? [["cold", false]]
      : [["cold", false], ["warm", false], ["task", true]];
    for (const [run, task] of runs) {
      const result = await idleRun(run, `${dir}/data`, idleMs, task);
      if (json) console.log(JSON.stringify(result));
      else printRun(result);
    }
    if (!short) {
      for (const part of await parts()) {
        if (json) console.log(JSON.stringify(part));
        else {
          const p = part as unknown as ProcessMemory & { part: string; heapUsedKiB: number };
          console.log(
            `part ${p.part.padEnd(17)} RSS ${mib(p.rssKiB)} MiB (anon ${mib(p.anonKiB)}, file ${
              mib(p.fileKiB)
            }), V8 heap used ${mib(p.heapUsedKiB)} MiB`,
          );
        }
      }
    }
  } finally {
    await endBench();
  }
}
