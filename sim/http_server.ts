/**
 * A small HTTP/1.1 server over a simulated connection, standing in for
 * `Deno.serve` on a simulated node: it reads the requests the real forwarder
 * writes (a head and a `content-length` body; no chunked bodies, which the
 * forwarder never sends), hands each to the node's real handler
 * (`createClientHandler` of `src/http/client_handler.ts`) as a web `Request`,
 * and writes the `Response` back with a `content-length`, keeping the
 * connection open for the next request.
 *
 * @module
 */

import type { ByteConn } from "../src/http/forward.ts";

/** The largest request head read. */
const MAX_HEAD_BYTES = 64 * 1024;
/** The largest request body read. */
const MAX_BODY_BYTES = 1024 * 1024;

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Reads from a connection into a growing buffer. */
class Reader {
  #buf = new Uint8Array(4096);
  #end = 0;

  constructor(readonly conn: ByteConn) {}

  /** The head up to its blank line (removed from the buffer), or null at a clean end. */
  async head(): Promise<string | null> {
    for (;;) {
      const at = blankLine(this.#buf, this.#end);
      if (at >= 0) {
        const head = decoder.decode(this.#buf.subarray(0, at));
        this.#consume(at + 4);
        return head;
      }
      if (this.#end >= MAX_HEAD_BYTES) throw new Error("request head too long");
      if (!await this.#fill()) {
        if (this.#end === 0) return null;
        throw new Error("the connection ended inside a request head");
      }
    }
  }

  /** Exactly `n` bytes. */
  async bytes(n: number): Promise<Uint8Array> {
    while (this.#end < n) {
      if (!await this.#fill()) throw new Error("the connection ended inside a request body");
    }
    const out = this.#buf.slice(0, n);
    this.#consume(n);
    return out;
  }

  async #fill(): Promise<boolean> {
    if (this.#end === this.#buf.length) {
      const bigger = new Uint8Array(this.#buf.length * 2);
      bigger.set(this.#buf.subarray(0, this.#end));
      this.#buf = bigger;
    }
    const n = await this.conn.read(this.#buf.subarray(this.#end));
    if (n === null) return false;
    this.#end += n;
    return true;
  }

  #consume(n: number): void {
    this.#buf.copyWithin(0, n, this.#end);
    this.#end -= n;
  }
}

function blankLine(buf: Uint8Array, end: number): number {
  for (let i = 0; i + 3 < end; i++) {
    if (buf[i] === 13 && buf[i + 1] === 10 && buf[i + 2] === 13 && buf[i + 3] === 10) return i;
  }
  return -1;
}

/**
 * Serves one connection until it ends: each request to `handler`, each
 * answer written back. Never rejects (a broken connection is closed).
 *
 * @example
 * ```ts ignore
 * net.listen("a.sim:8080", endpoint, (conn) => void serveConnection(conn, handler, "a.sim:8080"));
 * ```
 */
export async function serveConnection(
  conn: ByteConn,
  handler: (request: Request) => Promise<Response>,
  authority: string,
): Promise<void> {
  const reader = new Reader(conn);
  try {
    for (;;) {
      const head = await reader.head();
      if (head === null) break;
      const [requestLine, ...lines] = head.split("\r\n");
      const [method, target, version] = requestLine.split(" ");
      if (!method || !target?.startsWith("/") || version !== "HTTP/1.1") {
        throw new Error(`not an HTTP/1.1 request line: ${requestLine}`);
      }
      const headers = new Headers();
      for (const line of lines) {
        const colon = line.indexOf(":");
        if (colon <= 0) throw new Error(`not a header line: ${line}`);
        headers.append(line.slice(0, colon).trim(), line.slice(colon + 1).trim());
      }
      if (headers.has("transfer-encoding")) {
        throw new Error("chunked request bodies are not served");
      }
      const length = Number(headers.get("content-length") ?? "0");
      if (!Number.isInteger(length) || length < 0 || length > MAX_BODY_BYTES) {
        throw new Error(`bad content-length ${headers.get("content-length")}`);
      }
      const body = length > 0 ? await reader.bytes(length) : undefined;
      const request = new Request(`http://${headers.get("host") ?? authority}${target}`, {
        method,
        headers,
        body: body as Uint8Array<ArrayBuffer> | undefined,
      });
      const response = await handler(request);
      const answer = new Uint8Array(await response.arrayBuffer());
      let text = `HTTP/1.1 ${response.status} ${response.statusText || "-"}\r\n`;
      response.headers.forEach((value, name) => {
        if (name !== "content-length" && name !== "transfer-encoding") {
          text += `${name}: ${value}\r\n`;
        }
      });
      text += `content-length: ${answer.length}\r\n\r\n`;
      const bytes = encoder.encode(text);
      const wire = new Uint8Array(bytes.length + answer.length);
      wire.set(bytes);
      wire.set(answer, bytes.length);
      await conn.write(wire);
      if (headers.get("connection")?.toLowerCase() === "close") break;
    }
  } catch {
    // A broken connection or request: closed, as a server would.
  }
  conn.close();
}
