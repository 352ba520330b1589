/**
 * The command line every benchmark shares: `--help` prints its usage and
 * exits, an unknown flag is refused by name, `--quick` asks for a short run,
 * and what a run leaves behind (temp directories, child processes) is
 * removed when it ends, fails, or is stopped with SIGINT or SIGTERM.
 *
 * @module
 */

/**
 * `--quick` was given: a short run that shows the benchmark works, with
 * figures not to quote. Read at load, as the benchmarks read their flags.
 */
export const QUICK: boolean = Deno.args.includes("--quick");

type Cleanup = () => void | Promise<void>;

const cleanups: Cleanup[] = [];

/**
 * Runs `cleanup` when the benchmark ends, however it ends; the latest
 * registered runs first. Returns a function that unregisters it.
 *
 * @example
 * ```ts
 * import { onCleanup } from "./command.ts";
 * const forget = onCleanup(() => console.log("cleaned up"));
 * forget();
 * ```
 */
export function onCleanup(cleanup: Cleanup): () => void {
  cleanups.push(cleanup);
  return () => {
    const at = cleanups.indexOf(cleanup);
    if (at >= 0) cleanups.splice(at, 1);
  };
}

/** Runs every registered cleanup once, latest first; one failing does not stop the rest. */
async function cleanUp(): Promise<void> {
  while (cleanups.length > 0) {
    try {
      await cleanups.pop()!();
    } catch (error) {
      console.error(`cleanup failed: ${error}`);
    }
  }
}

/**
 * A temp directory removed when the benchmark ends or is stopped.
 *
 * @example
 * ```ts ignore
 * import { benchTempDir } from "./command.ts";
 * const dir = await benchTempDir({ prefix: "wk-example-" });
 * ```
 */
export async function benchTempDir(options: Deno.MakeTempOptions = {}): Promise<string> {
  const dir = await Deno.makeTempDir(options);
  onCleanup(() => Deno.remove(dir, { recursive: true }).catch(() => {}));
  return dir;
}

/**
 * Spawns `command` and kills it (SIGTERM, then SIGKILL after 5 s) if the
 * benchmark ends or is stopped before it exits.
 *
 * @example
 * ```ts ignore
 * import { spawnTracked } from "./command.ts";
 * const child = spawnTracked(new Deno.Command("sleep", { args: ["1"] }));
 * await child.status;
 * ```
 */
export function spawnTracked(command: Deno.Command): Deno.ChildProcess {
  const child = command.spawn();
  let exited = false;
  const forget = onCleanup(() => exited ? undefined : stopChild(child));
  child.status.finally(() => {
    exited = true;
    forget();
  });
  return child;
}

async function stopChild(child: Deno.ChildProcess): Promise<void> {
  const signal = (name: Deno.Signal) => {
    try {
      child.kill(name);
    } catch {
      // Already exited.
    }
  };
  signal("SIGTERM");
  const killer = setTimeout(() => signal("SIGKILL"), 5_000);
  await child.status;
  clearTimeout(killer);
}

/** Every `--flag` a usage text names, with `--help`, `-h` and `--quick`. */
function knownFlags(usage: string): Set<string> {
  return new Set(["--help", "-h", "--quick", ...usage.match(/--[a-z][a-z0-9-]*/g) ?? []]);
}

let listeners: [Deno.Signal, () => void][] = [];
/** Set by SIGINT or SIGTERM: the cleanups under way, then the exit. */
let interrupted: Promise<void> | undefined;

/**
 * Reads the shared command line at a benchmark's start: `--help` or `-h`
 * prints `usage` and exits 0; a flag `usage` does not name exits 2 naming
 * it. Then SIGINT and SIGTERM run the cleanups and exit 130 and 143, until
 * {@linkcode endBench}.
 *
 * @example
 * ```ts ignore
 * import { endBench, startBench } from "./command.ts";
 * startBench("Usage: deno run -A bench/x_bench.ts [--quick]");
 * try {
 *   console.log("measuring");
 * } finally {
 *   await endBench();
 * }
 * ```
 */
export function startBench(usage: string, args: string[] = Deno.args): void {
  if (args.includes("--help") || args.includes("-h")) {
    console.log(usage);
    Deno.exit(0);
  }
  const known = knownFlags(usage);
  // `--flag=value` is the flag's; a value of its own may start with "-" that way.
  const unknown = args.find((arg) => arg.startsWith("-") && !known.has(arg.split("=")[0]));
  if (unknown !== undefined) {
    console.error(`unknown flag ${unknown}; --help lists the flags`);
    Deno.exit(2);
  }
  listeners = (["SIGINT", "SIGTERM"] as const).map((name) => {
    const listener = () => {
      if (interrupted !== undefined) return;
      console.error(`${name}: stopping child processes and removing temp directories`);
      interrupted = cleanUp().finally(() => Deno.exit(name === "SIGINT" ? 130 : 143));
    };
    Deno.addSignalListener(name, listener);
    return [name, listener];
  });
}

/**
 * Runs every cleanup and stops listening for signals: the benchmark is over.
 * After a signal it waits for that signal's cleanups and exit instead: a
 * step failing because its child process was stopped is not the outcome.
 */
export async function endBench(): Promise<void> {
  if (interrupted !== undefined) return await interrupted;
  await cleanUp();
  for (const [name, listener] of listeners) Deno.removeSignalListener(name, listener);
  listeners = [];
}

/**
 * Runs a benchmark's `body` between {@linkcode startBench} and
 * {@linkcode endBench}: every cleanup runs when `body` ends or throws.
 *
 * @example
 * ```ts ignore
 * import { QUICK, runBench } from "./command.ts";
 * await runBench("Usage: deno run -A bench/x_bench.ts [--quick]", async () => {
 *   console.log(QUICK ? "a short run" : "a full run");
 * });
 * ```
 */
export async function runBench(usage: string, body: () => Promise<void>): Promise<void> {
  startBench(usage);
  try {
    await body();
  } finally {
    await endBench();
  }
}
