/**
 * The benchmarks' command line: every bench answers `--help` at once, every
 * bench command docs/performance.md shows uses only flags its bench's
 * `--help` lists, and a bench stopped with SIGTERM mid-run leaves no temp
 * directory and no process behind.
 *
 * @module
 */

import assert from "node:assert/strict";
import { command, ROOT, runLine } from "./doc_commands.ts";

/** The benchmarks: `bench/*_bench.ts` and the ones docs/performance.md also runs. */
async function benches(): Promise<string[]> {
  const names = ["ab.ts", "hop_ceiling.ts", "idle_memory.ts", "pair_cpu.ts"];
  for await (const entry of Deno.readDir(`${ROOT}bench`)) {
    if (entry.name.endsWith("_bench.ts")) names.push(entry.name);
  }
  return names.sort();
}

Deno.test("every benchmark prints its usage with --help and -h, and exits 0 at once", async () => {
  const names = await benches();
  assert.ok(names.length >= 12, names.join(" "));
  await Promise.all(names.map(async (name) => {
    for (const flag of ["--help", "-h"]) {
      const started = Date.now();
      const out = await runLine(`deno run -A bench/${name} ${flag}`, ROOT);
      assert.equal(out.code, 0, `${name} ${flag}: ${out.stderr}`);
      assert.ok(
        out.stdout.startsWith(`Usage: deno run -A bench/${name} [--quick]`),
        `${name} ${flag}:\n${out.stdout}`,
      );
      assert.match(out.stdout, /--quick +a short run/);
      // Loading the module and printing; a run would take tens of seconds.
      assert.ok(Date.now() - started < 20_000, `${name} ${flag} took ${Date.now() - started} ms`);
    }
  }));
});

Deno.test("a benchmark refuses a flag its usage does not list, naming it", async () => {
  const out = await runLine("deno run -A bench/counter_bench.ts --quik", ROOT);
  assert.equal(out.code, 2);
  assert.match(out.stderr, /^unknown flag --quik; --help lists the flags$/m);
});

Deno.test("every bench command in README.md and docs/ uses flags its bench's --help lists", async () => {
  const usages = new Map<string, string>();
  const files = ["README.md"];
  for await (const entry of Deno.readDir(`${ROOT}docs`)) {
    if (entry.name.endsWith(".md")) files.push(`docs/${entry.name}`);
  }
  let checked = 0;
  for (const file of files) {
    const text = await Deno.readTextFile(`${ROOT}${file}`);
    for (const block of text.matchAll(/```sh\n([\s\S]*?)```/g)) {
      for (const line of block[1].replaceAll("\\\n", " ").split("\n")) {
        const match = command(line).match(/^deno run -A (bench\/\S+\.ts)(.*)$/);
        if (!match) continue;
        const [, bench, rest] = match;
        if (!usages.has(bench)) {
          const help = await runLine(`deno run -A ${bench} --help`, ROOT);
          assert.equal(help.code, 0, `${file}: ${bench} --help: ${help.stderr}`);
          usages.set(bench, help.stdout);
        }
        for (const flag of rest.match(/--[a-z][a-z0-9-]*/g) ?? []) {
          assert.ok(
            usages.get(bench)!.includes(flag),
            `${file}: ${command(line)}: ${bench} has no ${flag}`,
          );
        }
        checked++;
      }
    }
  }
  assert.ok(checked >= 10, `only ${checked} bench commands found`);
});

/** The processes whose command line mentions `text`, but this test's own. */
function processesMentioning(text: string): number[] {
  const found: number[] = [];
  for (const entry of Deno.readDirSync("/proc")) {
    const pid = Number(entry.name);
    if (!Number.isInteger(pid) || pid === Deno.pid) continue;
    try {
      const cmdline = Deno.readTextFileSync(`/proc/${pid}/cmdline`);
      if (cmdline.includes(text)) found.push(pid);
    } catch {
      // Exited meanwhile.
    }
  }
  return found;
}

Deno.test("a benchmark stopped with SIGTERM mid-run stops its servers and removes its temp directory", async () => {
  const root = await Deno.makeTempDir({ prefix: "wasmkeep-bench-root-" });
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "bench/counter_bench.ts", "--quick", "--data-root", root],
    cwd: ROOT,
    env: { NO_COLOR: "1" },
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  let text = "";
  const midRun = Promise.withResolvers<void>();
  const reading = (async () => {
    for await (const chunk of child.stderr.pipeThrough(new TextDecoderStream())) {
      text += chunk;
      // Both servers run and the load generator is at work.
      if (/1 hot actor on wasmkeep/.test(text)) midRun.resolve();
    }
    midRun.reject(new Error(`the bench ended before its first case:\n${text}`));
  })();
  try {
    await midRun.promise;
    assert.equal((await Array.fromAsync(Deno.readDir(root))).length, 1, "its temp directory");
    assert.ok(processesMentioning(root).length >= 2, "its servers run");
    child.kill("SIGTERM");
    const status = await child.status;
    await reading;
    assert.equal(status.code, 143, text);
    assert.match(text, /SIGTERM: stopping child processes and removing temp directories/);
    assert.deepEqual(await Array.fromAsync(Deno.readDir(root)), [], "left in the data root");
    assert.deepEqual(processesMentioning(root), [], "processes left running");
  } finally {
    try {
      child.kill("SIGKILL");
    } catch {
      // Exited.
    }
    await child.status;
    await Deno.remove(root, { recursive: true });
  }
});
