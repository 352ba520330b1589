/**
 * A `node:net` socket (TLS included) as the {@linkcode ByteConn} the path
 * between nodes reads and writes.
 *
 * @module
 */

import type { Buffer } from "node:buffer";
import type { Socket } from "node:net";
import { AssertionError } from "../assert.ts";
import type { ByteConn } from "./h1/connection.ts";

/**
 * A `node:net` or `node:tls` socket read and written like a `Deno.Conn`
 * (the forwarder's TLS connections, the cluster listener's upgraded ones). At most one
 * chunk from the socket waits here for a read, and the socket is paused
 * while it does; a write waits for `drain` when the socket's buffer is full.
 * In Deno 2.9.6 this bounds only what waits here: `node:tls` keeps reading
 * a paused socket's TCP into memory (measured: a paused socket took in
 * 128 MiB its peer wrote, with every write's `drain` on time), so what
 * bounds memory is the peer, a pinned node, and the forwarder, which
 * always reads.
 *
 * @example
 * ```ts
 * import type { TLSSocket } from "node:tls";
 * import { SocketConn } from "./socket_conn.ts";
 * declare const tlsSocket: TLSSocket;
 * const conn = new SocketConn(tlsSocket);
 * await conn.write(new TextEncoder().encode("ping"));
 * ```
 */
export class SocketConn implements ByteConn {
  readonly #socket: Socket;
  /** Bytes received and not read yet; the socket is paused while there are any. */
  #pending: Uint8Array | undefined;
  #ended = false;
  #error: Error | undefined;
  #closedHere = false;
  #reader:
    | { p: Uint8Array; resolve: (n: number | null) => void; reject: (e: Error) => void }
    | undefined;

  constructor(socket: Socket) {
    this.#socket = socket;
    socket.on("data", (chunk: Buffer) => this.#onData(chunk));
    socket.on("end", () => {
      this.#ended = true;
      this.#wakeReader();
    });
    socket.on("error", (error: Error) => {
      this.#error ??= error;
      this.#wakeReader();
    });
    socket.on("close", () => {
      // Closed without an end or an error (destroyed): an end unless closed here.
      this.#ended = true;
      this.#wakeReader();
    });
  }

  read(p: Uint8Array): Promise<number | null> {
    if (this.#reader) {
      return Promise.reject(new AssertionError("a read is already pending on this connection"));
    }
    if (this.#pending) return Promise.resolve(this.#take(p));
    if (this.#closedHere) return Promise.reject(closedError());
    if (this.#error) return Promise.reject(this.#error);
    if (this.#ended) return Promise.resolve(null);
    if (p.length === 0) return Promise.resolve(0);
    return new Promise((resolve, reject) => {
      this.#reader = { p, resolve, reject };
    });
  }

  write(p: Uint8Array): Promise<number> {
    const socket = this.#socket;
    if (this.#closedHere) return Promise.reject(closedError());
    if (this.#error) return Promise.reject(this.#error);
    if (socket.destroyed || socket.writableEnded) {
      return Promise.reject(new Deno.errors.BrokenPipe("the peer closed the connection"));
    }
    if (p.length === 0) return Promise.resolve(0);
    // A copy: the socket may keep the chunk after this resolves, and the
    // caller may reuse `p` then (as Deno.Conn allows).
    if (socket.write(p.slice())) return Promise.resolve(p.length);
    return new Promise((resolve, reject) => {
      const done = () => {
        socket.off("drain", done);
        socket.off("close", done);
        if (this.#error) reject(this.#error);
        else if (socket.destroyed) reject(new Deno.errors.BrokenPipe("the connection closed"));
        else resolve(p.length);
      };
      socket.on("drain", done);
      socket.on("close", done);
    });
  }

  close(): void {
    if (this.#closedHere) return;
    this.#closedHere = true;
    this.#socket.destroy();
    this.#wakeReader();
  }

  #onData(chunk: Uint8Array): void {
    const reader = this.#reader;
    if (reader) {
      this.#reader = undefined;
      this.#pending = chunk;
      reader.resolve(this.#take(reader.p));
      return;
    }
    // Paused data events stop at once; a chunk already on its way is kept whole.
    this.#pending = this.#pending ? concat(this.#pending, chunk) : chunk;
    this.#socket.pause();
  }

  /** Moves pending bytes into `p`; resumes the socket once none are left. */
  #take(p: Uint8Array): number {
    const pending = this.#pending!;
    const n = Math.min(p.length, pending.length);
    p.set(pending.subarray(0, n));
    if (n < pending.length) {
      this.#pending = pending.subarray(n);
      this.#socket.pause();
    } else {
      this.#pending = undefined;
      this.#socket.resume();
    }
    return n;
  }

  /** Ends a pending read with what the connection's state now says. */
  #wakeReader(): void {
    const reader = this.#reader;
    if (!reader) return;
    this.#reader = undefined;
    if (this.#closedHere) reader.reject(closedError());
    else if (this.#error) reader.reject(this.#error);
    else reader.resolve(null);
  }
}

function closedError(): Error {
  return new Deno.errors.BadResource("the connection was closed");
}

function concat(a: Uint8Array, b: Uint8Array): Uint8Array {
  const out = new Uint8Array(a.length + b.length);
  out.set(a);
  out.set(b, a.length);
  return out;
}
