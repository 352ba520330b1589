/**
 * WebSockets relayed to the actor's owner from any node (issue 18, item 2;
 * issue 17's relayed upgrade through a second node), through real node
 * processes on one file bucket: over the cluster listeners (mutual TLS) and
 * plain in accept mode. Clients on different nodes share one room; a
 * relay is cut once the owner stops trusting the relaying node.
 */

import assert from "node:assert/strict";
import { scratchDir, startClusterNode, startTlsClusterNode } from "../helpers/cluster.ts";
import { runWasmkeep, TESTBED_WASM } from "../helpers/node_process.ts";

const TESTBED = ["--actor", `testbed=${TESTBED_WASM}`];

/** A socket to `url`, opened; its messages queued as they come. */
async function openSocket(url: string) {
  const socket = new WebSocket(url);
  const messages: string[] = [];
  const waiters: (() => void)[] = [];
  socket.onmessage = (event) => {
    messages.push(String(event.data));
    for (const wake of waiters.splice(0)) wake();
  };
  const closed = new Promise<{ code: number; at: number }>((resolve) => {
    socket.onclose = (event) => resolve({ code: event.code, at: performance.now() });
  });
  await new Promise<void>((resolve, reject) => {
    socket.onopen = () => resolve();
    socket.onerror = () => reject(new Error(`the socket to ${url} failed`));
  });
  const next = async (): Promise<string> => {
    while (messages.length === 0) await new Promise<void>((resolve) => waiters.push(resolve));
    return messages.shift()!;
  };
  return { socket, next, closed };
}

const wsOf = (url: string) => url.replace(/^http/, "ws");

async function text(url: string): Promise<{ status: number; body: string; node: string | null }> {
  const response = await fetch(url);
  return {
    status: response.status,
    body: (await response.text()).trim(),
    node: response.headers.get("x-wasmkeep-node"),
  };
}

Deno.test("relayed websockets over mutual TLS: a client on another node shares the owner's room, and is cut once the owner stops trusting its node", async () => {
  const dir = await scratchDir("wk-wsr-");
  const bucketUrl = `file://${dir}/bucket`;
  try {
    const [a, b] = await Promise.all([
      startTlsClusterNode("a", dir, bucketUrl, TESTBED),
      startTlsClusterNode("b", dir, bucketUrl, TESTBED),
    ]);
    try {
      // The room lives on a.
      assert.equal((await text(`${a.url}/actor/testbed/room/rows`)).node, "a");
      const far = await openSocket(`${wsOf(b.url)}/actor/testbed/room`);
      const near = await openSocket(`${wsOf(a.url)}/actor/testbed/room`);
      far.socket.send("hello from b");
      assert.equal(await far.next(), "hello from b", "echoed by the actor on a, through b");
      near.socket.send("count");
      assert.equal(await near.next(), "2", "one room: both sockets are the actor's, on a");
      // A request through b runs on a and reaches both clients.
      const sent = await text(`${b.url}/actor/testbed/room/ws-send?news`);
      assert.deepEqual(sent, { status: 200, body: "sent 2", node: "a" });
      assert.equal(await far.next(), "news");
      assert.equal(await near.next(), "news");
      assert.match(a.logs(), /websocket open \//);

      // b's heartbeat fenced: a stops trusting b at its next listing and cuts b's connections.
      const fencedAt = performance.now();
      const fenced = await runWasmkeep(["cluster", "fence", "b", "--bucket", bucketUrl]);
      assert.equal(fenced.code, 0, fenced.stderr);
      const cut = await far.closed;
      const afterMs = cut.at - fencedAt;
      console.log(`relayed socket cut ${Math.round(afterMs)} ms after b was fenced`);
      // A listing a period (1 s with ttl 3 s) at most after the fence, then the 500 ms.
      assert.ok(afterMs < 2_500, `cut ${afterMs} ms after the fence`);
      // By a's trust sweep (b, fenced, also stops at its next write and cuts its relays itself).
      for (
        let i = 0;
        i < 100 && !/closed connections of peers no longer trusted/.test(a.logs());
        i++
      ) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      assert.match(a.logs(), /closed connections of peers no longer trusted/);
      // The owner's own client is untouched.
      near.socket.send("still here");
      assert.equal(await near.next(), "still here");
      near.socket.close();
      await near.closed;
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("relayed websockets in plain accept mode: through the owner's client port; a refused upgrade comes back as the owner's answer", async () => {
  const dir = await scratchDir("wk-wsr-");
  const bucketUrl = `file://${dir}/bucket`;
  try {
    const [a, b] = await Promise.all([
      startClusterNode("a", dir, bucketUrl, TESTBED),
      startClusterNode("b", dir, bucketUrl, TESTBED),
    ]);
    try {
      assert.equal((await text(`${a.url}/actor/testbed/room/rows`)).node, "a");
      const far = await openSocket(`${wsOf(b.url)}/actor/testbed/room`);
      far.socket.send(JSON.stringify({ hello: "plain" }));
      assert.equal(await far.next(), JSON.stringify({ hello: "plain" }));
      assert.equal((await text(`${a.url}/actor/testbed/room/ws`)).body, "1");
      far.socket.send("close");
      assert.equal((await far.closed).code, 4000, "the actor's close code comes through b");
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
