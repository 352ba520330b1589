/**
 * The WebSocket the node speaks itself (src/websockets/wire_socket.ts and
 * frames.ts), against Deno's own implementation on the other side, over
 * real TCP on loopback: as a client of `Deno.upgradeWebSocket`, and as a
 * server (behind the HTTP/1.1 server's upgrade) of Deno's `WebSocket`
 * client; then what a peer may not send.
 */

import assert from "node:assert/strict";
import { readAnswerHead } from "../../src/net/h1/answer.ts";
import { Connection } from "../../src/net/h1/connection.ts";
import { DeadlineQueue } from "../../src/net/deadlines.ts";
import { serveHttp1 } from "../../src/net/h1/server.ts";
import { systemClock, systemRandom } from "../../src/time/clock.ts";
import { closePayload, encodeFrame, FrameReader, OPCODE } from "../../src/websockets/frames.ts";
import { acceptKeyOf } from "../../src/net/websocket_accept.ts";
import type { SocketMessage } from "../../src/actors/protocol.ts";
import { WireSocket } from "../../src/websockets/wire_socket.ts";
import { writeAll } from "../../src/testing/loopback.ts";

const encoder = new TextEncoder();
const KEY = "dGhlIHNhbXBsZSBub25jZQ==";

/** Writes a WebSocket upgrade on `conn`; the connection to read its 101 from. */
async function upgraded(conn: Deno.Conn): Promise<Connection> {
  await writeAll(
    conn,
    encoder.encode(
      "GET / HTTP/1.1\r\nhost: a\r\nconnection: upgrade\r\nupgrade: websocket\r\n" +
        `sec-websocket-version: 13\r\nsec-websocket-key: ${KEY}\r\n\r\n`,
    ),
  );
  return new Connection("", conn, () => {});
}

/** What a WireSocket told its handlers. */
function recorder() {
  const messages: SocketMessage[] = [];
  const waiters: (() => void)[] = [];
  const closed = Promise.withResolvers<{ code: number; reason: string }>();
  return {
    messages,
    closed: closed.promise,
    handlers: {
      open() {},
      message(message: SocketMessage) {
        messages.push(message);
        for (const wake of waiters.splice(0)) wake();
      },
      close(code: number, reason: string) {
        closed.resolve({ code, reason });
      },
    },
    async next(): Promise<SocketMessage> {
      while (messages.length === 0) await new Promise<void>((resolve) => waiters.push(resolve));
      return messages.shift()!;
    },
  };
}

Deno.test("wire socket as a client of Deno.upgradeWebSocket: text, binary, a long message, the close handshake", async () => {
  const serverClosed = Promise.withResolvers<{ code: number; reason: string }>();
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, (request) => {
    const { socket, response } = Deno.upgradeWebSocket(request);
    socket.onmessage = (event) => socket.send(event.data);
    socket.onclose = (event) => serverClosed.resolve({ code: event.code, reason: event.reason });
    return response;
  });
  const conn = await Deno.connect({ hostname: "127.0.0.1", port: server.addr.port });
  const connection = await upgraded(conn);
  const head = await readAnswerHead(connection, "GET", 0, true);
  assert.equal(head.status, 101);
  const accept = head.headers.find(([name]) => name === "sec-websocket-accept")?.[1];
  assert.equal(accept, acceptKeyOf(KEY));
  const socket = new WireSocket(conn, {
    role: "client",
    maxMessageBytes: 1 << 20,
    clock: systemClock,
    random: systemRandom,
    leftover: connection.buf.slice(connection.start, connection.end),
  });
  const seen = recorder();
  socket.listen(seen.handlers);
  socket.send({ text: "héllo" });
  assert.deepEqual(await seen.next(), { text: "héllo" });
  socket.send({ binary: new Uint8Array([0, 1, 255]) });
  assert.deepEqual(await seen.next(), { binary: new Uint8Array([0, 1, 255]) });
  const long = "x".repeat(300_000);
  socket.send({ text: long });
  assert.deepEqual(await seen.next(), { text: long });
  socket.close(4001, "done");
  assert.deepEqual(await serverClosed.promise, { code: 4001, reason: "done" });
  assert.deepEqual(await seen.closed, { code: 4001, reason: "done" });
  assert.equal(socket.open, false);
  await server.shutdown();
});

/** A server whose every upgrade becomes a WireSocket; `onSocket` gets each. */
function wireServer(onSocket: (socket: WireSocket) => void) {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const serving = (async () => {
    for await (const conn of listener) {
      void serveHttp1(conn, {
        handler: () => Promise.resolve(new Response("not an upgrade", { status: 400 })),
        upgrade: (request) =>
          Promise.resolve({
            kind: "accept",
            headers: [[
              "sec-websocket-accept",
              acceptKeyOf(request.headers.get("sec-websocket-key")!),
            ]],
            join: (switched, leftover) =>
              onSocket(
                new WireSocket(switched, {
                  role: "server",
                  maxMessageBytes: 1024,
                  clock: systemClock,
                  random: systemRandom,
                  leftover,
                }),
              ),
          }),
        url: (host, target) => `http://${host ?? "x"}${target}`,
        maxHeadBytes: 16 * 1024,
        maxBodyBytes: 0,
        idle: new DeadlineQueue(systemClock, 10_000, () => false),
      });
    }
  })();
  const port = (listener.addr as Deno.NetAddr).port;
  return {
    port,
    close: async () => {
      listener.close();
      await serving.catch(() => {});
    },
  };
}

Deno.test("wire socket as a server of Deno's WebSocket client: echo both kinds, the client's close with its code", async () => {
  const serverSeen = recorder();
  const server = wireServer((socket) => {
    socket.listen({
      ...serverSeen.handlers,
      message(message) {
        serverSeen.handlers.message(message);
        socket.send(message);
      },
    });
  });
  const client = new WebSocket(`ws://127.0.0.1:${server.port}/room`);
  client.binaryType = "arraybuffer";
  const echoes: unknown[] = [];
  const echoed = Promise.withResolvers<void>();
  client.onmessage = (event) => {
    echoes.push(event.data);
    if (echoes.length === 2) echoed.resolve();
  };
  const closed = new Promise<CloseEvent>((resolve) => (client.onclose = resolve));
  await new Promise((resolve) => (client.onopen = resolve));
  client.send("ping ✓");
  client.send(new Uint8Array([7, 8, 9]));
  await echoed.promise;
  assert.equal(echoes[0], "ping ✓");
  assert.deepEqual(new Uint8Array(echoes[1] as ArrayBuffer), new Uint8Array([7, 8, 9]));
  client.close(4002, "bye");
  assert.equal((await closed).code, 4002);
  assert.deepEqual(await serverSeen.closed, { code: 4002, reason: "bye" });
  await server.close();
});

/** A raw client: the upgrade, then frames written as they are given; the server's frames read. */
async function rawClient(port: number) {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  const connection = await upgraded(conn);
  assert.equal((await readAnswerHead(connection, "GET", 0, true)).status, 101);
  const reader = new FrameReader({ masked: false, maxPayload: 1 << 20 });
  reader.push(connection.buf.slice(connection.start, connection.end));
  const mask = new Uint8Array([1, 2, 3, 4]);
  return {
    send: (
      opcode: number,
      payload: Uint8Array,
      options: { fin?: boolean; masked?: boolean } = {},
    ) =>
      writeAll(
        conn,
        encodeFrame(opcode, payload, options.masked === false ? undefined : mask, options.fin),
      ),
    async frame() {
      const buffer = new Uint8Array(4096);
      for (;;) {
        const frame = reader.next();
        if (frame) return frame;
        const n = await conn.read(buffer);
        if (n === null) return undefined;
        reader.push(buffer.subarray(0, n));
      }
    },
    close: () => conn.close(),
  };
}

Deno.test("wire socket as a server: fragments put together, pings answered, and each thing a client may not send fails the socket with its code", async () => {
  const seen = recorder();
  const server = wireServer((socket) => socket.listen(seen.handlers));

  const good = await rawClient(server.port);
  await good.send(OPCODE.text, encoder.encode("frag"), { fin: false });
  await good.send(OPCODE.ping, encoder.encode("p"));
  const pong = await good.frame();
  assert.equal(pong?.opcode, OPCODE.pong, "a ping between fragments is answered");
  assert.deepEqual(pong?.payload, encoder.encode("p"));
  await good.send(OPCODE.continuation, encoder.encode("ments"));
  assert.deepEqual(await seen.next(), { text: "fragments" });
  await good.send(OPCODE.close, closePayload(1000, "ok"));
  const answer = await good.frame();
  assert.equal(answer?.opcode, OPCODE.close, "the close is answered");
  assert.deepEqual(await seen.closed, { code: 1000, reason: "ok" });
  good.close();

  const cases: [
    string,
    (client: Awaited<ReturnType<typeof rawClient>>) => Promise<void>,
    number,
  ][] = [
    ["an unmasked frame", (c) => c.send(OPCODE.text, encoder.encode("x"), { masked: false }), 1002],
    ["text that is not UTF-8", (c) => c.send(OPCODE.text, new Uint8Array([0xff, 0xfe])), 1007],
    ["a message over the limit", (c) => c.send(OPCODE.binary, new Uint8Array(2048)), 1009],
    [
      "a continuation without a message",
      (c) => c.send(OPCODE.continuation, new Uint8Array(1)),
      1002,
    ],
    ["a reserved opcode", (c) => c.send(0x3, new Uint8Array(1)), 1002],
  ];
  for (const [what, send, code] of cases) {
    const failed = recorder();
    const next = wireServer((socket) => socket.listen(failed.handlers));
    const client = await rawClient(next.port);
    await send(client);
    const frame = await client.frame();
    assert.equal(frame?.opcode, OPCODE.close, what);
    assert.equal((frame!.payload[0] << 8) | frame!.payload[1], code, what);
    assert.equal((await failed.closed).code, code, what);
    client.close();
    await next.close();
  }
  await server.close();
});
