/**
 * Runs `wasmkeep serve` as a real process for tests, on a free port, and
 * stops it with SIGTERM.
 *
 * @module
 */

/** A node process under test. */
export interface NodeProcess {
  /** `http://127.0.0.1:PORT` of its client listener. */
  url: string;
  /** Its process id. */
  pid: number;
  /** Everything it wrote to stderr so far. */
  logs(): string;
  /** Sends SIGTERM and waits for the exit status. */
  stop(): Promise<Deno.CommandStatus>;
  /** Kills it at once (SIGKILL). */
  kill(): Promise<Deno.CommandStatus>;
  /** Kills it and its executors at once (SIGKILL), as a lost machine. */
  killTree(): Promise<Deno.CommandStatus>;
  /** Sends `signal` to it and its executors (SIGSTOP and SIGCONT: a paused machine). */
  signalTree(signal: Deno.Signal): void;
  /**
   * Sends `signal` to its process group, as systemd's `KillMode=control-group`
   * or Ctrl-C in a terminal do (started with `ownProcessGroup` only).
   */
  signalGroup(signal: Deno.Signal): void;
  /** The ids of its descendants now: its executors. */
  descendants(): number[];
  /** Its exit status, once it exited by itself. */
  status: Promise<Deno.CommandStatus>;
}

/** The repository root, for paths of examples and fixtures. */
export const ROOT: string = new URL("../../", import.meta.url).pathname;

/** The counter example component. */
export const COUNTER_WASM: string = `${ROOT}examples/counter/counter.wasm`;
/** The example chat room (examples/chat), as a path. */
export const CHAT_WASM: string = `${ROOT}examples/chat/chat.wasm`;
/** The example reminder: an alarm that counts its firings (issue 19). */
export const REMINDER_WASM: string = `${ROOT}examples/reminder/reminder.wasm`;
/** The example greeter: config.get("GREETING") and its own name (examples/greeter). */
export const GREETER_WASM: string = `${ROOT}examples/greeter/greeter.wasm`;
/** The key-value example component. */
export const KV_WASM: string = `${ROOT}examples/kv/kv.wasm`;
/** The host's test component. */
export const TESTBED_WASM: string = `${ROOT}test/fixtures/components/testbed.wasm`;

/** The testbed as a second code version (its `/version` answers 2), for deploys. */
export const TESTBED_V2_WASM: string = `${ROOT}test/fixtures/components/testbed_v2.wasm`;

const MAIN = `${ROOT}main.ts`;
const START_TIMEOUT_MS = 30_000;

/** Runs the CLI to completion and returns its status and output. */
export async function runWasmkeep(
  args: string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", MAIN, ...args],
    env,
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decoder = new TextDecoder();
  return {
    code: output.code,
    stdout: decoder.decode(output.stdout),
    stderr: decoder.decode(output.stderr),
  };
}

/**
 * Starts `wasmkeep serve ARGS --listen 127.0.0.1:0` and waits until it
 * serves (its bucket passed the probe): ready, or logging why not (an app
 * with no deployed version yet).
 *
 * @example
 * ```ts
 * import { COUNTER_WASM, startNode } from "./node_process.ts";
 * const dir = await Deno.makeTempDir();
 * const node = await startNode(["--actor", `counter=${COUNTER_WASM}`, "--data-dir", dir]);
 * await fetch(`${node.url}/actor/counter/a`, { method: "POST" });
 * await node.stop();
 * ```
 */
export async function startNode(
  args: string[],
  env: Record<string, string> = {},
  options: {
    openFileLimit?: number;
    /** In a process group of its own (`setsid`), whose id is its pid. */
    ownProcessGroup?: boolean;
    /** More flags of `deno run` (an import map). */
    denoArgs?: string[];
  } = {},
): Promise<NodeProcess> {
  const command = [
    ...(options.ownProcessGroup ? ["setsid"] : []),
    Deno.execPath(),
    "run",
    "-A",
    ...(options.denoArgs ?? []),
    MAIN,
    "serve",
    "--listen",
    "127.0.0.1:0",
    ...args,
  ];
  // Under a lower open-file limit: the shell sets it, then becomes the node.
  const [program, ...programArgs] = options.openFileLimit === undefined
    ? command
    : ["bash", "-c", `ulimit -n ${options.openFileLimit} && exec "$@"`, "bash", ...command];
  const child = new Deno.Command(program, {
    args: programArgs,
    env,
    stdout: "null",
    stderr: "piped",
  }).spawn();
  let text = "";
  const listening = Promise.withResolvers<string>();
  const reading = (async () => {
    const decoder = new TextDecoder();
    for await (const chunk of child.stderr) {
      text += decoder.decode(chunk, { stream: true });
      const match = text.match(/node (?:ready|serving, not ready) .*url=(http:\/\/\S+)/);
      if (match) listening.resolve(match[1]);
    }
    listening.reject(new Error(`the node exited before listening:\n${text}`));
  })();
  const timer = setTimeout(
    () =>
      listening.reject(
        new Error(`the node did not listen within ${START_TIMEOUT_MS} ms:\n${text}`),
      ),
    START_TIMEOUT_MS,
  );
  let url: string;
  try {
    url = await listening.promise;
  } catch (error) {
    try {
      child.kill("SIGKILL");
    } catch {
      // It exited by itself.
    }
    await child.status;
    await reading;
    throw error;
  } finally {
    clearTimeout(timer);
  }
  const finish = async (signal: Deno.Signal) => {
    try {
      child.kill(signal);
    } catch {
      // Already exited.
    }
    const status = await child.status;
    // Its executors share its stderr: ones that outlived it would hold the
    // stream open, and the test would hang instead of failing.
    await Promise.race([reading, new Promise((resolve) => setTimeout(resolve, 5000))]);
    return status;
  };
  return {
    url,
    pid: child.pid,
    logs: () => text,
    stop: () => finish("SIGTERM"),
    kill: () => finish("SIGKILL"),
    signalTree: (signal: Deno.Signal) => {
      for (const pid of [child.pid, ...descendants(child.pid)]) {
        try {
          Deno.kill(pid, signal);
        } catch {
          // Exited already.
        }
      }
    },
    signalGroup: (signal: Deno.Signal) => {
      if (!options.ownProcessGroup) throw new Error("signalGroup needs ownProcessGroup");
      Deno.kill(-child.pid, signal);
    },
    descendants: () => descendants(child.pid),
    status: child.status,
    killTree: () => {
      for (const pid of descendants(child.pid)) {
        try {
          Deno.kill(pid, "SIGKILL");
        } catch {
          // Exited already.
        }
      }
      return finish("SIGKILL");
    },
  };
}

/** Reads one metric's value from a node's `/_wasmkeep/metrics` (the first series with `labels`). */
export async function metric(
  url: string,
  name: string,
  labels: Record<string, string> = {},
): Promise<number | undefined> {
  const text = await (await fetch(`${url}/_wasmkeep/metrics`)).text();
  const wanted = Object.entries(labels).map(([label, value]) => `${label}="${value}"`);
  const line = text.split("\n").find((l) =>
    (l.startsWith(name + " ") || l.startsWith(name + "{")) &&
    wanted.every((pair) => l.slice(0, l.lastIndexOf(" ")).includes(pair))
  );
  return line === undefined ? undefined : Number(line.split(" ").pop());
}

/** The peak resident memory of process `pid` so far, in bytes (VmHWM). */
export function peakRss(pid: number): number {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  return Number(status.match(/^VmHWM:\s+(\d+) kB/m)![1]) * 1024;
}

/** The processes descended from `pid`, read from /proc. */
function descendants(pid: number): number[] {
  const children = new Map<number, number[]>();
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      const text = Deno.readTextFileSync(`/proc/${entry.name}/stat`);
      const ppid = Number(text.slice(text.lastIndexOf(")") + 2).split(" ")[1]);
      children.set(ppid, [...(children.get(ppid) ?? []), Number(entry.name)]);
    } catch {
      // Gone meanwhile.
    }
  }
  const found: number[] = [];
  const walk = (parent: number) => {
    for (const child of children.get(parent) ?? []) {
      found.push(child);
      walk(child);
    }
  };
  walk(pid);
  return found;
}

/**
 * CPU time (clock ticks, usually 1/100 s) used so far by a process and all
 * its descendants that are still running, from /proc.
 */
export function processTreeCpuTicks(pid: number): number {
  const stats = new Map<number, { ppid: number; ticks: number }>();
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      const text = Deno.readTextFileSync(`/proc/${entry.name}/stat`);
      const fields = text.slice(text.lastIndexOf(")") + 2).split(" ");
      stats.set(Number(entry.name), {
        ppid: Number(fields[1]),
        ticks: Number(fields[11]) + Number(fields[12]),
      });
    } catch {
      // The process exited while we looked.
    }
  }
  let total = 0;
  const queue = [pid];
  while (queue.length > 0) {
    const current = queue.pop()!;
    total += stats.get(current)?.ticks ?? 0;
    for (const [child, stat] of stats) if (stat.ppid === current) queue.push(child);
  }
  return total;
}

/**
 * Runs `body` against a node started with `args` on a fresh data directory,
 * then stops the node and removes the directory, whatever `body` did.
 */
export async function withNode(
  args: string[],
  body: (node: NodeProcess, dataDir: string) => Promise<void>,
): Promise<void> {
  const dataDir = await Deno.makeTempDir();
  try {
    const node = await startNode([...args, "--data-dir", dataDir]);
    try {
      await body(node, dataDir);
    } finally {
      await node.stop();
    }
  } finally {
    await Deno.remove(dataDir, { recursive: true });
  }
}
