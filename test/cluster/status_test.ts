import assert from "node:assert/strict";
import { clusterCommand } from "../../cli/cluster.ts";
import { UsageError } from "../../cli/args.ts";
import { ROOT, runWasmkeep } from "../../src/testing/node_process.ts";
import { startMoto } from "../../src/testing/moto.ts";
import type { Bucket, PutOptions } from "../../src/bucket/bucket.ts";
import { FileBucket } from "../../src/bucket/file.ts";
import { MemoryBucket } from "../../src/bucket/memory.ts";
import { S3Bucket } from "../../src/bucket/s3.ts";
import {
  decodeHeartbeat,
  encodeHeartbeat,
  type Heartbeat,
  LEGACY_HEARTBEAT_MAGIC,
} from "../../src/cluster/heartbeat.ts";
import { fenceNode } from "../../src/cluster/fence_forget.ts";
import { formatDuration } from "../../src/cluster/status.ts";

/** A fixed "now" for in-process runs, so ages print exactly. */
const NOW = 1_790_000_000_000;
const FINGERPRINT = "ab".repeat(32);

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
    app: "acme/shop",
    state: "serving",
    ...fields,
  };
}

/** A node with a cluster listener and a TLS pin. */
function pinned(nodeId: string, fields: Partial<Heartbeat> = {}): Heartbeat {
  return heartbeat(nodeId, {
    clusterAddress: `https://${nodeId}:7443`,
    fingerprint: FINGERPRINT,
    ...fields,
  });
}

function legacy(nodeId: string, at: number): Uint8Array {
  return new TextEncoder().encode(
    `${LEGACY_HEARTBEAT_MAGIC}\n${nodeId}\n${nodeId}-old\n${at}\nhttp://${nodeId}:8080\n0.2.0\n`,
  );
}

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `wasmkeep cluster ARGS` in this process, on the clock `now`. */
async function cluster(args: string[], now = NOW): Promise<Run> {
  const out: string[] = [];
  const err: string[] = [];
  try {
    const code = await clusterCommand(args, {
      stdout: (text) => out.push(text),
      stderr: (text) => err.push(text),
      now: () => now,
    });
    return { code, stdout: out.join("\n"), stderr: err.join("\n") };
  } catch (error) {
    if (error instanceof UsageError) return { code: 2, stdout: "", stderr: error.message };
    throw error;
  }
}

/** A file bucket in a fresh directory, with its URL. */
async function fileBucket(): Promise<{ bucket: FileBucket; url: string; dir: string }> {
  const dir = await Deno.makeTempDir({ prefix: "wasmkeep-status-" });
  // A cluster's bucket exists: the cluster commands refuse a folder that does not.
  await Deno.mkdir(`${dir}/bucket`);
  return { bucket: new FileBucket(`${dir}/bucket`), url: `file://${dir}/bucket`, dir };
}

async function putHeartbeats(bucket: Bucket, ...heartbeats: Heartbeat[]): Promise<void> {
  for (const h of heartbeats) await bucket.put(`nodes/${h.nodeId}`, encodeHeartbeat(h));
}

async function putApp(bucket: Bucket, app: string, version: string, seq: number): Promise<void> {
  await bucket.put(
    `apps/${app}/current`,
    new TextEncoder().encode(JSON.stringify({ version, seq })),
  );
}

async function text(bucket: Bucket, key: string): Promise<string | null> {
  const object = await bucket.get(key);
  return object ? new TextDecoder().decode(object.body) : null;
}

function warnings(stdout: string): string[] {
  return stdout.split("\n").filter((line) => line.startsWith("warning: "));
}

Deno.test("formatDuration: milliseconds, tenths of seconds, then whole minutes, hours, days", () => {
  assert.equal(formatDuration(979), "979ms");
  assert.equal(formatDuration(2250), "2.2s");
  assert.equal(formatDuration(10_000), "10.0s");
  assert.equal(formatDuration(59_990), "59.9s");
  assert.equal(formatDuration(14 * 60_000 + 59_000), "14m");
  assert.equal(formatDuration(5 * 3_600_000), "5h");
  assert.equal(formatDuration(3 * 86_400_000), "3d");
});

Deno.test("status: live, stale, fenced and released nodes, the app table, summary and the mixed-TLS warning", async () => {
  const { bucket, url, dir } = await fileBucket();
  try {
    await putHeartbeats(
      bucket,
      pinned("a", { at: NOW - 979 }),
      heartbeat("b", { at: NOW - 2200 }),
      pinned("c", { at: NOW - 14 * 60_000 }),
      // Fenced or released: not live however young.
      pinned("d", { at: NOW - 500, lease: "fenced", fencedBy: "a" }),
      heartbeat("e", { at: NOW - 300, lease: "released", app: undefined }),
    );
    await putApp(bucket, "acme/shop", "9cf4de9152d8dd29", 1);
    await bucket.put("apps/acme/shop/versions/9cf4de9152d8dd29", new Uint8Array([1]));
    const run = await cluster(["status", "--bucket", url]);
    assert.equal(run.code, 0, run.stderr);
    assert.equal(
      run.stdout,
      [
        `Cluster ${url} (live: heartbeat within 10.0s)`,
        "",
        "NODE  LIVE           AGE    STATE    VERSION  APP        ADDRESS        CLUSTER ADDRESS  TLS",
        "a     yes            979ms  serving  0.3.0    acme/shop  http://a:8080  https://a:7443   pinned",
        "b     yes            2.2s   serving  0.3.0    acme/shop  http://b:8080  -                plain",
        "c     no             14m    serving  0.3.0    acme/shop  http://c:8080  https://c:7443   pinned",
        "d     no (fenced)    500ms  serving  0.3.0    acme/shop  http://d:8080  https://d:7443   pinned",
        "e     no (released)  300ms  serving  0.3.0    -          http://e:8080  -                plain",
        "",
        "APP        DEPLOYED VERSION  SEQ",
        "acme/shop  9cf4de9152d8dd29  1",
        "",
        "2 of 5 nodes live; TLS: 1 with a cluster listener, 1 plain; version: 0.3.0",
        "warning: mixed plain and TLS nodes: b still plain while a use the cluster listener; give every node a cluster listener, then drop --cluster-plaintext accept (ADR 0011)",
      ].join("\n"),
    );

    // The real command line, on the real clock: the same verdicts and exit 0.
    await putHeartbeats(
      bucket,
      pinned("a", { at: Date.now() }),
      heartbeat("b", { at: Date.now() }),
    );
    const real = await runWasmkeep(["cluster", "status", "--bucket", url]);
    assert.equal(real.code, 0, real.stderr);
    const live = Object.fromEntries(
      real.stdout.split("\n").filter((l) => /^[a-e] /.test(l)).map((l) => {
        const [node, ...rest] = l.split(/\s{2,}/);
        return [node, rest[0]];
      }),
    );
    assert.deepEqual(live, {
      a: "yes",
      b: "yes",
      c: "no",
      d: "no (fenced)",
      e: "no (released)",
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("status: an empty prefix and a bucket of only dead nodes exit 1 with the no-live-node warning", async () => {
  const { bucket, url, dir } = await fileBucket();
  try {
    // Nothing at all (an empty folder): the real CLI.
    const empty = await runWasmkeep(["cluster", "status", "--bucket", url]);
    assert.equal(empty.code, 1, empty.stderr);
    assert.match(empty.stdout, /no heartbeat under nodes\//);
    assert.match(
      empty.stdout,
      /^0 of 0 nodes live; TLS: 0 with a cluster listener, 0 plain; version: -$/m,
    );
    assert.deepEqual(warnings(empty.stdout), ["warning: no live node: no heartbeat under nodes/"]);
    assert.equal(empty.stderr, "");

    await putHeartbeats(
      bucket,
      heartbeat("a", { at: NOW - 10_000 }), // exactly the ttl: no longer live
      heartbeat("b", { lease: "fenced", fencedBy: "cli" }),
      heartbeat("c", { lease: "released" }),
    );
    const dead = await cluster(["status", "--bucket", url]);
    assert.equal(dead.code, 1);
    assert.match(dead.stdout, /^0 of 3 nodes live; .*version: -$/m);
    assert.deepEqual(warnings(dead.stdout), [
      "warning: no live node: none of the 3 heartbeats is a live lease written within 10.0s",
    ]);
    assert.equal((await cluster(["status", "--bucket", url, "--json"])).code, 1);

    // With one live node it is 0 again, whatever the warnings.
    await putHeartbeats(bucket, heartbeat("a", { at: NOW - 9_999, state: "stuck" }));
    const one = await cluster(["status", "--bucket", url]);
    assert.equal(one.code, 0);
    assert.equal(warnings(one.stdout).length, 1);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("status: a bucket it cannot read is an error naming the reason", async () => {
  const dir = await Deno.makeTempDir({ prefix: "wasmkeep-status-" });
  try {
    // A file where the bucket's directory should be.
    await Deno.writeTextFile(`${dir}/not-a-dir`, "x");
    const run = await runWasmkeep(["cluster", "status", "--bucket", `file://${dir}/not-a-dir`]);
    assert.equal(run.code, 1);
    assert.match(run.stderr, /wasmkeep: cannot read bucket file:\/\/.*not-a-dir: .+/);
    assert.equal(run.stdout, "");
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("status: warnings for different versions, a stuck node, leases dated ahead and unreadable objects", async () => {
  const { bucket, url, dir } = await fileBucket();
  try {
    await putHeartbeats(
      bucket,
      heartbeat("a", { version: "0.3.0" }),
      heartbeat("b", { version: "0.3.1", state: "stuck" }),
      heartbeat("c", { version: "0.3.0", state: "draining" }),
      // 5 minutes ahead: live, never stale.
      heartbeat("d", { version: "0.3.0", at: NOW + 5 * 60_000 }),
      // Ahead within the allowed skew: no warning.
      heartbeat("e", { version: "0.3.0", at: NOW + 900 }),
      // Fenced, but dated ahead: still warned about.
      heartbeat("f", { at: NOW + 30_000, lease: "fenced", fencedBy: "cli" }),
      // Stuck but dead: its state is old news.
      heartbeat("g", { at: NOW - 60_000, state: "stuck" }),
    );
    await bucket.put("nodes/h", new TextEncoder().encode("garbage\n"));
    await bucket.put("nodes/i", encodeHeartbeat(heartbeat("other")));
    await bucket.put("apps/acme/broken/current", new TextEncoder().encode("{"));
    const run = await cluster(["status", "--bucket", url]);
    assert.equal(run.code, 0, run.stderr);
    assert.deepEqual(warnings(run.stdout), [
      'warning: nodes/h cannot be read as a heartbeat (line 1 is "garbage", not a heartbeat); counted not live',
      'warning: nodes/i cannot be read as a heartbeat (line 2 names node "other"); counted not live',
      "warning: live nodes on different WasmKeep versions: 0.3.0 (a, c, d, e), 0.3.1 (b); nodes of different versions are not supported together: stop every node, upgrade them all, start them all (Upgrading WasmKeep)",
      "warning: node b is draining but stuck: it still holds actors or WebSockets and no other live node of its app takes them; start another node, or undrain one",
      "warning: node d's lease is dated 5m ahead of this machine's clock, more than the allowed skew of 1.0s: it never goes stale, so no node fences it and the actors it holds stay held until that date; fix the clock that is wrong (that node's, or this machine's if it is behind)",
      "warning: node f is fenced, but its lease is dated 30.0s ahead of this machine's clock, more than the allowed skew of 1.0s: the actors it holds are free only 15.0s after that date; fix the clock that is wrong (that node's, or this machine's if it is behind)",
      "warning: apps/acme/broken/current cannot be read (not JSON)",
    ]);
    const rows = run.stdout.split("\n");
    assert.ok(
      rows.includes(
        "5 of 9 nodes live; TLS: 0 with a cluster listener, 5 plain; version: 0.3.0, 0.3.1",
      ),
    );
    assert.match(run.stdout, /^d +yes +ahead 5m +serving/m);
    assert.match(run.stdout, /^h +no \(unreadable\) +- +- +- +- +- +- +-$/m);
    assert.match(run.stdout, /^acme\/broken +\? +\?$/m);

    // Once f's date is no longer ahead by more than the skew, it is not warned about.
    const later = await cluster(["status", "--bucket", url], NOW + 28_900);
    assert.ok(warnings(later.stdout).some((w) => w.startsWith("warning: node f is fenced")));
    const then = await cluster(["status", "--bucket", url], NOW + 29_500);
    assert.ok(!warnings(then.stdout).some((w) => w.startsWith("warning: node f is fenced")));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("status: STATE from the heartbeat, - for a node that predates draining, the drain requests and their warnings", async () => {
  const { bucket, url, dir } = await fileBucket();
  try {
    await putHeartbeats(
      bucket,
      heartbeat("a"),
      heartbeat("b", { state: "draining" }),
      heartbeat("c", { state: "drained" }),
      heartbeat("d", { state: "stuck" }),
      // Line 11 is not take: a version from before draining, whose "serving" says nothing.
      heartbeat("e", { takesMoved: false }),
      heartbeat("f", { at: NOW - 60_000 }),
    );
    await bucket.put("nodes/g", legacy("g", NOW - 3000));
    for (const node of ["b", "e", "f", "typo"]) {
      await bucket.put(`drains/${node}`, new TextEncoder().encode(`{"version":1}`));
    }
    // A key that names no node is not a request for one.
    await bucket.put("drains/Not_A_Node", new TextEncoder().encode("{}"));
    const run = await cluster(["status", "--bucket", url]);
    assert.equal(run.code, 0, run.stderr);
    const states = Object.fromEntries(
      run.stdout.split("\n").filter((l) => /^[a-g] /.test(l)).map((l) => {
        const cells = l.split(/\s{2,}/);
        return [cells[0], cells[3]];
      }),
    );
    assert.deepEqual(states, {
      a: "serving",
      b: "draining",
      c: "drained",
      d: "stuck",
      e: "-",
      f: "serving",
      g: "-",
    });
    assert.ok(run.stdout.split("\n").includes("drain requested: b, e, f, typo"), run.stdout);
    assert.deepEqual(warnings(run.stdout), [
      "warning: live nodes on different WasmKeep versions: 0.2.0 (g), 0.3.0 (a, b, c, d, e); nodes of different versions are not supported together: stop every node, upgrade them all, start them all (Upgrading WasmKeep)",
      "warning: node d is draining but stuck: it still holds actors or WebSockets and no other live node of its app takes them; start another node, or undrain one",
      "warning: node e is asked to drain but runs a version that predates draining (its heartbeat's line 11 is not take): it keeps serving and taking actors; stop it instead",
      "warning: a drain request is waiting for node f, which is not live: a process started with that id drains from its start; wasmkeep cluster undrain f withdraws it",
      "warning: a drain request is waiting for node typo, which is not live: a process started with that id drains from its start; wasmkeep cluster undrain typo withdraws it",
    ]);

    const json = JSON.parse((await cluster(["status", "--bucket", url, "--json"])).stdout);
    assert.deepEqual(
      Object.fromEntries(json.nodes.map((n: { id: string; state: unknown }) => [n.id, n.state])),
      { a: "serving", b: "draining", c: "drained", d: "stuck", e: null, f: "serving", g: null },
    );
    assert.deepEqual(json.drains, ["b", "e", "f", "typo"]);
    assert.deepEqual(json.warnings, warnings(run.stdout).map((w) => w.slice("warning: ".length)));

    // No drain request: no line.
    for (const node of ["b", "e", "f", "typo"]) await bucket.delete(`drains/${node}`);
    assert.doesNotMatch((await cluster(["status", "--bucket", url])).stdout, /drain requested/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("status --json: bucket, nodes, apps, summary, warnings", async () => {
  const { bucket, url, dir } = await fileBucket();
  try {
    await putHeartbeats(
      bucket,
      pinned("a", { at: NOW - 979 }),
      heartbeat("b", { at: NOW + 2000, app: undefined }),
      heartbeat("c", { lease: "fenced", fencedBy: "a", at: NOW - 60_000 }),
    );
    await bucket.put("nodes/d", legacy("d", NOW - 3000));
    await putApp(bucket, "acme/shop", "9cf4de9152d8dd29", 7);
    const run = await cluster(["status", "--bucket", url, "--json"]);
    assert.equal(run.code, 0, run.stderr);
    const json = JSON.parse(run.stdout);
    const common = {
      state: "serving",
      version: "0.3.0",
      app: "acme/shop",
      format: 2,
    };
    assert.deepEqual(json, {
      bucket: url,
      live_within_ms: 10_000,
      nodes: [
        {
          ...common,
          id: "a",
          live: true,
          lease: "live",
          age_ms: 979,
          at_ms: NOW - 979,
          address: "http://a:8080",
          cluster_address: "https://a:7443",
          tls: "pinned",
        },
        {
          ...common,
          id: "b",
          live: true,
          lease: "live",
          age_ms: -2000,
          ahead_ms: 2000,
          at_ms: NOW + 2000,
          app: null,
          address: "http://b:8080",
          cluster_address: null,
          tls: "plain",
        },
        {
          ...common,
          id: "c",
          live: false,
          lease: "fenced",
          fenced_by: "a",
          age_ms: 60_000,
          at_ms: NOW - 60_000,
          address: "http://c:8080",
          cluster_address: null,
          tls: "plain",
        },
        {
          id: "d",
          live: true,
          lease: "live",
          age_ms: 3000,
          at_ms: NOW - 3000,
          state: null,
          version: "0.2.0",
          app: null,
          address: "http://d:8080",
          cluster_address: null,
          tls: "plain",
          format: 1,
        },
      ],
      apps: [{ app: "acme/shop", version: "9cf4de9152d8dd29", seq: 7 }],
      drains: [],
      summary: { live: 3, nodes: 4, cluster_listener: 1, plain: 2, versions: ["0.2.0", "0.3.0"] },
      warnings: [
        "mixed plain and TLS nodes: b, d still plain while a use the cluster listener; give every node a cluster listener, then drop --cluster-plaintext accept (ADR 0011)",
        "live nodes on different WasmKeep versions: 0.2.0 (d), 0.3.0 (a, b); nodes of different versions are not supported together: stop every node, upgrade them all, start them all (Upgrading WasmKeep)",
        "node b's lease is dated 2.0s ahead of this machine's clock, more than the allowed skew of 1.0s: it never goes stale, so no node fences it and the actors it holds stay held until that date; fix the clock that is wrong (that node's, or this machine's if it is behind)",
      ],
    });
    // No apps: an empty list, and no APP table in the text.
    await bucket.delete("apps/acme/shop/current");
    assert.deepEqual(
      JSON.parse((await cluster(["status", "--bucket", url, "--json"])).stdout).apps,
      [],
    );
    assert.doesNotMatch((await cluster(["status", "--bucket", url])).stdout, /DEPLOYED VERSION/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("fence: a live node is written fenced with its other lines and its date kept, and its next write is refused", async () => {
  const { bucket, url, dir } = await fileBucket();
  try {
    // Written just now: the CLI's start-up (slow on a loaded machine) is all its age.
    const at = Date.now();
    const { etag } = await bucket.put("nodes/a", encodeHeartbeat(pinned("a", { at })));
    const before = (await text(bucket, "nodes/a"))!;
    const run = await runWasmkeep(["cluster", "fence", "a", "--bucket", url]);
    assert.equal(run.code, 0, run.stderr);
    assert.match(
      run.stdout,
      /^fenced node a \(nodes\/a; its lease was live, last written (\d+ms|\d\.\ds) ago\)/,
    );
    assert.match(
      run.stdout,
      new RegExp(
        `its actors are free at ${
          new Date(at + 15_000).toISOString().replaceAll(".", "\\.")
        }, 15\\.0s after its last live write \\(in \\d+\\.\\ds\\)`,
      ),
    );
    const after = (await text(bucket, "nodes/a"))!;
    const expected = before.split("\n");
    expected[4] = "fenced cli";
    assert.equal(after, expected.join("\n"));
    assert.equal(decodeHeartbeat(new TextEncoder().encode(after), "nodes/a").at, at);
    // The node's own next write, conditioned on its last ETag, is refused: it stops.
    await assert.rejects(
      bucket.put("nodes/a", encodeHeartbeat(pinned("a")), { ifMatch: etag }),
      /If-Match refused/,
    );
    const status = await cluster(["status", "--bucket", url], at + 1500);
    assert.equal(status.code, 1);
    assert.match(status.stdout, /^a +no \(fenced\) +1\.5s +serving/m);

    // Fencing it again writes nothing.
    const again = await cluster(["fence", "a", "--bucket", url], at + 20_000);
    assert.equal(again.code, 0);
    assert.equal(
      again.stdout,
      "node a is already fenced (by cli): nothing written\n" +
        "its actors are free now (since 5.0s, 15.0s after its last live write)",
    );
    assert.equal(await text(bucket, "nodes/a"), after);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("fence: a node with no heartbeat gets a fence dated now, free 15 s later", async () => {
  const { bucket, url, dir } = await fileBucket();
  try {
    const run = await cluster(["fence", "ghost", "--bucket", url]);
    assert.equal(run.code, 0, run.stderr);
    assert.equal(
      run.stdout,
      [
        "no heartbeat for node ghost: wrote a fence dated now (nodes/ghost)",
        "a process still running with this id stops at its next heartbeat write",
        `its actors are free at ${
          new Date(NOW + 15_000).toISOString()
        }, 15.0s after the fence (in 15.0s)`,
      ].join("\n"),
    );
    const written = decodeHeartbeat((await bucket.get("nodes/ghost"))!.body, "nodes/ghost");
    assert.equal(written.at, NOW);
    assert.equal(written.lease, "fenced");
    assert.equal(written.fencedBy, "cli");
    const status = await cluster(["status", "--bucket", url]);
    // A fence the CLI wrote is no node's report: STATE is "-".
    assert.match(status.stdout, /^ghost +no \(fenced\) +0ms +- +- +- +- +- +plain$/m);

    // An object that cannot be read is replaced the same way.
    await bucket.put("nodes/junk", new TextEncoder().encode("not a heartbeat"));
    const junk = await cluster(["fence", "junk", "--bucket", url]);
    assert.equal(junk.code, 0, junk.stderr);
    assert.match(
      junk.stdout,
      /^nodes\/junk could not be read \(line 1 is .*\): replaced it with a fence dated now/,
    );
    assert.equal(decodeHeartbeat((await bucket.get("nodes/junk"))!.body, "nodes/junk").at, NOW);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** A bucket where the node renews its heartbeat just before each of the first `renewals` fence writes. */
class RenewingBucket extends MemoryBucket {
  renewals: number;
  puts = 0;
  constructor(renewals: number) {
    super();
    this.renewals = renewals;
  }
  override async put(key: string, body: Uint8Array, options: PutOptions = {}) {
    if (options.ifMatch !== undefined || options.ifNoneMatch !== undefined) {
      this.puts++;
      if (this.renewals > 0) {
        this.renewals--;
        const current = await this.get(key);
        const at = current ? decodeHeartbeat(current.body, key).at + 3000 : NOW;
        await super.put(key, encodeHeartbeat(heartbeat("a", { at })));
      }
    }
    return super.put(key, body, options);
  }
}

Deno.test("fence: a refused condition is re-read and tried again, keeping the newest date", async () => {
  const bucket = new RenewingBucket(2);
  await bucket.put("nodes/a", encodeHeartbeat(heartbeat("a", { at: NOW - 1000 })));
  const outcome = await fenceNode(bucket, "a", { now: () => NOW });
  assert.equal(outcome.action, "fenced");
  assert.equal(bucket.puts, 3);
  const stored = decodeHeartbeat((await bucket.get("nodes/a"))!.body, "nodes/a");
  assert.equal(stored.lease, "fenced");
  assert.equal(stored.at, NOW + 5000);
  assert.equal(outcome.freeAt, NOW + 20_000);

  // A node that keeps renewing under every try: the fence gives up and says so.
  const busy = new RenewingBucket(100);
  await busy.put("nodes/a", encodeHeartbeat(heartbeat("a")));
  await assert.rejects(
    fenceNode(busy, "a", { now: () => NOW }),
    /changed under each of 5 fence attempts/,
  );
  assert.equal(busy.puts, 5);

  // A missing object that appears meanwhile: If-None-Match is refused, then the new one is fenced.
  const appearing = new RenewingBucket(1);
  assert.equal((await fenceNode(appearing, "a", { now: () => NOW })).action, "fenced");
  assert.equal(appearing.puts, 2);
});

Deno.test("fence: a released node and a heartbeat from before node leases are left as they are", async () => {
  const { bucket, url, dir } = await fileBucket();
  try {
    await putHeartbeats(bucket, heartbeat("a", { lease: "released" }));
    const released = await cluster(["fence", "a", "--bucket", url]);
    assert.equal(released.code, 0);
    assert.equal(
      released.stdout,
      "node a stopped cleanly (its heartbeat is released): nothing to fence",
    );
    assert.equal(decodeHeartbeat((await bucket.get("nodes/a"))!.body, "nodes/a").lease, "released");

    await bucket.put("nodes/old", legacy("old", NOW - 60_000));
    const old = await cluster(["fence", "old", "--bucket", url]);
    assert.equal(old.code, 1);
    assert.match(
      old.stderr,
      /nodes\/old is a heartbeat in the format from before node leases.*does not read fences.*wasmkeep cluster forget old/,
    );
    assert.equal(decodeHeartbeat((await bucket.get("nodes/old"))!.body, "nodes/old").format, 1);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("forget: refuses a node lease and a young or missing heartbeat, removes an old one from before node leases", async () => {
  const { bucket, url, dir } = await fileBucket();
  try {
    await putHeartbeats(bucket, heartbeat("a", { at: NOW - 3_600_000, lease: "fenced" }));
    const lease = await runWasmkeep(["cluster", "forget", "a", "--bucket", url]);
    assert.equal(lease.code, 1);
    assert.match(
      lease.stderr,
      /nodes\/a is a node lease.*leases are never collected.*Stop the node.*wasmkeep cluster fence a/,
    );
    assert.ok(await bucket.get("nodes/a"));

    await bucket.put("nodes/old", legacy("old", NOW - 20_000));
    const young = await cluster(["forget", "old", "--bucket", url]);
    assert.equal(young.code, 1);
    assert.match(
      young.stderr,
      /nodes\/old was written 20\.0s ago: .* removed only once it is older than 25\.0s .*try again in 5\.0s/,
    );
    assert.ok(await bucket.get("nodes/old"));
    // Exactly 25 s is not older than 25 s.
    assert.equal((await cluster(["forget", "old", "--bucket", url], NOW + 5000)).code, 1);

    const run = await cluster(["forget", "old", "--bucket", url], NOW + 5001);
    assert.equal(run.code, 0, run.stderr);
    assert.equal(
      run.stdout,
      "removed nodes/old (a heartbeat from before node leases, last written 25.0s ago)",
    );
    assert.equal(await bucket.get("nodes/old"), null);

    const missing = await cluster(["forget", "old", "--bucket", url]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /no heartbeat nodes\/old: nothing to forget/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("cluster usage errors exit 2 naming the flag; --help exits 0", async () => {
  const url = "file:///nonexistent-wasmkeep-bucket";
  for (
    const [args, message] of [
      [["cluster"], /cluster needs a command: status, fence, forget, drain or undrain/],
      [["cluster", "frob"], /unknown command 'cluster frob'/],
      [["cluster", "status"], /cluster status needs --bucket URL/],
      [["cluster", "status", "--bucket"], /--bucket needs a value/],
      [
        ["cluster", "status", "--bucket", "ftp://x"],
        /--bucket must be s3:\/\/BUCKET\[\/PREFIX\] or file:\/\/PATH, not 'ftp:\/\/x'/,
      ],
      [
        ["cluster", "status", "--bucket", url, "--bogus"],
        /unknown flag --bogus for 'cluster status'/,
      ],
      [["cluster", "status", "--bucket", url, "--json=yes"], /--json takes no value/],
      [["cluster", "status", "--bucket", url, "extra"], /cluster status takes no arguments/],
      [["cluster", "fence", "--bucket", url], /cluster fence needs a node id/],
      [["cluster", "fence", "Bad_Id", "--bucket", url], /'Bad_Id' is not a node id/],
      [["cluster", "fence", "a", "b", "--bucket", url], /cluster fence takes one node id/],
      [["cluster", "fence", "a"], /cluster fence needs --bucket URL/],
      [
        ["cluster", "forget", "a", "--bucket", url, "--json"],
        /unknown flag --json for 'cluster forget'/,
      ],
    ] as const
  ) {
    const { code, stderr } = await runWasmkeep([...args]);
    assert.equal(code, 2, `${args.join(" ")}: ${stderr}`);
    assert.match(stderr, message);
  }
  for (
    const args of [["cluster", "--help"], ["help", "cluster"], ["cluster", "status", "--help"]]
  ) {
    const { code, stdout } = await runWasmkeep(args);
    assert.equal(code, 0);
    assert.match(stdout, /^Usage: wasmkeep cluster/);
  }
  const fenceHelp = await cluster(["fence", "--help"]);
  assert.match(fenceHelp.stdout, /--bucket URL/);
  assert.match((await runWasmkeep(["--help"])).stdout, /cluster +check a cluster/);
});

Deno.test("status on moto: S3 credentials from the environment, a prefix, and a missing bucket", async () => {
  const moto = await startMoto();
  try {
    const url = `s3://${moto.bucket}/prod`;
    const bucket = S3Bucket.fromUrl(url, moto.env);
    await putHeartbeats(
      bucket,
      pinned("a", { at: Date.now() }),
      heartbeat("b", { at: Date.now() - 60_000 }),
    );
    await putApp(bucket, "acme/shop", "9cf4de9152d8dd29", 2);
    await bucket.close();
    const status = async (bucketUrl: string) => {
      const output = await new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", `${ROOT}main.ts`, "cluster", "status", "--bucket", bucketUrl, "--json"],
        env: moto.env,
        stdout: "piped",
        stderr: "piped",
      }).output();
      const decoder = new TextDecoder();
      return {
        code: output.code,
        stdout: decoder.decode(output.stdout),
        stderr: decoder.decode(output.stderr),
      };
    };
    const run = await status(url);
    assert.equal(run.code, 0, run.stderr);
    const json = JSON.parse(run.stdout);
    assert.deepEqual(json.nodes.map((n: { id: string; live: boolean }) => [n.id, n.live]), [[
      "a",
      true,
    ], ["b", false]]);
    assert.deepEqual(json.apps, [{ app: "acme/shop", version: "9cf4de9152d8dd29", seq: 2 }]);
    assert.equal(json.bucket, url);

    // Another prefix of the same bucket is empty.
    assert.equal((await status(`s3://${moto.bucket}/staging`)).code, 1);
    const missing = await status("s3://no-such-wasmkeep-bucket");
    assert.equal(missing.code, 1);
    assert.match(
      missing.stderr,
      /cannot read bucket s3:\/\/no-such-wasmkeep-bucket: .*NoSuchBucket/,
    );
  } finally {
    await moto.stop();
  }
});
