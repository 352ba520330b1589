/**
 * Child processes of the benchmark: servers started and stopped by pid,
 * the load generator run to completion, and readings from `/proc`.
 *
 * @module
 */

import { freePort } from "../src/testing/loopback.ts";
import type { LoadResult, LoadSpec } from "./load_gen.ts";
import { onCleanup, spawnTracked } from "./command.ts";

/** The repository root. */
export const ROOT: string = new URL("../", import.meta.url).pathname;

const START_TIMEOUT_MS = 60_000;
const STOP_TIMEOUT_MS = 15_000;

/** A server process under test. */
export interface ServerProcess {
  name: string;
  url: string;
  host: string;
  port: number;
  pid: number;
  /** Its stderr so far. */
  logs(): string;
  /** SIGTERM, then SIGKILL if it has not exited within 15 s. */
  stop(): Promise<Deno.CommandStatus>;
}

const running = new Set<ServerProcess>();

/**
 * Starts `deno ARGS` and waits until its stderr matches `ready`, whose first
 * group must be the server's `http://HOST:PORT`.
 */
export async function startServer(
  name: string,
  args: string[],
  ready: RegExp,
  cwd: string = ROOT,
): Promise<ServerProcess> {
  const child = new Deno.Command(Deno.execPath(), {
    args,
    cwd,
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  let text = "";
  const listening = Promise.withResolvers<string>();
  const reading = (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of child.stderr) {
      // Keep only the start and the last part; a server may log a lot.
      text += decoder.decode(chunk, { stream: true });
      if (text.length > 1_000_000) text = text.slice(0, 100_000) + "\n...\n" + text.slice(-100_000);
      const match = text.match(ready);
      if (match) listening.resolve(match[1]);
    }
    listening.reject(new Error(`${name} exited before it was ready:\n${text}`));
  })();
  const timer = setTimeout(
    () =>
      listening.reject(new Error(`${name} was not ready within ${START_TIMEOUT_MS} ms:\n${text}`)),
    START_TIMEOUT_MS,
  );
  let stopping: Promise<Deno.CommandStatus> | undefined;
  const stop = () => {
    stopping ??= (async () => {
      try {
        child.kill("SIGTERM");
      } catch {
        // Already exited.
      }
      const killer = setTimeout(() => {
        try {
          child.kill("SIGKILL");
        } catch {
          // Already exited.
        }
      }, STOP_TIMEOUT_MS);
      const status = await child.status;
      clearTimeout(killer);
      await reading;
      running.delete(server);
      return status;
    })();
    return stopping;
  };
  const server: ServerProcess = {
    name,
    url: "",
    host: "",
    port: 0,
    pid: child.pid,
    logs: () => text,
    stop,
  };
  running.add(server);
  // Stopping is idempotent: a server stopped already is not stopped again.
  onCleanup(async () => {
    await stop();
  });
  try {
    const url = new URL(await listening.promise);
    server.url = url.origin;
    server.host = url.hostname;
    server.port = Number(url.port);
  } catch (error) {
    await stop();
    throw error;
  } finally {
    clearTimeout(timer);
  }
  return server;
}

/** Stops every server still running. */
export async function stopAll(): Promise<void> {
  await Promise.all([...running].map((server) => server.stop()));
}

/** Runs the load generator in its own process and returns its result. */
export async function runLoadProcess(spec: LoadSpec): Promise<LoadResult> {
  const child = spawnTracked(
    new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", `${ROOT}bench/load_gen.ts`],
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }),
  );
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(JSON.stringify(spec)));
  await writer.close();
  const output = await child.output();
  const stdout = new TextDecoder().decode(output.stdout);
  if (!output.success) {
    throw new Error(`the load generator failed:\n${new TextDecoder().decode(output.stderr)}`);
  }
  // A window that measured nothing (a short --quick one on a busy machine) has
  // NaN quantiles, which JSON carries as null.
  return JSON.parse(stdout.trim().split("\n").pop()!, (_, value) => value === null ? NaN : value);
}

/** A field of `/proc/PID/status` in KiB (e.g. `VmRSS`, `VmHWM`). */
export function procStatusKiB(pid: number, field: string): number {
  const text = Deno.readTextFileSync(`/proc/${pid}/status`);
  const match = text.match(new RegExp(`^${field}:\\s+(\\d+) kB`, "m"));
  if (!match) throw new Error(`no ${field} in /proc/${pid}/status`);
  return Number(match[1]);
}

/** A process and all its descendants, from `/proc/PID/task/TID/children`. */
export function processTree(pid: number): number[] {
  const tree = [pid];
  for (let i = 0; i < tree.length; i++) {
    let tids: string[] = [];
    try {
      tids = [...Deno.readDirSync(`/proc/${tree[i]}/task`)].map((entry) => entry.name);
    } catch {
      continue; // Exited meanwhile.
    }
    for (const tid of tids) {
      try {
        const children = Deno.readTextFileSync(`/proc/${tree[i]}/task/${tid}/children`);
        for (const child of children.trim().split(/\s+/)) if (child) tree.push(Number(child));
      } catch {
        // Exited meanwhile.
      }
    }
  }
  return tree;
}

/**
 * Memory of a process and its descendants (WasmKeep may run its executors
 * as child processes): summed `VmRSS` (pages shared between them, such as
 * the `deno` binary's, count once per process) and summed `Pss` from
 * `smaps_rollup` (shared pages split between their users), in KiB, with the
 * number of processes and threads.
 */
export function treeMemory(
  pid: number,
): { rssKiB: number; pssKiB: number; processes: number; threads: number } {
  let rssKiB = 0;
  let pssKiB = 0;
  let threads = 0;
  const pids = processTree(pid);
  for (const p of pids) {
    rssKiB += procStatusKiB(p, "VmRSS");
    const status = Deno.readTextFileSync(`/proc/${p}/status`);
    threads += Number(status.match(/^Threads:\s+(\d+)/m)?.[1] ?? 0);
    const rollup = Deno.readTextFileSync(`/proc/${p}/smaps_rollup`);
    pssKiB += Number(rollup.match(/^Pss:\s+(\d+) kB/m)?.[1] ?? 0);
  }
  return { rssKiB, pssKiB, processes: pids.length, threads };
}

/** One metric's value from a WasmKeep node's `/_wasmkeep/metrics`. */
export async function metric(url: string, name: string): Promise<number | undefined> {
  const text = await (await fetch(`${url}/_wasmkeep/metrics`)).text();
  const line = text.split("\n").find((l) => l.startsWith(name + " ") || l.startsWith(name + "{"));
  return line === undefined ? undefined : Number(line.split(" ").pop());
}

/** Runs `fn` over `items` with at most `limit` at a time. */
export async function mapLimit<T, R>(
  items: T[],
  limit: number,
  fn: (item: T) => Promise<R>,
): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(Array.from({ length: limit }, async () => {
    while (next < items.length) {
      const index = next++;
      results[index] = await fn(items[index]);
    }
  }));
  return results;
}

/** Clock ticks per second of `/proc/PID/stat` times (USER_HZ, 100 on Linux). */
const TICKS_PER_SECOND = 100;

/**
 * CPU time (user + system) used so far by a process and by its descendants
 * now alive, in ms.
 */
export function treeCpuMs(pid: number): { selfMs: number; childrenMs: number } {
  const cpu = (p: number) => {
    try {
      const stat = Deno.readTextFileSync(`/proc/${p}/stat`);
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      // Fields 14 and 15 (utime, stime) of proc(5), counted from after the name.
      return (Number(fields[11]) + Number(fields[12])) * 1000 / TICKS_PER_SECOND;
    } catch {
      return 0;
    }
  };
  const [self, ...children] = processTree(pid);
  return { selfMs: cpu(self), childrenMs: children.reduce((sum, p) => sum + cpu(p), 0) };
}

/** The value after `--NAME` on the command line, if any. */
export function flag(name: string): string | undefined {
  const i = Deno.args.indexOf(`--${name}`);
  return i >= 0 ? Deno.args[i + 1] : undefined;
}

/** `/dev/shm` where there is one: data on tmpfs keeps the disk's fsyncs out of the numbers. */
export function defaultDataRoot(): string | undefined {
  try {
    return Deno.statSync("/dev/shm").isDirectory ? "/dev/shm" : undefined;
  } catch {
    return undefined;
  }
}

/** The CPU's model name, for the reports. */
export function cpuModel(): string {
  try {
    return Deno.readTextFileSync("/proc/cpuinfo").match(/^model name\s*:\s*(.*)$/m)?.[1] ??
      "unknown";
  } catch {
    return "unknown";
  }
}

/** The commit of a checkout, and whether its code differs from it. */
export function describeTree(root: string): string {
  const git = (...args: string[]) => {
    const output = new Deno.Command("git", { args, cwd: root, stdout: "piped", stderr: "null" })
      .outputSync();
    return output.success ? new TextDecoder().decode(output.stdout).trim() : undefined;
  };
  const commit = git("rev-parse", "--short", "HEAD");
  if (commit === undefined) return `${root} (not a git checkout)`;
  const changed = git("status", "--porcelain", "--", "main.ts", "cli", "src") ?? "";
  const count = changed.split("\n").filter(Boolean).length;
  return `${root} at ${commit}` +
    (count > 0 ? ` with ${count} uncommitted change(s) in main.ts, cli/, src/` : " (clean)");
}

/** How {@linkcode startBenchNode} starts a node. */
export interface BenchNodeOptions {
  /** Its node id. */
  id: string;
  /** The shared bucket. */
  bucketUrl: string;
  /** Its own data directory. */
  dataDir: string;
  /** `plain`: `--cluster-plaintext accept`; `tls`: a cluster listener on a free port. */
  mode: "plain" | "tls";
  /** The checkout whose `main.ts` it runs; default this one. */
  root?: string;
  /** Flags of `deno run` (V8 flags). */
  denoArgs?: string[];
  /** More flags of `serve`. */
  extra?: string[];
  /** Its working directory (where `--prof` writes its log); default `root`. */
  cwd?: string;
}

/**
 * Starts a WasmKeep node serving the testbed actor with lease ttl 3 s, as
 * the benchmarks between nodes run them; resolves once it is ready.
 */
export function startBenchNode(options: BenchNodeOptions): Promise<ServerProcess> {
  const given = options.root ?? ROOT;
  const root = given.endsWith("/") ? given : `${given}/`;
  const clusterPort = freePort();
  return startServer(
    options.id,
    [
      "run",
      "-A",
      ...(options.denoArgs ?? []),
      `${root}main.ts`,
      "serve",
      "--actor",
      `testbed=${root}test/fixtures/components/testbed.wasm`,
      "--node-id",
      options.id,
      "--lease-ttl-secs",
      "3",
      "--bucket",
      options.bucketUrl,
      "--data-dir",
      options.dataDir,
      "--listen",
      "127.0.0.1:0",
      ...(options.mode === "plain" ? ["--cluster-plaintext", "accept"] : [
        "--cluster-listen",
        `127.0.0.1:${clusterPort}`,
        "--cluster-advertise",
        `https://127.0.0.1:${clusterPort}`,
      ]),
      ...(options.extra ?? []),
    ],
    /node ready .*url=(http:\/\/\S+)/,
    options.cwd ?? root,
  );
}
