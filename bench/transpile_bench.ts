/**
 * How long a component's transpile holds the node's main thread (issue 20:
 * a node that follows an app compiles each new component while it serves,
 * and its leases and heartbeats run on that thread).
 *
 * A timer ticks every 2 ms on the main thread and the longest gap between
 * ticks is the stall. Each component is transpiled twice with an empty
 * cache, in the same run: `in-thread` (the baseline: jco's transpile
 * called on the main thread, as the node did before) and `node`
 * (`componentFromBytes`, the node's own path, whose transpile runs in a
 * process of its own). Reported: the longest stall and the whole time of each, and the
 * ratio of the stalls.
 *
 * The components: every example, and a large one made here (a C actor with
 * `--functions` functions of its own, 20,000 by default, about 1.2 MB;
 * needs clang and wasm-ld, as `deno task build-examples` does; skipped
 * without them).
 *
 * The flags are in {@linkcode USAGE} (`--help` prints it).
 *
 * @module
 */

import { componentEmbed, componentNew } from "@bytecodealliance/jco";
import { componentFromBytes } from "../src/actors/component.ts";
import { transpileComponent } from "../src/actors/component_transpile.ts";
import { flag } from "./processes.ts";
import { benchTempDir, QUICK, runBench, spawnTracked } from "./command.ts";

/** What `--help` prints. */
export const USAGE =
  `Usage: deno run -A bench/transpile_bench.ts [--quick] [--functions N] [--rounds N]

How long a component's transpile holds the main thread: jco's transpile on the main thread
against the node's own path, whose transpile runs in a worker, for every example and a large
component made here (needs clang and wasm-ld; left out without them).

  --quick         a short run (1 round, a large component of 1000 functions)
  --functions N   functions of the large component (default 20000)
  --rounds N      transpiles of each component each way, the best kept (default 3)
  -h, --help      show this help`;

const TICK_MS = 2;
const root = new URL("../", import.meta.url);
const path = (p: string) => new URL(p, root).pathname;

/** The longest gap between the main thread's ticks while `work` runs, and its whole time. */
async function stallOf(
  work: () => Promise<unknown>,
): Promise<{ stallMs: number; totalMs: number }> {
  let longest = 0;
  let last = performance.now();
  const ticker = setInterval(() => {
    const now = performance.now();
    longest = Math.max(longest, now - last - TICK_MS);
    last = now;
  }, TICK_MS);
  // A tick first, so the gap measured starts with the work.
  await new Promise((resolve) => setTimeout(resolve, 20));
  const started = performance.now();
  last = started;
  await work();
  const totalMs = performance.now() - started;
  await new Promise((resolve) => setTimeout(resolve, 20));
  clearInterval(ticker);
  return { stallMs: Math.max(0, longest), totalMs };
}

/** A C actor with `functions` functions of its own, reached from its on-init. */
async function largeComponent(functions: number): Promise<Uint8Array | undefined> {
  const dir = await benchTempDir({ prefix: "wk-transpile-bench-" });
  try {
    const lines = ["typedef unsigned int u32;"];
    for (let i = 0; i < functions; i++) {
      lines.push(
        `__attribute__((noinline)) u32 f${i}(u32 x) { x = x * ${2 * i + 1}u + ${i}u; ` +
          `x ^= x >> ${(i % 13) + 1}; return x * ${7 * i + 3}u; }`,
      );
    }
    lines.push("typedef u32 (*fn)(u32);");
    lines.push(`fn table[] = {${Array.from({ length: functions }, (_, i) => `f${i}`).join(",")}};`);
    lines.push(`u32 big_call(u32 i, u32 x) { return table[i % ${functions}](x); }`);
    await Deno.writeTextFile(`${dir}/big.c`, lines.join("\n") + "\n");
    const counter = await Deno.readTextFile(path("examples/counter/counter.c"));
    await Deno.writeTextFile(
      `${dir}/actor.c`,
      counter.replace(
        "int wk_on_init(wk_str *err) {",
        "unsigned int big_call(unsigned int i, unsigned int x);\n" +
          "int wk_on_init(wk_str *err) {\n  if (big_call(7, 3) == 12345) return 1;",
      ),
    );
    const clang = Deno.env.get("CLANG") ?? "clang";
    const args = [
      "--target=wasm32",
      "-Oz",
      "-ffreestanding",
      "-nostdlib",
      "-fno-builtin",
      "-Wl,--no-entry",
      "-Wl,--initial-memory=1048576",
      "-Wl,-z,stack-size=16384",
      "-Wl,--strip-debug",
      `-I${path("examples/sdk")}`,
      "-o",
      `${dir}/core.wasm`,
      `${dir}/actor.c`,
      `${dir}/big.c`,
      path("examples/sdk/wasmkeep.c"),
    ];
    let built: Deno.CommandOutput | undefined;
    try {
      built = await spawnTracked(
        new Deno.Command(clang, { args, stdout: "null", stderr: "piped" }),
      ).output();
    } catch {
      return undefined; // No clang.
    }
    if (!built.success) return undefined;
    const embedded = await componentEmbed({
      binary: await Deno.readFile(`${dir}/core.wasm`),
      witSource: await Deno.readTextFile(path("wit/wasmkeep.wit")),
      world: "actor",
      stringEncoding: "utf8",
    });
    return await componentNew(embedded, []);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

async function main(): Promise<void> {
  const functions = Number(flag("functions") ?? (QUICK ? 1_000 : 20_000));
  const rounds = Number(flag("rounds") ?? (QUICK ? 1 : 3));
  const components: [string, Uint8Array][] = [];
  for (const name of ["counter", "kv", "chat", "reminder", "greeter"]) {
    components.push([name, await Deno.readFile(path(`examples/${name}/${name}.wasm`))]);
  }
  const large = await largeComponent(functions);
  if (large) components.push([`large (${functions} functions)`, large]);
  else console.log("no clang: the large component is left out");

  // jco loaded once on the main thread before anything is measured, so the
  // baseline is the transpile alone (a node pays for that load too, once).
  await transpileComponent(components[0][1]);

  console.log(
    "component | bytes | in-thread stall | node stall | stall ratio | in-thread total | node total",
  );
  for (const [name, bytes] of components) {
    const best = { inThread: Infinity, node: Infinity, inThreadTotal: 0, nodeTotal: 0 };
    for (let round = 0; round < rounds; round++) {
      const inThread = await stallOf(() => transpileComponent(bytes));
      const cache = await benchTempDir({ prefix: "wk-transpile-cache-" });
      const node = await stallOf(() => componentFromBytes(name, name, bytes, cache));
      await Deno.remove(cache, { recursive: true });
      if (inThread.stallMs < best.inThread) {
        best.inThread = inThread.stallMs;
        best.inThreadTotal = inThread.totalMs;
      }
      if (node.stallMs < best.node) {
        best.node = node.stallMs;
        best.nodeTotal = node.totalMs;
      }
    }
    console.log(
      `${name} | ${bytes.length} | ${best.inThread.toFixed(0)} ms | ${best.node.toFixed(0)} ms | ` +
        `${(best.node / Math.max(best.inThread, 1)).toFixed(2)} | ${
          best.inThreadTotal.toFixed(0)
        } ms | ` +
        `${best.nodeTotal.toFixed(0)} ms`,
    );
  }
}

await runBench(USAGE, main);
