/**
 * A malformed Host header, or an absolute-form target whose authority is not
 * a host and port, is a 400 on the client port and on the cluster port
 * (issue 15): the handler's `new URL(request.url)` threw on some (500), and
 * others moved into the path (`evil/zz`) or the userinfo (`a@b`).
 */

import assert from "node:assert/strict";
import { COUNTER_WASM, type NodeProcess, startNode } from "../../../src/testing/node_process.ts";
import { scratchDir } from "../../../src/testing/cluster.ts";
import { type Answer, header, readAnswer, writeAll } from "../../http/tls_test_helpers.ts";
import { FileBucket } from "../../../src/bucket/file.ts";
import { decodeHeartbeat, encodeHeartbeat } from "../../../src/cluster/heartbeat.ts";
import { type ByteConn, tlsConnector } from "../../../src/http/tls_connect.ts";
import { createNodeIdentity } from "../../../src/security/node_identity.ts";
import { freePort } from "../../../src/testing/loopback.ts";

const BAD_HOST = "bad request: the Host header is not a valid host[:port]\n";
const BAD_TARGET = "bad request: the request target's authority is not a valid host[:port]\n";

/** Host headers that are not `host[:port]` with a port from 1 to 65535. */
const MALFORMED_HOSTS = [
  "a b",
  "[::1",
  "[:::]",
  "[::1]x",
  "x:abc",
  "x:70000",
  "x:0",
  "999.1.1.1",
  "evil/zz",
  "a@b",
  "a?b",
  "a#b",
  "a\\b",
];
/** Host headers served as before. */
const VALID_HOSTS = [
  "localhost",
  "127.0.0.1:8080",
  "[::1]:8080",
  "my-host.example",
  "node_1.internal:65535",
  "x:",
  "",
];

const encoder = new TextEncoder();

/** Sends `head` (a request line and headers, no body) on a new connection and reads the answer. */
async function send(open: () => Promise<ByteConn>, head: string): Promise<Answer> {
  const conn = await open();
  try {
    await writeAll(conn, encoder.encode(head + "\r\n"));
    return await readAnswer(conn);
  } finally {
    conn.close();
  }
}

/** `[case, status, body, node header]` of each request. */
type Row = [string, number, string, string | undefined];

/** Sends each of `heads` on its own connection: a row per answer, naming its request on a failure. */
async function rows(open: () => Promise<ByteConn>, heads: string[]): Promise<Row[]> {
  const out: Row[] = [];
  for (const head of heads) {
    const answer = await send(open, head).catch((error) => {
      throw new Error(`${JSON.stringify(head)}: ${error.message}`);
    });
    out.push([head, answer.status, answer.text, header(answer, "x-wasmkeep-node")]);
  }
  return out;
}

const withHost = (host: string) => `GET /actor/counter/a HTTP/1.1\r\nhost: ${host}\r\n`;

Deno.test("client port: a malformed Host header or absolute-form authority answers 400 in one line; valid hosts and a request without one are served", async () => {
  const dir = await Deno.makeTempDir({ prefix: "wk-host-" });
  let node: NodeProcess | undefined;
  try {
    node = await startNode([
      "--actor",
      `counter=${COUNTER_WASM}`,
      "--node-id",
      "h",
      "--data-dir",
      dir,
    ]);
    const port = Number(new URL(node.url).port);
    const open = () => Deno.connect({ hostname: "127.0.0.1", port });

    const badHosts = MALFORMED_HOSTS.map(withHost);
    const badTargets = ["http://x:70000", "http://x:abc", "http://[::1", "http://u@x", "http://x:0"]
      .map((authority) => `GET ${authority}/actor/counter/a HTTP/1.1\r\nhost: x\r\n`);
    assert.deepEqual(await rows(open, [...badHosts, ...badTargets]), [
      ...badHosts.map((head): Row => [head, 400, BAD_HOST, "h"]),
      ...badTargets.map((head): Row => [head, 400, BAD_TARGET, "h"]),
    ]);
    // The node's own paths are behind the same check.
    assert.deepEqual(
      (await rows(open, ["GET /_wasmkeep/health HTTP/1.1\r\nhost: x:70000\r\n"]))[0].slice(1),
      [400, BAD_HOST, "h"],
    );

    const valid = VALID_HOSTS.map(withHost).concat(
      "GET http://x:8080/actor/counter/a HTTP/1.1\r\nhost: y\r\n",
      "GET /actor/counter/a HTTP/1.0\r\n",
    );
    assert.deepEqual(await rows(open, valid), valid.map((head): Row => [head, 200, "0", "h"]));
    assert.doesNotMatch(node.logs(), /ERROR/);
  } finally {
    await node?.stop();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("cluster port: a malformed Host header answers 400 in one line to a trusted peer; valid hosts are served", async () => {
  const dir = await scratchDir("wk-host-");
  const bucket = new FileBucket(`${dir}/bucket`);
  const clusterPort = freePort();
  let node: NodeProcess | undefined;
  let beating = true;
  let beats: Promise<void> | undefined;
  try {
    node = await startNode([
      ...["--actor", `counter=${COUNTER_WASM}`, "--node-id", "h", "--lease-ttl-secs", "3"],
      ...["--data-dir", `${dir}/h`, "--bucket", `file://${dir}/bucket`],
      ...["--cluster-listen", `127.0.0.1:${clusterPort}`],
      ...["--cluster-advertise", `https://127.0.0.1:${clusterPort}`],
    ]);
    const pin = decodeHeartbeat((await bucket.get("nodes/h"))!.body, "nodes/h").fingerprint;
    // A peer of our own making: its live heartbeat names its certificate.
    const peer = await createNodeIdentity({ nodeId: "z", hosts: ["127.0.0.1"] });
    beats = (async () => {
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
    })();
    const connect = tlsConnector({ identity: peer, pinFor: () => pin });
    const open = () => connect("127.0.0.1", clusterPort, AbortSignal.timeout(5_000));
    // Let in once a listing of the heartbeats showed it (a period, 0.9 s with a ttl of 3 s).
    const health = "GET /_wasmkeep/health HTTP/1.1\r\nhost: 127.0.0.1\r\n";
    for (let tries = 0;; tries++) {
      const status = await send(open, health).then((answer) => answer.status, () => 0);
      if (status === 200) break;
      assert.ok(tries < 40, "the peer is let in");
      await new Promise((resolve) => setTimeout(resolve, 250));
    }

    const malformed = MALFORMED_HOSTS.map(withHost);
    assert.deepEqual(
      await rows(open, malformed),
      malformed.map((head): Row => [head, 400, BAD_HOST, "h"]),
    );
    // Peers send paths only: an absolute-form target is refused whatever its authority.
    assert.deepEqual(
      (await rows(open, ["GET http://x:70000/actor/counter/a HTTP/1.1\r\nhost: x\r\n"]))[0]
        .slice(1, 3),
      [400, "the request target must be a path\n"],
    );

    const valid = VALID_HOSTS.map(withHost).concat("GET /actor/counter/a HTTP/1.0\r\n");
    assert.deepEqual(await rows(open, valid), valid.map((head): Row => [head, 200, "0", "h"]));
    assert.doesNotMatch(node.logs(), /ERROR/);
  } finally {
    beating = false;
    await beats;
    await node?.stop();
    await bucket.close();
    await Deno.remove(dir, { recursive: true });
  }
});
