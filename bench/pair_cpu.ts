/**
 * Where a pair of nodes spends its CPU on one kind of request: nodes `a`
 * and `b` as real processes on one file bucket (lease ttl 3 s), `plain`
 * (`--cluster-plaintext accept`) or `tls` (cluster listeners), one case
 * sent by `load_gen.ts` over one connection for 5 s, and the CPU each
 * process spent per request, its main process and its executors apart
 * (`/proc/<pid>/stat`). `--prof a` or `--prof b` starts that node with
 * `--v8-flags=--prof` in a directory of its own and prints where the log
 * is (read it with `node --prof-process`).
 *
 * Cases (as in `tls_cluster_bench.ts`): `forwarded` (a GET through `b` to
 * an actor on `a`), `call` (an actor on `b` calling one on `a`),
 * `call-local` (an actor on `a` calling another on `a`).
 *
 * The flags are in {@linkcode USAGE} (`--help` prints it).
 *
 * @module
 */

import {
  defaultDataRoot,
  flag,
  runLoadProcess,
  type ServerProcess,
  startBenchNode,
  stopAll,
  treeCpuMs,
} from "./processes.ts";
import { benchTempDir, QUICK, runBench } from "./command.ts";

/** What `--help` prints. */
export const USAGE =
  `Usage: deno run -A bench/pair_cpu.ts [--quick] [--mode plain|tls] [--case NAME] [--prof a|b]

Where a pair of nodes spends its CPU on one kind of request, each process's main thread and
its executors apart.

  --quick          a short run (1 s window) that shows it works
  --mode MODE      plain (--cluster-plaintext accept) or tls (cluster listeners) (default tls)
  --case NAME      forwarded, call or call-local (default forwarded)
  --prof a|b       starts that node with V8's --prof; its log is kept and its place printed
  -h, --help       show this help`;

const WARMUP_MS = QUICK ? 300 : 1_000;
const DURATION_MS = QUICK ? 1_000 : 5_000;

async function startNode(
  id: string,
  tmp: string,
  mode: "plain" | "tls",
  prof: boolean,
): Promise<ServerProcess> {
  const cwd = `${tmp}/${id}-cwd`;
  await Deno.mkdir(cwd, { recursive: true });
  return await startBenchNode({
    id,
    bucketUrl: `file://${tmp}/bucket`,
    dataDir: `${tmp}/${id}`,
    mode,
    denoArgs: prof ? ["--v8-flags=--prof"] : [],
    cwd,
  });
}

const call = (target: string) => `call?${encodeURIComponent(target)}`;

async function main(): Promise<void> {
  const mode = flag("mode") === "plain" ? "plain" : "tls";
  const name = flag("case") ?? "forwarded";
  const prof = flag("prof");
  // With --prof the V8 log is kept, and so the directory.
  const tmp = prof
    ? await Deno.makeTempDir({ dir: defaultDataRoot(), prefix: "wk-cpu-" })
    : await benchTempDir({ dir: defaultDataRoot(), prefix: "wk-cpu-" });
  try {
    const [a, b] = await Promise.all([
      startNode("a", tmp, mode, prof === "a"),
      startNode("b", tmp, mode, prof === "b"),
    ]);
    await (await fetch(`${a.url}/actor/testbed/x/rows`)).text();
    const cases: Record<string, { server: ServerProcess; path: string }> = {
      forwarded: { server: b, path: "/actor/testbed/x/rows" },
      call: { server: b, path: `/actor/testbed/y/${call("testbed/x/rows")}` },
      "call-local": { server: a, path: `/actor/testbed/x/${call("testbed/x2/rows")}` },
    };
    const chosen = cases[name];
    if (!chosen) throw new Error(`--case is one of ${Object.keys(cases).join(", ")}, not ${name}`);
    await (await fetch(`${chosen.server.url}${chosen.path}`)).text();
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    const before = [treeCpuMs(a.pid), treeCpuMs(b.pid)];
    const result = await runLoadProcess({
      host: chosen.server.host,
      port: chosen.server.port,
      method: "GET",
      paths: [chosen.path],
      connections: 1,
      warmupMs: WARMUP_MS,
      durationMs: DURATION_MS,
    });
    const after = [treeCpuMs(a.pid), treeCpuMs(b.pid)];
    // Warm-up included: the CPU was read around the whole run.
    const requests = result.rps * (WARMUP_MS + DURATION_MS) / 1000;
    const per = (i: number, part: "selfMs" | "childrenMs") =>
      ((after[i][part] - before[i][part]) * 1000 / requests).toFixed(0);
    console.log(
      `${mode} ${name}: ${result.rps.toFixed(0)} req/s, p50 ${
        (result.p50Ms * 1000).toFixed(0)
      } µs; ` +
        `CPU µs/req: a ${per(0, "selfMs")} (executors ${per(0, "childrenMs")}), ` +
        `b ${per(1, "selfMs")} (executors ${per(1, "childrenMs")})`,
    );
    if (prof) console.log(`V8 log of ${prof}: ${tmp}/${prof}-cwd/ (kept)`);
  } finally {
    await stopAll();
  }
}

if (import.meta.main) await runBench(USAGE, main);
