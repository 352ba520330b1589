/**
 * The streaming benchmark (issue 17): what forwarding long bodies costs the
 * forwarding node in memory. Two WasmKeep nodes, `a` and `b`, run as real
 * processes on one file bucket (plain HTTP between them, as
 * `test/node/cluster_test.ts` starts them, `--max-body-bytes` 20 MiB);
 * `CONCURRENT` actors are woken on `a`, then each gets `ROUNDS` POSTs of a
 * 16 MiB body to the testbed's `/echo` through `b`, all at once: 16 MiB
 * goes through `b` each way per request. The figure is `b`'s peak RSS
 * (sampled every 5 ms from `/proc/PID/status`) over its RSS before, against
 * what `b` would hold if it read each body whole (both ways: 32 MiB a
 * request).
 *
 * The flags are in {@linkcode USAGE} (`--help` prints it).
 *
 * @module
 */

import { parseArgs } from "node:util";
import { endBench, onCleanup, QUICK, startBench } from "./command.ts";

/** What `--help` prints. */
export const USAGE = `Usage: deno run -A bench/stream_bench.ts [--quick] [--wasmkeep-root DIR]
         [--forwarder-v8-flags FLAGS] [--concurrent N] [--body-mib N]

The forwarding node's memory while it forwards long bodies: its peak RSS over its RSS before,
against what it would hold if it read each body whole. Prints one JSON line.

  --quick                     a short run (2 requests of 1 MiB at once) that shows it works
  --wasmkeep-root DIR         the checkout whose main.ts the nodes run (default this one)
  --forwarder-v8-flags FLAGS  V8 flags of the forwarding node alone (e.g. --max-semi-space-size=1)
  --concurrent N              requests at once, each to its own actor (default 4)
  --body-mib N                each body's size in MiB (default 16)
  -h, --help                  show this help`;

startBench(USAGE);

/** Requests at once, each to its own actor (`--concurrent`). */
export const CONCURRENT = QUICK ? 2 : 4;
/** Rounds of `CONCURRENT` requests. */
export const ROUNDS = 2;
/** Each body's size (`--body-mib`). */
export const BODY_BYTES = (QUICK ? 1 : 16) * 1024 * 1024;

const { values } = parseArgs({
  args: Deno.args,
  options: {
    "wasmkeep-root": { type: "string" },
    "forwarder-v8-flags": { type: "string" },
    concurrent: { type: "string" },
    "body-mib": { type: "string" },
    quick: { type: "boolean" },
  },
});
const concurrent = Number(values.concurrent ?? CONCURRENT);
const bodyBytes = values["body-mib"] ? Number(values["body-mib"]) * 1024 * 1024 : BODY_BYTES;
const root = values["wasmkeep-root"] ?? new URL("..", import.meta.url).pathname;
const v8Flags = values["forwarder-v8-flags"];
const { scratchDir, startClusterNode } = await import(`${root}/src/testing/cluster.ts`);
const { TESTBED_WASM } = await import(`${root}/src/testing/node_process.ts`);

function rssMiB(pid: number): number {
  const status = Deno.readTextFileSync(`/proc/${pid}/status`);
  return Number(/VmRSS:\s+(\d+)/.exec(status)![1]) / 1024;
}

const TESTBED = ["--actor", `testbed=${TESTBED_WASM}`];
const LIMIT = { extra: ["--max-body-bytes", String(bodyBytes + 4 * 1024 * 1024)] };
const dir = await scratchDir("wk-stream-bench-");
onCleanup(() => Deno.remove(dir, { recursive: true }).catch(() => {}));
const bucketUrl = `file://${dir}/bucket`;
const [a, b] = await Promise.all([
  startClusterNode("a", dir, bucketUrl, TESTBED, LIMIT),
  startClusterNode("b", dir, bucketUrl, TESTBED, {
    ...LIMIT,
    denoArgs: v8Flags ? [`--v8-flags=${v8Flags}`] : [],
  }),
]);
onCleanup(async () => {
  await Promise.all([a.stop(), b.stop()]);
});
try {
  const post = async (via: string, actor: string, body: BodyInit) => {
    const response = await fetch(`${via}/actor/testbed/${actor}/echo`, { method: "POST", body });
    const bytes = await response.arrayBuffer();
    if (response.status !== 200) throw new Error(`${actor}: ${response.status}`);
    return { bytes: bytes.byteLength, node: response.headers.get("x-wasmkeep-node") };
  };
  const actors = Array.from({ length: concurrent }, (_, i) => `big${i}`);
  for (const actor of actors) await post(a.url, actor, "wake");
  // b learns where each is, and warms its paths, with short bodies.
  for (const actor of actors) await post(b.url, actor, "warm");

  const before = rssMiB(b.pid);
  let peak = before;
  const sampler = setInterval(() => peak = Math.max(peak, rssMiB(b.pid)), 5);
  const body = new Uint8Array(bodyBytes).fill(65);
  const started = performance.now();
  for (let round = 0; round < ROUNDS; round++) {
    const answers = await Promise.all(actors.map((actor) => post(b.url, actor, body)));
    for (const answer of answers) {
      if (answer.node !== "a" || answer.bytes < bodyBytes) {
        throw new Error(`answered by ${answer.node} with ${answer.bytes} bytes`);
      }
    }
  }
  const seconds = (performance.now() - started) / 1000;
  clearInterval(sampler);
  peak = Math.max(peak, rssMiB(b.pid));
  const whole = concurrent * 2 * bodyBytes / (1024 * 1024);
  const result = {
    root,
    v8Flags: v8Flags ?? null,
    concurrent,
    rounds: ROUNDS,
    bodyMiB: bodyBytes / (1024 * 1024),
    rssBeforeMiB: Number(before.toFixed(1)),
    peakRssMiB: Number(peak.toFixed(1)),
    riseMiB: Number((peak - before).toFixed(1)),
    wholeBodiesMiB: whole,
    seconds: Number(seconds.toFixed(2)),
  };
  console.log(JSON.stringify(result));
} finally {
  await endBench();
}
