/**
 * WasmKeep as a dependency: a program outside the repository, with no import
 * map of ours, imports mod.ts by its file URL (as it would the published
 * package), runs, type-checks, and reads a real node's cluster through
 * clusterStatus().
 */

import assert from "node:assert/strict";
import { clusterCommand } from "../../../cli/cluster.ts";
import { FileBucket } from "../../../src/bucket/file.ts";
import { MemoryBucket } from "../../../src/bucket/memory.ts";
import { encodeHeartbeat, type Heartbeat } from "../../../src/cluster/heartbeat.ts";
import { clusterStatus, type ClusterStatusReport } from "../../../src/cluster/status_report.ts";
import { COUNTER_WASM, ROOT, runWasmkeep, startNode } from "../../../src/testing/node_process.ts";

const MOD_URL = new URL("../../../mod.ts", import.meta.url).href;
const NOW = 1_790_000_000_000;

/** Runs `deno ARGS` in `cwd`, as a program of its own would be run there. */
async function deno(
  args: string[],
  cwd: string,
): Promise<{ code: number; stdout: string; stderr: string }> {
  const output = await new Deno.Command(Deno.execPath(), {
    args,
    cwd,
    env: { DENO_NO_UPDATE_CHECK: "1", NO_COLOR: "1" },
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
 * A directory outside the repository holding `script`, and `deno.json` when
 * given; none of the repository's configuration applies there.
 */
async function consumerDir(script: string, denoJson?: string): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "package-consumer-" });
  assert.ok(!dir.startsWith(ROOT), `${dir} is inside the repository`);
  await Deno.writeTextFile(`${dir}/main.ts`, script);
  if (denoJson !== undefined) await Deno.writeTextFile(`${dir}/deno.json`, denoJson);
  return dir;
}

/** What may change between two reads of a live node: its last write and the reader's clock. */
function withoutAges(report: ClusterStatusReport): unknown {
  return {
    ...report,
    nodes: report.nodes.map(({ age_ms: _age, ahead_ms: _ahead, at_ms: _at, ...node }) => node),
  };
}

Deno.test("a program outside the repository imports mod.ts and reads a live node through clusterStatus()", async () => {
  const scratch = await Deno.makeTempDir({ prefix: "package-test-" });
  const bucketUrl = `file://${scratch}/bucket`;
  const script = `import { clusterStatus, MemoryBucket } from ${JSON.stringify(MOD_URL)};
const report = await clusterStatus({ bucket: Deno.args[0] });
const empty = await clusterStatus({ bucket: new MemoryBucket(), url: "memory" });
console.log(JSON.stringify({ report, empty }));
`;
  // Without a deno.json of its own, and with an empty one (its own, empty, import map).
  const dirs = [await consumerDir(script), await consumerDir(script, "{}\n")];
  try {
    const node = await startNode([
      "--actor",
      `counter=${COUNTER_WASM}`,
      "--data-dir",
      `${scratch}/data`,
      "--bucket",
      bucketUrl,
      "--node-id",
      "package-a",
      "--cluster-plaintext",
      "accept",
      // The node id check at start waits ttl + grace: 4.5 s instead of 15.
      "--lease-ttl-secs",
      "3",
    ]);
    try {
      const runs = await Promise.all(
        dirs.map((dir) => deno(["run", "-A", "main.ts", bucketUrl], dir)),
      );
      const cli = await runWasmkeep(["cluster", "status", "--bucket", bucketUrl, "--json"]);
      assert.equal(cli.code, 0, cli.stderr);
      const printed: ClusterStatusReport = JSON.parse(cli.stdout);
      for (const run of runs) {
        assert.equal(run.code, 0, run.stderr);
        const { report, empty } = JSON.parse(run.stdout);
        assert.deepEqual(
          report.nodes.map((n: { id: string; live: boolean }) => [n.id, n.live]),
          [["package-a", true]],
        );
        assert.equal(report.summary.live, 1);
        assert.equal(report.bucket, bucketUrl);
        assert.deepEqual(withoutAges(report), withoutAges(printed));
        assert.deepEqual(empty.summary, {
          live: 0,
          nodes: 0,
          cluster_listener: 0,
          plain: 0,
          versions: [],
        });
        assert.equal(empty.bucket, "memory");
      }
    } finally {
      await node.stop();
    }
  } finally {
    for (const dir of [scratch, ...dirs]) await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a program outside the repository deploys through mod.ts: its components are transpiled in the package's worker, a broken one refused by name", async () => {
  const scratch = await Deno.makeTempDir({ prefix: "package-deploy-" });
  const broken = `${scratch}/broken.wasm`;
  await Deno.writeFile(broken, new Uint8Array([0, 0x61, 0x73, 0x6d, 0x0d, 0, 1, 0, 1, 2, 3]));
  const script = `import { deploy, openBucket } from ${JSON.stringify(MOD_URL)};
const [bucketUrl, counter, broken] = Deno.args;
const bucket = openBucket(bucketUrl);
const app = { tenant: "acme", app: "shop" };
const outcome = await deploy(bucket, app, { actors: { counter } });
let refused = "";
try {
  await deploy(bucket, app, { actors: { counter, other: broken } });
} catch (error) {
  refused = String((error as Error).message);
}
console.log(JSON.stringify({
  seq: outcome.after.version.seq,
  hash: outcome.after.version.classes.counter.component,
  refused,
}));
await bucket.close();
`;
  const dir = await consumerDir(script);
  try {
    const run = await deno(
      ["run", "-A", "main.ts", `file://${scratch}/bucket`, COUNTER_WASM, broken],
      dir,
    );
    assert.equal(run.code, 0, run.stderr);
    const printed = JSON.parse(run.stdout);
    assert.equal(printed.seq, 1);
    const bytes = await Deno.readFile(COUNTER_WASM);
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", bytes));
    const hex = Array.from(digest, (b) => b.toString(16).padStart(2, "0")).join("");
    assert.equal(printed.hash, hex);
    assert.match(printed.refused, /broken\.wasm: is not a valid component: /);
  } finally {
    for (const d of [scratch, dir]) await Deno.remove(d, { recursive: true });
  }
});

Deno.test("a program outside the repository type-checks against the types mod.ts exports", async () => {
  const script = `import {
  type Bucket,
  type ClusterOptions,
  clusterStatus,
  type ClusterStatusReport,
  type ClusterStatusReportNode,
  createLogger,
  type Logger,
  type LoggerOptions,
  type LogLevel,
  MemoryBucket,
  type MemoryBucketOptions,
  NODE_DEFAULTS,
  type NodeOptions,
  openBucket,
  type OpenBucketOptions,
} from ${JSON.stringify(MOD_URL)};

const cluster: ClusterOptions = { plaintext: "accept", failoverWaitMs: 5_000, leaseTtlMs: 10_000 };
const options: NodeOptions = {
  ...NODE_DEFAULTS,
  nodeId: "a",
  hostname: "127.0.0.1",
  port: 0,
  dataDir: ".wasmkeep",
  actors: [],
  executors: 1,
  cluster,
};
const level: LogLevel = "warn";
const logging: LoggerOptions = { level, sink: () => {} };
const log: Logger = createLogger(logging).with({ test: true });
const memory: MemoryBucketOptions = { seed: 7, faults: { errorRate: 0 } };
const bucket: Bucket = new MemoryBucket(memory);
const open: OpenBucketOptions = { env: {} };
const opened: Bucket = openBucket("file:///nonexistent", open);
const report: ClusterStatusReport = await clusterStatus({ bucket, url: "memory" });
const nodes: ClusterStatusReportNode[] = report.nodes;
log.info("checked", { nodes: nodes.length, node: options.nodeId, opened: typeof opened });
`;
  const dir = await consumerDir(script);
  try {
    const run = await deno(["check", "main.ts"], dir);
    assert.equal(run.code, 0, run.stderr);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

function heartbeat(nodeId: string, fields: Partial<Heartbeat> = {}): Heartbeat {
  return {
    format: 2,
    nodeId,
    process: `${nodeId}-process`,
    at: NOW - 1000,
    lease: "live",
    address: `http://${nodeId}:8080`,
    readsSecrets: true,
    takesMoved: true,
    version: "0.3.0",
    state: "serving",
    ...fields,
  };
}

/** A file bucket that counts the calls of close(). */
class CountedCloses extends FileBucket {
  closed = 0;
  override close(): Promise<void> {
    this.closed++;
    return super.close();
  }
}

Deno.test("clusterStatus() returns exactly what cluster status --json prints", async () => {
  const dir = await Deno.makeTempDir({ prefix: "package-test-" });
  const url = `file://${dir}/bucket`;
  const bucket = new CountedCloses(`${dir}/bucket`);
  try {
    // Every optional field: a fence, a lease dated ahead, an unreadable heartbeat, a bad app.
    await bucket.put("nodes/a", encodeHeartbeat(heartbeat("a")));
    await bucket.put("nodes/b", encodeHeartbeat(heartbeat("b", { at: NOW + 5000 })));
    await bucket.put("nodes/c", encodeHeartbeat(heartbeat("c", { lease: "fenced" })));
    await bucket.put("nodes/d", new TextEncoder().encode("not a heartbeat"));
    await bucket.put("apps/acme/shop/current", new TextEncoder().encode("{"));
    const out: string[] = [];
    const code = await clusterCommand(["status", "--bucket", url, "--json"], {
      stdout: (text) => out.push(text),
      stderr: (text) => out.push(text),
      now: () => NOW,
    });
    assert.equal(code, 0, out.join("\n"));
    const printed = JSON.parse(out.join("\n"));
    const report = await clusterStatus({ bucket: url, now: () => NOW });
    // Strict: a key holding undefined (dropped by JSON) would differ.
    assert.deepEqual(report, printed);
    const always = Object.keys(report.nodes[0]);
    assert.deepEqual(report.nodes.map((n) => Object.keys(n).filter((k) => !always.includes(k))), [
      [],
      ["ahead_ms"],
      ["fenced_by"],
      ["problem"],
    ]);

    // An open bucket is read as it is and left open; it is named by `url`.
    const fromOpen = await clusterStatus({ bucket, url, now: () => NOW });
    assert.deepEqual(fromOpen, printed);
    assert.equal(bucket.closed, 0);
    assert.equal((await clusterStatus({ bucket: new MemoryBucket() })).bucket, "(open bucket)");
  } finally {
    await bucket.close();
    await Deno.remove(dir, { recursive: true });
  }
});

/** Every `.ts` file under `dir`, recursively. */
async function* sources(dir: string): AsyncGenerator<string> {
  for await (const entry of Deno.readDir(dir)) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory) yield* sources(path);
    else if (entry.name.endsWith(".ts")) yield path;
  }
}

Deno.test("the package's npm: imports are the versions deno.json pins, and none is a bare name", async () => {
  const pinned = Object.values(JSON.parse(await Deno.readTextFile(`${ROOT}deno.json`)).imports);
  const found = new Set<string>();
  const files = [`${ROOT}mod.ts`, `${ROOT}main.ts`];
  for (const dir of ["src", "cli"]) {
    for await (const file of sources(`${ROOT}${dir}`)) files.push(file);
  }
  for (const file of files) {
    // Without comment lines: the doc examples import jsr:@wasmkeep/cli.
    const text = (await Deno.readTextFile(file)).split("\n")
      .filter((line) => !/^\s*(\*|\/\/|\/\*)/.test(line)).join("\n");
    for (const [, specifier] of text.matchAll(/(?:from|import)\s*\(?\s*"([^".][^"]*)"/g)) {
      if (specifier.startsWith("node:")) continue;
      assert.ok(
        pinned.includes(specifier),
        `${file} imports ${specifier}, which deno.json does not pin`,
      );
      found.add(specifier);
    }
  }
  assert.deepEqual([...found].sort(), [...pinned].sort());
});
