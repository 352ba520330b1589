/**
 * WebSockets to actors on one node (issue 18, item 1), through a real node
 * process, its executor and the testbed component, with Deno's WebSocket
 * client: the testbed echoes every message on the socket it came on, logs
 * its opens and closes, and answers `/ws` with the number of sockets open.
 */

import assert from "node:assert/strict";
import { type Closed, openSocket } from "../helpers/websocket_client.ts";
import { TESTBED_WASM, withNode } from "../helpers/node_process.ts";
import { scratchDir, startClusterNode } from "../helpers/cluster.ts";
import { bucketOpenImportMap } from "../helpers/bucket_open_map.ts";
import { SLOW_PUT_FILE_VARIABLE } from "../helpers/slow_bucket_open.ts";

const SLOW_BUCKET_OPEN = new URL("../helpers/slow_bucket_open.ts", import.meta.url).href;

async function until(what: string, check: () => boolean | Promise<boolean>, ms = 10_000) {
  const deadline = Date.now() + ms;
  while (!await check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

Deno.test("websockets: an actor's socket on one node echoes text and binary, is listed, and its close runs on-websocket-close", async () => {
  await withNode(["--actor", `testbed=${TESTBED_WASM}`, "--node-id", "ws"], async (node) => {
    const wsUrl = node.url.replace(/^http/, "ws");
    const a = await openSocket(`${wsUrl}/actor/testbed/room/chat?x=1`);
    a.socket.send("hello");
    assert.equal(await a.next(), "hello");
    a.socket.send(new Uint8Array([1, 2, 3]));
    assert.deepEqual(await a.next(), new Uint8Array([1, 2, 3]));
    await until("the open event's log line", () => node.logs().includes("websocket open /chat"));

    const b = await openSocket(`${wsUrl}/actor/testbed/room`);
    const count = async () =>
      (await (await fetch(`${node.url}/actor/testbed/room/ws`)).text()).trim();
    assert.equal(await count(), "2", "websockets.connections lists both");
    // Another actor's sockets are its own.
    assert.equal(
      (await (await fetch(`${node.url}/actor/testbed/other/ws`)).text()).trim(),
      "0",
    );

    a.socket.close(1000, "bye");
    await a.closed;
    await until("the close event", () => node.logs().includes("websocket close 1000 bye"));
    assert.equal(await count(), "1");
    // The other socket is untouched, and serves in order with the actor's requests.
    b.socket.send("still here");
    assert.equal(await b.next(), "still here");
    b.socket.close();
    await b.closed;
    await until("no socket left", async () => await count() === "0");
  });
});

Deno.test("websockets: the actor sends from a request's event, closes a socket itself, and a trap costs only its event", async () => {
  await withNode(["--actor", `testbed=${TESTBED_WASM}`, "--node-id", "ws"], async (node) => {
    const wsUrl = node.url.replace(/^http/, "ws");
    const get = async (path: string) => {
      const response = await fetch(`${node.url}/actor/testbed/room${path}`);
      return { status: response.status, text: (await response.text()).trim() };
    };
    const a = await openSocket(`${wsUrl}/actor/testbed/room`);
    const b = await openSocket(`${wsUrl}/actor/testbed/room`);
    // From an HTTP request's event, to every socket of the actor.
    assert.deepEqual(await get("/ws-send?news"), { status: 200, text: "sent 2" });
    assert.equal(await a.next(), "news");
    assert.equal(await b.next(), "news");
    // An id that is not open is the actor's error, not a trap.
    const wrong = await get("/ws-send-to?12345");
    assert.equal(wrong.status, 400);
    assert.match(wrong.text, /no WebSocket 12345 is open on this actor/);

    // A trap in a message's event: the socket stays open, the actor serves on.
    a.socket.send("trap");
    await until("the trap's log line", () => /actor failed.*room/.test(node.logs()));
    a.socket.send("count");
    assert.equal(await a.next(), "2");
    // The actor's socket events write to its database like its requests.
    a.socket.send("insert");
    assert.equal(await a.next(), "inserted");
    assert.equal((await get("/rows")).text, "1");

    // Closed by the actor: the client gets its code and reason, no close event runs.
    b.socket.send("close");
    const event = await b.closed;
    assert.equal(event.code, 4000);
    assert.equal(event.reason, "closed by the actor");
    assert.deepEqual(await get("/ws"), { status: 200, text: "1" });
    assert.equal(node.logs().includes("websocket close 4000"), false);
    a.socket.close();
    await a.closed;
  });
});

Deno.test("websockets: a message over 1 MiB closes its socket with 1009, and the actor is told", async () => {
  await withNode(["--actor", `testbed=${TESTBED_WASM}`, "--node-id", "ws"], async (node) => {
    const a = await openSocket(`${node.url.replace(/^http/, "ws")}/actor/testbed/room`);
    a.socket.send("x".repeat(1024 * 1024 + 1));
    const event = await a.closed;
    assert.equal(event.code, 1009);
    await until("the close event", () => node.logs().includes("websocket close 1009"));
    const other = await openSocket(`${node.url.replace(/^http/, "ws")}/actor/testbed/room`);
    other.socket.send("x".repeat(1024 * 1024));
    assert.equal((await other.next() as string).length, 1024 * 1024, "1 MiB itself passes");
    other.socket.close();
    await other.closed;
  });
});

Deno.test("websockets: a message its actor's full queue cannot take closes its socket with 1013, not lost unannounced", async () => {
  await withNode([
    "--actor",
    `testbed=${TESTBED_WASM}`,
    "--node-id",
    "ws",
    "--max-queued-events",
    "2",
  ], async (node) => {
    const a = await openSocket(`${node.url.replace(/^http/, "ws")}/actor/testbed/room`);
    for (let i = 0; i < 200; i++) a.socket.send(`m${i}`);
    // Closed, not left open with messages gone. The node sends 1013, but a
    // client still sending when the server's close goes out sees an abnormal
    // close in Deno 2.9.6 ("Unexpected EOF", code 0): a bare Deno.serve that
    // closes a socket its client bursts into does the same. So any close.
    const event = await a.closed;
    assert.ok(event.code === 1013 || !event.wasClean, `closed with ${event.code}`);
    for (let i = 0; i < 50 && !/the actor has 2 events waiting/.test(node.logs()); i++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    assert.match(node.logs(), /the actor has 2 events waiting/);
  });
});

Deno.test("websockets: a malformed upgrade is 400 in one line; an unknown class is 404", async () => {
  await withNode(["--actor", `testbed=${TESTBED_WASM}`, "--node-id", "ws"], async (node) => {
    const upgrade = (path: string, headers: Record<string, string>) =>
      fetch(`${node.url}${path}`, { headers: { upgrade: "websocket", ...headers } });
    const noVersion = await upgrade("/actor/testbed/room", {
      connection: "upgrade",
      "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
    });
    assert.equal(noVersion.status, 400);
    assert.equal(
      await noVersion.text(),
      "bad WebSocket upgrade: this node speaks WebSocket version 13, not none (sec-websocket-version)\n",
    );
    const badKey = await upgrade("/actor/testbed/room", {
      connection: "upgrade",
      "sec-websocket-version": "13",
      "sec-websocket-key": "short",
    });
    assert.equal(badKey.status, 400);
    assert.equal(
      await badKey.text(),
      "bad WebSocket upgrade: the sec-websocket-key is not 16 bytes in base64\n",
    );
    const unknown = await upgrade("/actor/nosuch/room", {
      connection: "upgrade",
      "sec-websocket-version": "13",
      "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
    });
    assert.equal(unknown.status, 404);
    await unknown.body?.cancel();
  });
});

Deno.test("websockets: the node's clean stop closes its sockets with 1012", async () => {
  let closed: Promise<Closed> | undefined;
  await withNode(["--actor", `testbed=${TESTBED_WASM}`, "--node-id", "ws"], async (node) => {
    const a = await openSocket(`${node.url.replace(/^http/, "ws")}/actor/testbed/room`);
    a.socket.send("ping");
    assert.equal(await a.next(), "ping");
    closed = a.closed;
  });
  const event = await closed!;
  assert.equal(event.code, 1012);
});

Deno.test("websockets: a node whose lease runs out closes its actors' sockets with 1012, without waiting for the bucket", async () => {
  const dir = await scratchDir("wk-ws-lease-");
  const delay = `${dir}/put-delay`;
  Deno.writeTextFileSync(delay, "");
  const node = await startClusterNode("a", dir, `file://${dir}/bucket`, [
    "--actor",
    `testbed=${TESTBED_WASM}`,
  ], {
    env: { [SLOW_PUT_FILE_VARIABLE]: delay },
    denoArgs: [`--import-map=${bucketOpenImportMap(dir, "slow_map.json", SLOW_BUCKET_OPEN)}`],
  });
  try {
    const a = await openSocket(`${node.url.replace(/^http/, "ws")}/actor/testbed/room`);
    a.socket.send("ping");
    assert.equal(await a.next(), "ping");
    // The node's heartbeat writes now take 8 s: its lease (ttl 3 s) runs out meanwhile.
    const stalledAt = performance.now();
    Deno.writeTextFileSync(delay, "8000");
    const event = await a.closed;
    const afterMs = performance.now() - stalledAt;
    assert.equal(event.code, 1012);
    assert.equal(event.reason, "this node's lease ran out");
    // ttl 3 s: the lease was valid at most about 3 s from the last write that landed.
    assert.ok(afterMs < 6_000, `closed ${afterMs} ms after the bucket stalled`);
    assert.match(node.logs(), /node lease not valid: dropping every actor/);
  } finally {
    Deno.writeTextFileSync(delay, "");
    await node.stop();
    await Deno.remove(dir, { recursive: true });
  }
});
