/**
 * The byte pipe between two connections (src/net/relay.ts), over real TCP
 * on loopback: bytes both ways, the bytes read before the pipe first, a
 * close on either side closing both, backpressure (a side that does not
 * read stops the other from being read), and a cut that closes both at once.
 */

import assert from "node:assert/strict";
import { relay, type RelayEnd } from "../../src/net/relay.ts";
import { readExactly, tcpPair, writeAll } from "../../src/testing/loopback.ts";

/** Echoes what `conn` reads back to it until it closes. */
async function echo(conn: Deno.Conn): Promise<void> {
  const buffer = new Uint8Array(16 * 1024);
  try {
    for (let n; (n = await conn.read(buffer)) !== null;) {
      for (let offset = 0; offset < n;) offset += await conn.write(buffer.subarray(offset, n));
    }
  } catch {
    // Closed by the relay.
  }
  try {
    conn.close();
  } catch {
    // Already closed.
  }
}

/** Resolves when `conn` ends (null or an error); the ms it took. */
async function endsWithin(conn: Deno.Conn): Promise<number> {
  const started = performance.now();
  const buffer = new Uint8Array(1024);
  try {
    while ((await conn.read(buffer)) !== null) { /* drained */ }
  } catch {
    // Reset: ended too.
  }
  return performance.now() - started;
}

/** client <-> [a | relay | b] <-> server: the relay's two sides and the outer ends. */
async function piped(options: Parameters<typeof relay>[2] = {}) {
  const [a, client] = await tcpPair();
  const [server, b] = await tcpPair();
  const ended = relay(a, b, options);
  return { client, server, ended };
}

Deno.test("relay: bytes both ways through the pipe, what was read before it first, and a close on one side closes both", async () => {
  const early = new TextEncoder().encode("read before the pipe;");
  const { client, server, ended } = await piped({ fromB: early });
  const echoing = echo(server);
  assert.deepEqual(await readExactly(client, early.length), early, "b's leftover reaches a first");
  const payload = new Uint8Array(1024 * 1024).map((_, i) => (i * 31) % 251);
  const [, back] = await Promise.all([
    writeAll(client, payload),
    readExactly(client, payload.length),
  ]);
  assert.deepEqual(back, payload, "1 MiB there and back, byte for byte");
  client.close();
  const end: RelayEnd = await ended;
  assert.equal(end.reason, "a-closed");
  assert.equal(end.aToB, payload.length);
  assert.equal(end.bToA, early.length + payload.length);
  await echoing; // The server side was closed by the relay: its read ended.
});

Deno.test("relay: a side that does not read holds the other back, a buffer at a time", async () => {
  const { client, server, ended } = await piped();
  // The server reads nothing: the relay may take what the kernel's buffers hold, then waits.
  const total = 64 * 1024 * 1024;
  const writing = writeAll(client, new Uint8Array(total)).catch(() => {});
  await new Promise((resolve) => setTimeout(resolve, 500));
  const cut = await Promise.race([
    writing.then(() => "all written"),
    new Promise((resolve) => setTimeout(() => resolve("held back"), 100)),
  ]);
  assert.equal(cut, "held back", "64 MiB did not all go into a pipe whose far side reads nothing");
  server.close();
  const end = await ended;
  // Its close ends the read from it, or fails the write to it: either way the relay is over.
  assert.ok(end.reason === "b-closed" || end.reason === "b-failed", end.reason);
  assert.ok(end.aToB < total, `${end.aToB} of ${total} bytes went through`);
  client.close();
  await writing;
});

Deno.test("relay: a cut closes both sides at once, well within 500 ms", async () => {
  const cut = new AbortController();
  const { client, server, ended } = await piped({ cut: cut.signal });
  const echoing = echo(server);
  await writeAll(client, new TextEncoder().encode("ping"));
  assert.equal(new TextDecoder().decode(await readExactly(client, 4)), "ping");
  const clientEnds = endsWithin(client);
  cut.abort();
  const end = await ended;
  assert.equal(end.reason, "cut");
  const ms = await clientEnds;
  assert.ok(ms < 500, `the client's connection ended ${ms.toFixed(0)} ms after the cut`);
  await echoing;
  client.close();
});
