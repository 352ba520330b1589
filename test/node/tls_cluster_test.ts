/**
 * Nodes with cluster listeners (issue 7): forwarding and actors.call over
 * mutual TLS pinned to the heartbeats, signed calls, internal classes, call
 * cycles across nodes, and revocation at the handshake.
 */

import assert from "node:assert/strict";
import { type NodeProcess, startNode, TESTBED_WASM } from "../helpers/node_process.ts";
import { clusterStatus, request, scratchDir } from "../helpers/cluster.ts";

const TESTBED = [
  "--actor",
  `testbed=${TESTBED_WASM}`,
  "--actor",
  `vault=${TESTBED_WASM}`,
  "--access",
  "vault=internal",
];

/** A port free now on loopback. */
export function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  listener.close();
  return port;
}

/** Starts node `id` with a cluster listener on a free loopback port (refusing plain HTTP unless `accept`). */
export function startTlsNode(
  id: string,
  dir: string,
  bucketUrl: string,
  options: { accept?: boolean; extra?: string[] } = {},
): Promise<NodeProcess> {
  const port = freePort();
  return startNode([
    ...TESTBED,
    "--node-id",
    id,
    "--lease-ttl-secs",
    "3",
    "--data-dir",
    `${dir}/${id}`,
    "--bucket",
    bucketUrl,
    "--cluster-listen",
    `127.0.0.1:${port}`,
    "--cluster-advertise",
    `https://127.0.0.1:${port}`,
    ...(options.accept ? ["--cluster-plaintext", "accept"] : []),
    ...(options.extra ?? []),
  ]);
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
