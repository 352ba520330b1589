/**
 * Nodes with cluster listeners (issue 7): forwarding and actors.call over
 * mutual TLS pinned to the heartbeats, signed calls, internal classes, call
 * cycles across nodes, and revocation at the handshake.
 */

import assert from "node:assert/strict";
import {
  type NodeProcess,
  runWasmkeep,
  startNode,
  TESTBED_WASM,
} from "../../../src/testing/node_process.ts";
import {
  clusterStatus,
  nodeFlags,
  request,
  scratchDir,
  startTlsClusterNode,
} from "../../../src/testing/cluster.ts";
import { FileBucket } from "../../../src/bucket/file.ts";
import { decodeHeartbeat, encodeHeartbeat } from "../../../src/cluster/heartbeat.ts";
import { createNodeIdentity } from "../../../src/security/node_identity.ts";
import { type ByteConn, tlsConnector } from "../../../src/http/tls_connect.ts";
import { loadClusterSecret } from "../../../src/security/cluster_secret.ts";
import { signCall } from "../../../src/security/call_signature.ts";
import { systemClock, systemRandom } from "../../../src/time/clock.ts";
import { createLogger } from "../../../src/log.ts";

const TESTBED = [
  "--actor",
  `testbed=${TESTBED_WASM}`,
  "--actor",
  `vault=${TESTBED_WASM}`,
  "--access",
  "vault=internal",
];

/** Starts node `id` with a cluster listener (refusing plain HTTP unless `accept`). */
function startTlsNode(
  id: string,
  dir: string,
  bucketUrl: string,
  options: { accept?: boolean; extra?: string[] } = {},
): Promise<NodeProcess> {
  return startTlsClusterNode(id, dir, bucketUrl, TESTBED, options);
}

/** `/call?<target>`: the target percent-encoded once more, as the testbed decodes it. */
const call = (target: string) => `call?${encodeURIComponent(target)}`;

Deno.test("cluster listeners: forwarding and actors.call between two nodes over mutual TLS; callers believed only when signed; internal classes; a call cycle across nodes is refused", async () => {
  const dir = await scratchDir("wk-tls-");
  const bucketUrl = `file://${dir}/bucket`;
  try {
    const [a, b] = await Promise.all([
      startTlsNode("a", dir, bucketUrl),
      startTlsNode("b", dir, bucketUrl),
    ]);
    try {
      // Try it locally: a takes x; b forwards to a over the cluster port.
      let answer = await request(`${a.url}/actor/testbed/x/insert?one`, { method: "POST" });
      assert.deepEqual([answer.status, answer.body, answer.node], [200, "1", "a"]);
      answer = await request(`${b.url}/actor/testbed/x/insert?two`, { method: "POST" });
      assert.deepEqual([answer.status, answer.body, answer.node], [200, "1", "a"]);
      answer = await request(`${b.url}/actor/testbed/x/rows`);
      assert.deepEqual([answer.status, answer.body, answer.node], [200, "2", "a"]);
      assert.match(a.logs(), /cluster listener up/);
      // Not ready until peers can have listed the new fingerprint: a period
      // and the allowed skew (0.9 + 0.3 s with a 3 s ttl) after joining.
      const at = (message: string) =>
        Date.parse(a.logs().match(new RegExp(`^(\\S+) INFO  ${message}`, "m"))![1]);
      const wait = at("node ready") - at("node joined the cluster");
      assert.ok(wait >= 1150, `ready ${wait} ms after joining`);

      // b takes y; y calls x on a: x sees y as its caller.
      answer = await request(`${b.url}/actor/testbed/y/rows`);
      assert.deepEqual([answer.status, answer.node], [200, "b"]);
      answer = await request(`${b.url}/actor/testbed/y/${call("testbed/x/caller")}`);
      assert.deepEqual([answer.status, answer.body, answer.node], [
        200,
        "default/testbed/y\n-",
        "b",
      ]);
      // A client forging a caller, through b forwarded to a, is not believed.
      answer = await request(`${b.url}/actor/testbed/x/caller`, {
        headers: { "x-wasmkeep-caller": "default/testbed/y" },
      });
      assert.deepEqual([answer.status, answer.body, answer.node], [200, "-\n-", "a"]);

      // An internal class: 403 from outside through either node, reached by calls.
      answer = await request(`${a.url}/actor/vault/v/insert?secret`, { method: "POST" });
      assert.equal(answer.status, 403);
      answer = await request(`${a.url}/actor/testbed/x/${call("vault/v/insert?by-call")}`, {
        method: "POST",
      });
      assert.deepEqual([answer.status, answer.body], [200, "1"]);
      // v is held by a now; y on b calls it across the cluster.
      answer = await request(`${b.url}/actor/testbed/y/${call("vault/v/rows")}`);
      assert.deepEqual([answer.status, answer.body, answer.node], [200, "1", "b"]);
      answer = await request(`${b.url}/actor/vault/v/rows`);
      assert.equal(answer.status, 403);

      // y (b) -> x (a) -> y (b): refused at b, where y waits, with the chain.
      const started = performance.now();
      answer = await request(
        `${b.url}/actor/testbed/y/${call(`testbed/x/${call("testbed/y/rows")}`)}`,
      );
      assert.equal(answer.status, 502, answer.body);
      assert.match(
        answer.body,
        /call failed: call cycle refused: default\/testbed\/y -> default\/testbed\/x -> default\/testbed\/y/,
      );
      assert.ok(performance.now() - started < 20_000, "refused, not timed out");

      const status = await clusterStatus(bucketUrl);
      assert.equal(status.code, 0, status.stderr);
      assert.match(status.stdout, /TLS: 2 with a cluster listener, 0 plain/);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** Sends one GET over `conn` and reads until the answer's end or the connection's: its status, or null. */
async function getOver(conn: ByteConn, path: string): Promise<number | null> {
  await conn.write(new TextEncoder().encode(`GET ${path} HTTP/1.1\r\nhost: peer\r\n\r\n`));
  const buffer = new Uint8Array(4096);
  let text = "";
  while (!/\r\n\r\n[\s\S]*\n/.test(text)) {
    const n = await conn.read(buffer).catch(() => null);
    if (n === null) return null;
    text += new TextDecoder().decode(buffer.subarray(0, n));
  }
  return Number(text.slice(9, 12));
}

/** Whether `conn` is closed by its peer within `ms`. */
async function closedWithin(conn: ByteConn, ms: number): Promise<boolean> {
  const buffer = new Uint8Array(1024);
  const timeout = new Promise<"open">((resolve) => setTimeout(() => resolve("open"), ms));
  const read = conn.read(buffer).then((n) => n === null ? "closed" : "data", () => "closed");
  return await Promise.race([read, timeout]) === "closed";
}

Deno.test("revocation: a peer whose heartbeat is fenced, or stops, is cut and refused at the handshake within 10 s", async () => {
  const dir = await scratchDir("wk-tls-");
  const bucketUrl = `file://${dir}/bucket`;
  const bucket = new FileBucket(`${dir}/bucket`);
  try {
    const a = await startTlsNode("a", dir, bucketUrl);
    try {
      const aHeartbeat = decodeHeartbeat((await bucket.get("nodes/a"))!.body, "nodes/a");
      const aPort = Number(new URL(aHeartbeat.clusterAddress!).port);
      // A peer of our own making: its heartbeat names its certificate.
      for (const ending of ["fenced", "expired"] as const) {
        const peer = await createNodeIdentity({ nodeId: "z", hosts: ["127.0.0.1"] });
        let beating = true;
        const beat = async () => {
          while (beating) {
            await bucket.put(
              "nodes/z",
              encodeHeartbeat({
                format: 2,
                nodeId: "z",
                process: crypto.randomUUID().slice(0, 16),
                at: Date.now(),
                lease: "live",
                address: "http://127.0.0.1:1",
                clusterAddress: "https://127.0.0.1:2",
                fingerprint: peer.fingerprint,
                readsSecrets: false,
                takesMoved: false,
                version: "0.1.0",
                state: "serving",
              }),
            );
            await new Promise((resolve) => setTimeout(resolve, 500));
          }
        };
        const beats = beat();
        const connect = tlsConnector({ identity: peer, pinFor: () => aHeartbeat.fingerprint });
        // Let in once a listing showed it (a period, 0.9 s with a ttl of 3 s).
        let open: ByteConn | undefined;
        for (let tries = 0; tries < 40 && !open; tries++) {
          await new Promise((resolve) => setTimeout(resolve, 250));
          const conn = await connect("127.0.0.1", aPort, AbortSignal.timeout(5000));
          if (await getOver(conn, "/_wasmkeep/health") === 200) open = conn;
          else conn.close();
        }
        assert.ok(open, "a live peer is let in");
        // Off the cluster port: no metrics, nothing but actors and checks.
        assert.equal(await getOver(open, "/_wasmkeep/metrics"), 404);

        const revokedAt = performance.now();
        beating = false;
        await beats;
        if (ending === "fenced") {
          const fenced = await runWasmkeep(["cluster", "fence", "z", "--bucket", bucketUrl]);
          assert.equal(fenced.code, 0, fenced.stderr);
        }
        assert.ok(await closedWithin(open, 10_000), `the open connection is cut (${ending})`);
        const cutAfter = performance.now() - revokedAt;
        const again = await connect("127.0.0.1", aPort, AbortSignal.timeout(5000))
          .then((conn) => getOver(conn, "/_wasmkeep/health"), () => null);
        assert.equal(again, null, `a new handshake is refused (${ending})`);
        assert.ok(cutAfter < 10_000, `${ending}: cut after ${cutAfter} ms`);
        console.log(`${ending}: connection cut ${Math.round(cutAfter)} ms after the change`);
      }
      assert.match(a.logs(), /closed connections of peers no longer trusted/);
      const metrics = await (await fetch(`${a.url}/_wasmkeep/metrics`)).text();
      assert.match(
        metrics,
        /wasmkeep_cluster_refused_connections_total\{reason="no longer trusted"\} [1-9]/,
      );
      assert.match(
        metrics,
        /wasmkeep_cluster_refused_connections_total\{reason="untrusted certificate"\} [1-9]/,
      );
    } finally {
      await a.stop();
    }
  } finally {
    await bucket.close();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("signed calls: on --listen in accept mode a signed call's caller is believed once, a replay is refused; a refusing node treats it as a client's", async () => {
  const dir = await scratchDir("wk-tls-");
  const bucketUrl = `file://${dir}/bucket`;
  const bucket = new FileBucket(`${dir}/bucket`);
  try {
    const [plain, refusing] = await Promise.all([
      startNode([
        ...TESTBED,
        ...nodeFlags("p"),
        "--data-dir",
        `${dir}/p`,
        "--bucket",
        bucketUrl,
      ]),
      startTlsNode("r", dir, bucketUrl),
    ]);
    try {
      const secret = await loadClusterSecret(bucket, { random: systemRandom, log: createLogger() });
      const signed = (node: string, path: string) =>
        signCall(secret, {
          targetNode: node,
          method: "GET",
          path,
          body: new Uint8Array(),
          caller: "default/testbed/w",
          chain: ["default/testbed/v"],
        }, { clock: systemClock, random: systemRandom });
      let headers = signed("p", "/actor/vault/s/caller");
      let answer = await request(`${plain.url}/actor/vault/s/caller`, { headers });
      assert.deepEqual([answer.status, answer.body], [
        200,
        "default/testbed/w\ndefault/testbed/v",
      ]);
      answer = await request(`${plain.url}/actor/vault/s/caller`, { headers });
      assert.equal(answer.status, 403);
      assert.match(answer.body, /^bad, expired or misaddressed signature \(.*nonce/);
      // Signed for another node: refused.
      answer = await request(`${plain.url}/actor/vault/s/caller`, {
        headers: signed("q", "/actor/vault/s/caller"),
      });
      assert.equal(answer.status, 403);
      // A refusing node counts calls only on its cluster port: on --listen
      // the same signed call is a client's, and internal classes refuse it.
      headers = signed("r", "/actor/testbed/t/caller");
      answer = await request(`${refusing.url}/actor/testbed/t/caller`, { headers });
      assert.deepEqual([answer.status, answer.body], [200, "-\n-"]);
      answer = await request(`${refusing.url}/actor/vault/s2/caller`, {
        headers: signed("r", "/actor/vault/s2/caller"),
      });
      assert.equal(answer.status, 403);
    } finally {
      await Promise.all([plain.stop(), refusing.stop()]);
    }
  } finally {
    await bucket.close();
    await Deno.remove(dir, { recursive: true });
  }
});

/** Starts plain node `id` (no listener, accept mode). */
function startPlainNode(id: string, dir: string, bucketUrl: string): Promise<NodeProcess> {
  return startNode([
    ...TESTBED,
    ...nodeFlags(id),
    "--data-dir",
    `${dir}/${id}`,
    "--bucket",
    bucketUrl,
  ]);
}

/** x is held by the first node, y by the second: each is reached through the other, and y calls x. */
async function assertServing(first: NodeProcess, second: NodeProcess, step: string) {
  const x = await request(`${first.url}/actor/testbed/x/insert?${step}`, { method: "POST" });
  assert.equal(x.status, 200, `${step}: ${x.body}`);
  const y = await request(`${second.url}/actor/testbed/y/insert?${step}`, { method: "POST" });
  assert.equal(y.status, 200, `${step}: ${y.body}`);
  const viaSecond = await request(`${second.url}/actor/testbed/x/rows`);
  assert.equal(viaSecond.status, 200, `${step}: x through the second node: ${viaSecond.body}`);
  const viaFirst = await request(`${first.url}/actor/testbed/y/rows`);
  assert.equal(viaFirst.status, 200, `${step}: y through the first node: ${viaFirst.body}`);
  const called = await request(`${second.url}/actor/testbed/y/${call("vault/vx/caller")}`);
  assert.equal(called.status, 200, `${step}: y calls an internal class: ${called.body}`);
}

Deno.test("moving from accept to refuse in the spec's order keeps serving; the wrong order gives the documented 503", async () => {
  const dir = await scratchDir("wk-tls-");
  const bucketUrl = `file://${dir}/bucket`;
  const running: NodeProcess[] = [];
  const start = async (node: Promise<NodeProcess>) => {
    const started = await node;
    running.push(started);
    return started;
  };
  const stop = async (node: NodeProcess) => {
    await node.stop();
    running.splice(running.indexOf(node), 1);
  };
  try {
    let a = await start(startPlainNode("a", dir, bucketUrl));
    let b = await start(startPlainNode("b", dir, bucketUrl));
    await assertServing(a, b, "plain");
    // 1. A listener on each node, one at a time, keeping accept.
    await stop(a);
    a = await start(startTlsNode("a", dir, bucketUrl, { accept: true }));
    await assertServing(a, b, "a-tls-accept");
    let status = await clusterStatus(bucketUrl);
    assert.match(status.stdout, /warning: mixed plain and TLS nodes: b still plain/);
    await stop(b);
    b = await start(startTlsNode("b", dir, bucketUrl, { accept: true }));
    await assertServing(a, b, "both-tls-accept");
    status = await clusterStatus(bucketUrl);
    assert.doesNotMatch(status.stdout, /warning: mixed/);
    // 2. Then without accept, one at a time.
    await stop(a);
    a = await start(startTlsNode("a", dir, bucketUrl));
    await assertServing(a, b, "a-refuse");
    await stop(b);
    b = await start(startTlsNode("b", dir, bucketUrl));
    await assertServing(a, b, "both-refuse");

    // The wrong order: b back to plain while a refuses plain HTTP.
    await stop(b);
    b = await start(startPlainNode("b", dir, bucketUrl));
    const taken = await request(`${b.url}/actor/testbed/y/rows`);
    assert.deepEqual([taken.status, taken.node], [200, "b"]);
    // Once a has listed b's new heartbeat (a period: 0.9 s with a 3 s ttl).
    await new Promise((resolve) => setTimeout(resolve, 2000));
    const refused = await request(`${a.url}/actor/testbed/y/rows`);
    assert.equal(refused.status, 503);
    assert.equal(refused.retryAfter, "1");
    assert.match(
      refused.body,
      /the actor's node b has no cluster listener and this node refuses plain HTTP between nodes \(--cluster-plaintext refuse\); retry/,
    );
    assert.match(a.logs(), /skipping peers without a cluster listener/);
    // And b's calls to a count as a client's there: an internal class refuses them.
    // va taken by a (x calls it there), then y on b calls it.
    const held = await request(`${a.url}/actor/testbed/x/${call("vault/va/rows")}`);
    assert.deepEqual([held.status, held.node], [200, "a"]);
    const callFromPlain = await request(`${b.url}/actor/testbed/y/${call("vault/va/caller")}`);
    assert.equal(callFromPlain.status, 403, callFromPlain.body);
    assert.match(callFromPlain.body, /actor class 'vault' is internal/);
    // a still reports ready: the load balancer keeps it (the spec's warning).
    const ready = await request(`${a.url}/_wasmkeep/ready`);
    assert.equal(ready.status, 200);
  } finally {
    await Promise.all(running.map((node) => node.stop()));
    await Deno.remove(dir, { recursive: true });
  }
});
