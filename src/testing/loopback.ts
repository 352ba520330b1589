/**
 * Loopback sockets for tests: a free port, a connected TCP pair, and
 * reading and writing an exact number of bytes.
 *
 * @module
 */

import type { ByteConn } from "../net/h1/connection.ts";

/**
 * Ports handed out by {@linkcode freePort}: below Linux's ephemeral range
 * (32768 to 60999), which the kernel gives to `port: 0` listeners and
 * outgoing connections. A port taken from that range and closed again can
 * be handed to another process's `port: 0` listener before its user binds
 * it (seen in CI: a node's client port took a peer's cluster port).
 */
const FREE_PORT_RANGE = { low: 20_000, high: 32_768 } as const;
const FREE_PORT_TRIES = 200;

/**
 * A port free now on loopback, picked at random outside the ephemeral range,
 * so that only another caller of this function can take it before its user
 * binds it.
 *
 * @example
 * ```ts
 * import { freePort } from "./loopback.ts";
 * const server = Deno.serve({ hostname: "127.0.0.1", port: freePort() }, () => new Response("ok"));
 * await server.shutdown();
 * ```
 */
export function freePort(): number {
  const span = FREE_PORT_RANGE.high - FREE_PORT_RANGE.low;
  for (let i = 0; i < FREE_PORT_TRIES; i++) {
    const port = FREE_PORT_RANGE.low + Math.floor(Math.random() * span);
    try {
      Deno.listen({ hostname: "127.0.0.1", port }).close();
      return port;
    } catch (error) {
      if (!(error instanceof Deno.errors.AddrInUse)) throw error;
    }
  }
  throw new Error(`no free loopback port in ${FREE_PORT_TRIES} tries`);
}

/** A TCP pair on loopback: [the accepted side, the connecting side]. */
export async function tcpPair(): Promise<[Deno.TcpConn, Deno.TcpConn]> {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  const [accepted, connected] = await Promise.all([
    listener.accept(),
    Deno.connect({ hostname: "127.0.0.1", port }),
  ]);
  listener.close();
  return [accepted as Deno.TcpConn, connected];
}

/** Exactly `size` bytes from `conn`; throws when it ends first. */
export async function readExactly(conn: ByteConn, size: number): Promise<Uint8Array> {
  const out = new Uint8Array(size);
  for (let filled = 0; filled < size;) {
    const n = await conn.read(out.subarray(filled));
    if (n === null) throw new Error(`closed after ${filled} of ${size} bytes`);
    filled += n;
  }
  return out;
}

/** Writes all of `bytes`, however the connection splits them (the node's own). */
export { writeAll } from "../net/h1/connection.ts";
