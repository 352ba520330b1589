/**
 * Web bodies over `node:http`, as the cluster listener serves them: a
 * request's body as a `ReadableStream` read as the handler reads it (the
 * connection paused meanwhile, counted against a limit), and a `Response`
 * written a piece at a time as the peer takes it.
 *
 * @module
 */

import type http from "node:http";

/** Headers of one connection, never passed on. */
export const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "proxy-connection",
  "te",
  "trailer",
  "transfer-encoding",
  "upgrade",
]);

const EMPTY = new Uint8Array(0);

/**
 * A request's body as a stream, the connection paused while a piece waits
 * to be read (at most one piece of the socket's reads held here), and
 * counted: past `max` bytes the stream fails and `tooLarge` is set, the
 * rest dropped as it comes.
 */
export class RequestBody {
  readonly stream: ReadableStream<Uint8Array>;
  tooLarge = false;
  #open = true;
  #total = 0;

  constructor(req: http.IncomingMessage, max: number) {
    this.stream = new ReadableStream<Uint8Array>({
      start: (controller) => {
        const fail = (error: Error) => {
          if (!this.#open) return;
          this.#open = false;
          controller.error(error);
        };
        req.on("data", (chunk: Uint8Array) => {
          if (!this.#open) return;
          this.#total += chunk.byteLength;
          if (this.#total > max) {
            this.tooLarge = true;
            req.resume();
            return fail(new Error(`the request body is over ${max} bytes`));
          }
          controller.enqueue(new Uint8Array(chunk.buffer, chunk.byteOffset, chunk.byteLength));
          if ((controller.desiredSize ?? 0) <= 0) req.pause();
        });
        req.once("end", () => {
          if (!this.#open) return;
          this.#open = false;
          controller.close();
        });
        req.once("error", fail);
        req.once("close", () => {
          if (!req.complete) {
            fail(new Error("the peer closed the connection before the body ended"));
          }
        });
        req.pause();
      },
      pull: () => {
        req.resume();
      },
      cancel: () => {
        // Dropped as it comes (see the handler's end): the connection stays in step.
        this.#open = false;
        req.resume();
      },
    }, { highWaterMark: 1 });
  }
}

/**
 * Writes a web `Response` to `res`: a body that ends with its first piece
 * goes with its length, a longer one chunked, each piece written once the
 * one before drained (backpressure from the peer to whoever makes the body).
 */
export async function writeResponse(
  res: http.ServerResponse,
  response: Response,
  head: boolean,
): Promise<void> {
  const { status, statusText } = response;
  const outHeaders = responseHeaders(response.headers, head);
  const bodyless = status < 200 || status === 204 || status === 304;
  const reader = response.body?.getReader();
  const writeHead = () => {
    if (statusText) res.writeHead(status, statusText, outHeaders);
    else res.writeHead(status, outHeaders);
  };
  const finish = (body?: Uint8Array) => {
    writeHead();
    res.end(body);
  };
  if (head && reader && !bodyless && !("content-length" in outHeaders)) {
    // A HEAD answer states the length of the body it leaves out: the handler's own, counted.
    let length = 0;
    try {
      for (let next; !(next = await reader.read()).done;) length += next.value.length;
    } catch {
      length = 0;
    }
    if (length > 0) outHeaders["content-length"] = String(length);
    return finish();
  }
  if (!reader || bodyless || head) {
    reader?.cancel().catch(() => {});
    if (!bodyless && !head) outHeaders["content-length"] = "0";
    return finish();
  }
  try {
    const first = await reader.read();
    const firstPiece = first.done ? EMPTY : first.value;
    const second = first.done ? first : await reader.read();
    if (second.done) {
      // Stated up front, so node:http sends the body as is, not chunked.
      outHeaders["content-length"] = String(firstPiece.length);
      return finish(firstPiece);
    }
    writeHead();
    // A piece is read only once the one before was written and drained.
    let piece: Uint8Array = firstPiece;
    let next: ReadableStreamReadResult<Uint8Array> = second;
    while (true) {
      if (res.destroyed) {
        reader.cancel().catch(() => {});
        return;
      }
      if (!res.write(piece)) await drained(res);
      if (next.done) break;
      piece = next.value;
      next = await reader.read();
    }
    res.end();
  } catch {
    // The body failed part way (its node failed or went away): the peer sees a cut answer.
    reader.cancel().catch(() => {});
    res.destroy();
  }
}

/** Resolves when `res` drained or closed. */
function drained(res: http.ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off("drain", done);
      res.off("close", done);
      resolve();
    };
    res.once("drain", done);
    res.once("close", done);
  });
}

/** A web `Response`'s headers for `node:http`: hop-by-hop ones dropped, repeated ones kept. */
function responseHeaders(headers: Headers, head: boolean): Record<string, string | string[]> {
  const out: Record<string, string | string[]> = {};
  for (const [name, value] of headers) {
    if (HOP_BY_HOP.has(name)) continue;
    // The body is sent whole with its own length (a HEAD answer keeps the handler's).
    if (name === "content-length" && !head) continue;
    const seen = out[name];
    if (seen === undefined) out[name] = value;
    else if (Array.isArray(seen)) seen.push(value);
    else out[name] = [seen, value];
  }
  return out;
}
