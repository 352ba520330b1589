/**
 * Peers for the forwarder's tests (src/http/forward.ts): raw TCP servers on
 * loopback that write exactly the bytes a test needs and count what they
 * read, `Deno.serve` servers, connections that fail on a given write, and
 * requests and answers in short.
 *
 * @module
 */

import assert from "node:assert/strict";
import type { UntilOptions } from "../helpers/until.ts";
import {
  type Connect,
  Forwarder,
  type ForwarderOptions,
  type ForwardRequest,
  type ForwardResult,
} from "../../src/http/forward.ts";

/** Encodes what the raw peers write. */
export const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** A request for {@linkcode Forwarder.forward}, its body encoded. */
export function request(
  method: string,
  path: string,
  body = "",
  headers: [string, string][] = [],
): ForwardRequest {
  return { method, path, headers, body: encoder.encode(body) };
}

/** The body of an answer, as text; fails the test unless the result is an answer. */
export function text(result: ForwardResult): string {
  assert.equal(result.kind, "response", JSON.stringify(result));
  return decoder.decode((result as { body: Uint8Array }).body);
}

/** A header of an answer; fails the test unless the result is an answer. */
export function header(result: ForwardResult, name: string): string | undefined {
  assert.equal(result.kind, "response", JSON.stringify(result));
  return (result as { headers: [string, string][] }).headers.find(([n]) => n === name)?.[1];
}

/** Resolves after `ms` of real time. */
export function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls every 5 ms, for up to 3 s: for what a server on loopback counts. */
export const SOON: UntilOptions = { ms: 3_000, everyMs: 5 };

function closeQuietly(conn: Deno.Conn): void {
  try {
    conn.close();
  } catch {
    // Already closed.
  }
}

/** A request as a {@linkcode RawServer} read it, with the index of its connection. */
export interface RawRequest {
  connection: number;
  head: string;
  body: string;
}

/** One accepted connection of a {@linkcode RawServer}. */
export class RawPeer {
  #buffer = new Uint8Array(0);

  constructor(readonly conn: Deno.Conn, readonly server: RawServer, readonly index: number) {}

  async #fill(): Promise<boolean> {
    const chunk = new Uint8Array(64 * 1024);
    const n = await this.conn.read(chunk);
    if (n === null) return false;
    const joined = new Uint8Array(this.#buffer.length + n);
    joined.set(this.#buffer);
    joined.set(chunk.subarray(0, n), this.#buffer.length);
    this.#buffer = joined;
    return true;
  }

  /** Reads one request (head and `content-length` body); null when the client closed. */
  async readRequest(): Promise<RawRequest | null> {
    let end: number;
    while ((end = decoder.decode(this.#buffer).indexOf("\r\n\r\n")) < 0) {
      if (!(await this.#fill())) return null;
    }
    const head = decoder.decode(this.#buffer.subarray(0, end));
    const match = /\r\ncontent-length: (\d+)/i.exec(head);
    const length = match ? Number(match[1]) : 0;
    while (this.#buffer.length < end + 4 + length) {
      if (!(await this.#fill())) return null;
    }
    const body = decoder.decode(this.#buffer.subarray(end + 4, end + 4 + length));
    this.#buffer = this.#buffer.subarray(end + 4 + length);
    const seen = { connection: this.index, head, body };
    this.server.requests.push(seen);
    return seen;
  }

  /** Waits until the client closes the connection. */
  async waitForClose(): Promise<void> {
    try {
      while (await this.#fill());
    } catch {
      // Reset or closed by the server: the same here.
    }
  }

  async send(data: string | Uint8Array): Promise<void> {
    const bytes = typeof data === "string" ? encoder.encode(data) : data;
    for (let offset = 0; offset < bytes.length;) {
      offset += await this.conn.write(bytes.subarray(offset));
    }
  }
}

/** A TCP server on loopback whose handler writes exactly the bytes a test needs. */
export class RawServer {
  readonly listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  readonly requests: RawRequest[] = [];
  connections = 0;
  /** Connections whose client closed them (the handler saw the end). */
  closedByClient = 0;
  readonly #open = new Set<Deno.Conn>();
  readonly #tasks: Promise<void>[] = [];
  readonly #accepting: Promise<void>;

  constructor(handler: (peer: RawPeer) => Promise<void>) {
    this.#accepting = this.#accept(handler);
  }

  get url(): string {
    return `http://127.0.0.1:${this.listener.addr.port}`;
  }

  async #accept(handler: (peer: RawPeer) => Promise<void>): Promise<void> {
    try {
      for await (const conn of this.listener) {
        const peer = new RawPeer(conn, this, ++this.connections);
        this.#open.add(conn);
        this.#tasks.push(
          handler(peer).catch(() => {}).finally(() => {
            this.#open.delete(conn);
            closeQuietly(conn);
          }),
        );
      }
    } catch {
      // The listener closed.
    }
  }

  async close(): Promise<void> {
    this.listener.close();
    for (const conn of this.#open) closeQuietly(conn);
    await this.#accepting;
    await Promise.allSettled(this.#tasks);
  }
}

/** A handler answering every request on a connection with `conn <index>`, kept alive. */
export function keepAliveHandler(
  answer = (peer: RawPeer, _seen: RawRequest) => {
    const body = `conn ${peer.index}`;
    return `HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\n\r\n${body}`;
  },
): (peer: RawPeer) => Promise<void> {
  return async (peer) => {
    while (true) {
      const seen = await peer.readRequest();
      if (!seen) {
        peer.server.closedByClient++;
        return;
      }
      await peer.send(answer(peer, seen));
    }
  };
}

/** `Deno.connect`, counted. */
export function countingConnect(): { count: number; connect: Connect } {
  const counter = {
    count: 0,
    connect: (hostname: string, port: number, signal: AbortSignal) => {
      counter.count++;
      return Deno.connect({ hostname, port, signal });
    },
  };
  return counter;
}

/** A connection whose `failAt`-th write fails with a broken pipe, after `acceptFirst` bytes. */
class FaultyConn {
  writes = 0;
  constructor(
    readonly inner: Deno.Conn,
    readonly failAt: number,
    readonly acceptFirst: number,
  ) {}
  read(buffer: Uint8Array): Promise<number | null> {
    return this.inner.read(buffer);
  }
  write(bytes: Uint8Array): Promise<number> {
    this.writes++;
    if (this.writes === this.failAt && this.acceptFirst > 0) {
      return this.inner.write(bytes.subarray(0, this.acceptFirst));
    }
    if (this.writes === this.failAt + (this.acceptFirst > 0 ? 1 : 0)) {
      this.inner.close();
      return Promise.reject(new Deno.errors.BrokenPipe("Broken pipe (os error 32)"));
    }
    return this.inner.write(bytes);
  }
  close(): void {
    closeQuietly(this.inner);
  }
}

/** Connections whose first one fails at its `failAt`-th write; later ones are plain. */
export function faultyConnect(
  failAt: number,
  acceptFirst = 0,
): { count: number; connect: Connect } {
  const counter = {
    count: 0,
    connect: async (hostname: string, port: number, signal: AbortSignal) => {
      const inner = await Deno.connect({ hostname, port, signal });
      return ++counter.count === 1
        ? new FaultyConn(inner, failAt, acceptFirst) as unknown as Deno.Conn
        : inner;
    },
  };
  return counter;
}

/** Runs `body` with a forwarder of node `node-a`, closed after it. */
export async function withForwarder(
  options: Partial<ForwarderOptions>,
  body: (forwarder: Forwarder) => Promise<void>,
): Promise<void> {
  const forwarder = new Forwarder({ nodeId: "node-a", ...options });
  try {
    await body(forwarder);
  } finally {
    await forwarder.close();
  }
}

/** Runs `body` with a {@linkcode RawServer}, closed after it. */
export async function withRaw(
  handler: (peer: RawPeer) => Promise<void>,
  body: (server: RawServer) => Promise<void>,
): Promise<void> {
  const server = new RawServer(handler);
  try {
    await body(server);
  } finally {
    await server.close();
  }
}

/** Runs `body` with a `Deno.serve` server on loopback, given its URL, shut down after it. */
export async function withServe(
  handler: (request: Request) => Response | Promise<Response>,
  body: (url: string) => Promise<void>,
): Promise<void> {
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, handler);
  try {
    await body(`http://127.0.0.1:${server.addr.port}`);
  } finally {
    await server.shutdown();
  }
}
