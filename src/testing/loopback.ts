/**
 * Loopback sockets for tests: a free port, a connected TCP pair, and
 * reading and writing an exact number of bytes.
 *
 * @module
 */

import type { ByteConn } from "../net/h1/connection.ts";

/** A port free now on loopback. */
export function freePort(): number {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = listener.addr as Deno.NetAddr;
  listener.close();
  return port;
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
