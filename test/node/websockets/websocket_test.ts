/**
 * WebSockets to actors on one node (issue 18, item 1), through a real node
 * process, its executor and the testbed component, with Deno's WebSocket
 * client: the testbed echoes every message on the socket it came on, logs
 * its opens and closes, and answers `/ws` with the number of sockets open.
 */

import assert from "node:assert/strict";
import { type Closed, openSocket } from "../../helpers/websocket_client.ts";
import { metric, peakRss, TESTBED_WASM, withNode } from "../../../src/testing/node_process.ts";
import { scratchDir, startClusterNode } from "../../../src/testing/cluster.ts";
import { bucketOpenImportMap } from "../../helpers/bucket_open_map.ts";
import { encodeFrame, FrameReader, OPCODE, readClose } from "../../../src/websockets/frames.ts";
import { SLOW_PUT_FILE_VARIABLE } from "../../helpers/slow_bucket_open.ts";
import { until } from "../../helpers/until.ts";

const SLOW_BUCKET_OPEN = new URL("../../helpers/slow_bucket_open.ts", import.meta.url).href;

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
    // Counted: three messages each way, two closes by their clients (1000, and 1005: no code).
    const counted = async (series: string) => await metric(node.url, series);
    assert.equal(await counted('wasmkeep_websocket_messages_total{direction="in"}'), 3);
    assert.equal(await counted('wasmkeep_websocket_messages_total{direction="out"}'), 3);
    assert.equal(await counted('wasmkeep_websocket_closes_total{code="1000"}'), 1);
    assert.equal(await counted('wasmkeep_websocket_closes_total{code="1005"}'), 1);
    assert.equal(await counted('wasmkeep_websocket_closes_total{code="1012"}'), 0);
    assert.equal(await counted("wasmkeep_websockets"), 0);
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
    assert.equal(await metric(node.url, 'wasmkeep_websocket_closes_total{code="1009"}'), 1);
    const other = await openSocket(`${node.url.replace(/^http/, "ws")}/actor/testbed/room`);
    other.socket.send("x".repeat(1024 * 1024));
    assert.equal((await other.next() as string).length, 1024 * 1024, "1 MiB itself passes");
    other.socket.close();
    await other.closed;
  });
});

Deno.test("websockets: --max-socket-message-bytes sets the limit both ways: a client's larger message closes with 1009, an actor's larger send is its error", async () => {
  await withNode([
    "--actor",
    `testbed=${TESTBED_WASM}`,
    "--node-id",
    "ws",
    "--max-socket-message-bytes",
    "1000",
  ], async (node) => {
    const a = await openSocket(`${node.url.replace(/^http/, "ws")}/actor/testbed/room`);
    a.socket.send("é".repeat(500));
    assert.equal(await a.next(), "é".repeat(500), "1,000 bytes in UTF-8 pass");
    const tooLong = await fetch(`${node.url}/actor/testbed/room/ws-send?${"y".repeat(1001)}`);
    assert.equal(tooLong.status, 500);
    assert.equal(
      (await tooLong.text()).trim(),
      "the message is 1001 bytes, over the limit of 1000",
    );
    a.socket.send("é".repeat(500) + "x");
    assert.equal((await a.closed).code, 1009);
    await until("the close event", () => node.logs().includes("websocket close 1009"));
  });
});

Deno.test("websockets: a client that stops reading is closed with 1013 once four messages are unsent, the actor told, and the node's memory stays bounded", async () => {
  await withNode(["--actor", `testbed=${TESTBED_WASM}`, "--node-id", "ws"], async (node) => {
    const port = Number(new URL(node.url).port);
    // A client that upgrades and then reads nothing.
    const stalled = await rawUpgrade(port, "/actor/testbed/room");
    const reader = await openSocket(`${node.url.replace(/^http/, "ws")}/actor/testbed/room`);
    reader.socket.send("count");
    assert.equal(await reader.next(), "2");
    const peakBefore = peakRss(node.pid);
    // 100 MiB for the stalled client, 400 messages of 256 KiB, broadcast by the actor.
    const piece = "z".repeat(256 * 1024);
    for (let i = 0; i < 400; i++) {
      reader.socket.send(`all:${piece}`);
      assert.equal((await reader.next() as string).length, piece.length);
    }
    await until("the actor's close event", () => node.logs().includes("websocket close 1013"));
    const grewMiB = (peakRss(node.pid) - peakBefore) / 1024 / 1024;
    console.log(
      `the node's peak RSS grew ${grewMiB.toFixed(1)} MiB for 100 MiB sent to a client not reading`,
    );
    assert.ok(grewMiB < 48, `the node's peak RSS grew ${grewMiB} MiB`);
    // What the stalled client finds once it reads: what fit before the cap, then the 1013.
    const frames = new FrameReader({ masked: false, maxPayload: 1024 * 1024 });
    const buffer = new Uint8Array(256 * 1024);
    let close: { code: number; reason: string } | undefined;
    let messages = 0;
    let head = true;
    while (!close) {
      const n = await stalled.read(buffer);
      if (n === null) break;
      let bytes = buffer.subarray(0, n);
      if (head) {
        // The 101's head, then frames.
        const text = new TextDecoder("latin1").decode(bytes);
        const end = text.indexOf("\r\n\r\n");
        assert.match(text, /^HTTP\/1.1 101/);
        bytes = bytes.subarray(end + 4);
        head = false;
      }
      frames.push(bytes);
      for (let frame = frames.next(); frame && !close; frame = frames.next()) {
        if (frame.opcode === OPCODE.close) close = readClose(frame.payload);
        else if (frame.opcode === OPCODE.text) messages++;
      }
    }
    stalled.close();
    assert.deepEqual(close, { code: 1013, reason: "the client does not read its messages" });
    assert.ok(messages < 100, `${messages} messages reached the stalled client before its close`);
    reader.socket.send("count");
    assert.equal(await reader.next(), "1", "the reading client is still served");
    reader.socket.close();
    await reader.closed;
  });
});

Deno.test("websockets: a client that does not answer the node's close is dropped after 5 s, and an open socket holds one of --max-connections' places until it ends", async () => {
  await withNode([
    "--actor",
    `testbed=${TESTBED_WASM}`,
    "--node-id",
    "ws",
    "--max-connections",
    "2",
  ], async (node) => {
    const port = Number(new URL(node.url).port);
    const deaf = await rawUpgrade(port, "/actor/testbed/room");
    const other = await openSocket(`${node.url.replace(/^http/, "ws")}/actor/testbed/room`);
    other.socket.send("count");
    assert.equal(await other.next(), "2");
    // Both places are sockets' now: a third upgrade, or a request, waits for one.
    const full = await fetch(`${node.url}/actor/testbed/room`, {
      headers: {
        upgrade: "websocket",
        connection: "upgrade",
        "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==",
        "sec-websocket-version": "13",
      },
    });
    assert.equal(full.status, 503);
    assert.match(await full.text(), /serves 2 requests at once \(--max-connections\); retry/);
    // The deaf client asks the actor to close its socket, then never answers the close.
    await deaf.write(encodeFrame(OPCODE.text, new TextEncoder().encode("close"), MASK));
    const closedAt = performance.now();
    const buffer = new Uint8Array(64 * 1024);
    while (await deaf.read(buffer) !== null) {
      // The 101, then the close frame it does not answer; then its connection ends.
    }
    const droppedMs = performance.now() - closedAt;
    deaf.close();
    console.log(`the deaf client dropped ${Math.round(droppedMs)} ms after the close`);
    assert.ok(droppedMs > 4_000 && droppedMs < 8_000, `dropped after ${droppedMs} ms`);
    other.socket.close();
    await other.closed;
    // Both places are free again: the deaf client's too.
    const first = await openSocket(`${node.url.replace(/^http/, "ws")}/actor/testbed/room`);
    const second = await openSocket(`${node.url.replace(/^http/, "ws")}/actor/testbed/room`);
    second.socket.send("count");
    assert.equal(await second.next(), "2");
    for (const client of [first, second]) {
      client.socket.close();
      await client.closed;
    }
  });
});

/**
 * A connection to the node on `port` that asked for a WebSocket at `path`
 * and reads nothing yet: the test plays the client byte by byte.
 */
async function rawUpgrade(port: number, path: string): Promise<Deno.TcpConn> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  await conn.write(new TextEncoder().encode(
    `GET ${path} HTTP/1.1\r\nhost: 127.0.0.1\r\nupgrade: websocket\r\n` +
      "connection: upgrade\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n" +
      "sec-websocket-version: 13\r\n\r\n",
  ));
  return conn;
}

/** A client's mask key (RFC 6455 asks for a random one; any does for the test). */
const MASK = new Uint8Array([1, 2, 3, 4]);

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
