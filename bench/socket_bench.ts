/**
 * The WebSocket benchmark (issue 18): messages through one room with 100
 * sockets, each socket sending a small text message and waiting for its
 * echo before the next (closed loop), for a fixed window. Three servers in
 * the same run, each loaded by its own load process:
 *
 * - `baseline`: a plain `Deno.upgradeWebSocket` echo server (no actor);
 * - `local`: a WasmKeep node whose testbed actor echoes each message (one
 *   event per message, one actor for the whole room);
 * - `relayed`: the same room reached through a second node, which relays
 *   every socket to the owner.
 *
 * Reported: echoes per second and the p50/p99 of a message's round trip,
 * and each case's echoes per second over the baseline's; and where the CPU
 * goes, in µs per echo over the whole case (warm-up included): the serving
 * process's main thread, its executors, the relaying node (relayed), and
 * the load process itself, which shares the 2 cores. The nodes run on
 * one file bucket (plain HTTP between them, lease ttl 3 s, 1,024 events
 * queued per actor at most: with the default 128, 100 sockets in a closed
 * loop overflow the room's queue, and those sockets close with 1013).
 *
 * The flags are in {@linkcode USAGE} (`--help` prints it).
 *
 * @module
 */

import { cpuModel, flag, startBenchNode, startServer, stopAll, treeCpuMs } from "./processes.ts";
import { benchTempDir, QUICK, runBench, spawnTracked } from "./command.ts";

/** What `--help` prints. */
export const USAGE =
  `Usage: deno run -A bench/socket_bench.ts [--quick] [--rounds N] [--sockets N] [--prof DIR]

Messages through one room of WebSockets: a plain Deno echo server, a WasmKeep node, and the
same room relayed through a second node (about 25 s a round).

  --quick       a short run (1 round, 10 sockets, 1 s windows) that shows the benchmark works
  --rounds N    rounds of the three cases (default 2)
  --sockets N   sockets in the room (default 100)
  --prof DIR    starts the owner, its executors included, with V8's --prof in DIR (one
                isolate-*.log a process, read with node --prof-process)
  -h, --help    show this help

Used internally, by the benchmark's own processes: --role echo, --role load --url URL.`;

/** Sockets in the room. */
export const SOCKETS = QUICK ? 10 : 100;
/** Warm-up of each case, ms (not measured). */
export const WARMUP_MS = QUICK ? 300 : 1_000;
/** Measured window of each case, ms. */
export const DURATION_MS = QUICK ? 1_000 : 5_000;

interface LoadResult {
  messages: number;
  perSecond: number;
  p50Us: number;
  p99Us: number;
  /** The load process's CPU over the case, ms. */
  loadCpuMs: number;
  /** Echoes over the case, warm-up included (what the CPU columns divide by). */
  allMessages: number;
}

/** Where a case's CPU went, ms: the serving node's main thread and executors, the relaying node's. */
interface CaseCpu {
  mainMs: number;
  executorsMs: number;
  relayMs: number;
}

/** The load: `sockets` sockets to `url`, each sending and awaiting its echo until the window ends. */
async function load(url: string, sockets: number): Promise<LoadResult> {
  const times: number[] = [];
  let all = 0;
  const cpuAtStart = treeCpuMs(Deno.pid).selfMs;
  let measuring = false;
  let stopping = false;
  const run = async (index: number) => {
    const socket = new WebSocket(url);
    await new Promise<void>((resolve, reject) => {
      socket.onopen = () => resolve();
      socket.onerror = () => reject(new Error(`socket ${index} to ${url} failed`));
    });
    let sentAt = 0;
    let answered: () => void = () => {};
    socket.onmessage = () => answered();
    while (!stopping) {
      const echoed = new Promise<void>((resolve) => (answered = resolve));
      sentAt = performance.now();
      socket.send(`m${index}`);
      await echoed;
      all++;
      if (measuring) times.push((performance.now() - sentAt) * 1000);
    }
    socket.close();
  };
  const clients = Array.from({ length: sockets }, (_, i) => run(i));
  await new Promise((resolve) => setTimeout(resolve, WARMUP_MS));
  measuring = true;
  await new Promise((resolve) => setTimeout(resolve, DURATION_MS));
  measuring = false;
  stopping = true;
  await Promise.all(clients);
  const loadCpuMs = treeCpuMs(Deno.pid).selfMs - cpuAtStart;
  const sorted = times.sort((x, y) => x - y);
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
  return {
    messages: sorted.length,
    perSecond: sorted.length / (DURATION_MS / 1000),
    p50Us: at(0.5),
    p99Us: at(0.99),
    loadCpuMs,
    allMessages: all,
  };
}

/** Runs the load in a process of its own (so it does not share the bench's event loop). */
async function loadProcess(url: string, sockets: number): Promise<LoadResult> {
  const output = await spawnTracked(
    new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        new URL(import.meta.url).pathname,
        "--role",
        "load",
        "--url",
        url,
        "--sockets",
        String(sockets),
        // The load process times its windows by the same flag.
        ...(QUICK ? ["--quick"] : []),
      ],
      stdout: "piped",
      stderr: "piped",
    }),
  ).output();
  if (!output.success) throw new Error(new TextDecoder().decode(output.stderr));
  return JSON.parse(new TextDecoder().decode(output.stdout).trim().split("\n").pop()!);
}

/** The baseline server: echoes every message on its socket; prints its port. */
function runEchoServer(): void {
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (request) => {
    const { socket, response } = Deno.upgradeWebSocket(request);
    socket.onmessage = (event) => socket.send(event.data);
    return response;
  });
  // On stderr, where startServer looks for it.
  console.error(`listening on http://127.0.0.1:${server.addr.port}`);
}

function startNode(id: string, dir: string, profDir?: string) {
  return startBenchNode({
    id,
    cwd: profDir,
    bucketUrl: `file://${dir}/bucket`,
    dataDir: `${dir}/${id}`,
    mode: "plain",
    // An echo reaches its client before its event's end reaches the node, so
    // each socket can have two events counted at once: room for all.
    extra: ["--max-queued-events", "1024"],
  });
}

async function main(): Promise<void> {
  const rounds = Number(flag("rounds") ?? (QUICK ? 1 : 2));
  const sockets = Number(flag("sockets") ?? SOCKETS);
  const dir = await benchTempDir({ prefix: "wk-socket-bench-" });
  try {
    const echo = await startServer("echo", [
      "run",
      "-A",
      new URL(import.meta.url).pathname,
      "--role",
      "echo",
    ], /listening on (http:\/\/\S+)/);
    const profDir = flag("prof");
    // Through the environment, so that the owner's executors (its child processes) are profiled too.
    if (profDir) Deno.env.set("DENO_V8_FLAGS", "--prof");
    const a = await startNode("a", dir, profDir);
    Deno.env.delete("DENO_V8_FLAGS");
    const b = await startNode("b", dir);
    // The room lives on a.
    await (await fetch(`${a.url}/actor/testbed/room/rows`)).text();
    const ws = (url: string) => url.replace(/^http/, "ws");
    const cases = {
      baseline: `${ws(echo.url)}/`,
      local: `${ws(a.url)}/actor/testbed/room`,
      relayed: `${ws(b.url)}/actor/testbed/room`,
    };
    const results: Record<string, LoadResult[]> = { baseline: [], local: [], relayed: [] };
    const cpu: Record<string, CaseCpu[]> = { baseline: [], local: [], relayed: [] };
    const serving: Record<string, number> = { baseline: echo.pid, local: a.pid, relayed: a.pid };
    for (let round = 1; round <= rounds; round++) {
      for (const [name, url] of Object.entries(cases)) {
        const before = treeCpuMs(serving[name]);
        const relayBefore = treeCpuMs(b.pid);
        const result = await loadProcess(url, sockets);
        const after = treeCpuMs(serving[name]);
        const relayAfter = treeCpuMs(b.pid);
        cpu[name].push({
          mainMs: after.selfMs - before.selfMs,
          executorsMs: after.childrenMs - before.childrenMs,
          relayMs: name === "relayed"
            ? relayAfter.selfMs + relayAfter.childrenMs - relayBefore.selfMs -
              relayBefore.childrenMs
            : 0,
        });
        results[name].push(result);
        console.error(
          `round ${round} ${name}: ${result.perSecond.toFixed(0)} echoes/s, p50 ${
            result.p50Us.toFixed(0)
          } µs, p99 ${result.p99Us.toFixed(0)} µs`,
        );
      }
    }
    const median = (values: number[]) =>
      [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)];
    const base = median(results.baseline.map((r) => r.perSecond));
    const lines = [
      `bench/socket_bench.ts --rounds ${rounds} --sockets ${sockets} (${cpuModel()}, ${navigator.hardwareConcurrency} cores)`,
      "",
      "| case | echoes/s | p50 µs | p99 µs | over the baseline | CPU µs/echo: main | executors | relaying node | load |",
      "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ];
    for (const [name, runs] of Object.entries(results)) {
      const perSecond = median(runs.map((r) => r.perSecond));
      const perEcho = (ms: (i: number) => number) =>
        median(runs.map((r, i) => ms(i) * 1000 / r.allMessages)).toFixed(1);
      lines.push(
        `| ${name} | ${perSecond.toFixed(0)} | ${median(runs.map((r) => r.p50Us)).toFixed(0)} | ${
          median(runs.map((r) => r.p99Us)).toFixed(0)
        } | ${(perSecond / base * 100).toFixed(1)} % | ${perEcho((i) => cpu[name][i].mainMs)} | ${
          perEcho((i) => cpu[name][i].executorsMs)
        } | ${perEcho((i) => cpu[name][i].relayMs)} | ${perEcho((i) => runs[i].loadCpuMs)} |`,
      );
    }
    if (QUICK) {
      lines.unshift("--quick: a short run that shows the benchmark works; figures not to quote");
    }
    console.log(lines.join("\n"));
  } finally {
    await stopAll();
  }
}

const role = flag("role");
if (role === "echo") runEchoServer();
else if (role === "load") {
  console.log(JSON.stringify(await load(flag("url")!, Number(flag("sockets")))));
} else if (import.meta.main) await runBench(USAGE, main);
