/**
 * Writing a request body that is not in hand: pieces read from its source
 * one at a time and written before the next is read, so a body passes
 * through holding one piece (backpressure: the source is read only as fast
 * as the peer takes it). With a declared length the bytes go as they are;
 * without, chunked. A body that goes past its bound, or that ends before
 * or after its declared length, is cut short: the peer never sees a
 * complete request, so it never runs it.
 *
 * @module
 */

import { type ByteConn, writeAll } from "./connection.ts";

/** A request body read from a stream as it is sent. */
export interface StreamedBody {
  /** Its declared length (`content-length`), or undefined: sent chunked. */
  length: number | undefined;
  /** The bytes; read once, by the exchange that sends them. */
  source: ReadableStream<Uint8Array>;
  /** Most bytes sent; past it the request is cut short (`too-large`). */
  limit: number;
  /** Told before the first read of `source` (from then on it cannot be sent again). */
  started?: () => void;
}

/** How writing a streamed body ended. */
export type BodyWritten =
  | { kind: "sent" }
  /** The body went past its limit: what was sent is not a complete request. */
  | { kind: "too-large" }
  /** The source failed or did not match its declared length: the client's fault. */
  | { kind: "source-failed"; reason: string }
  /** The connection failed while the body was written. */
  | { kind: "write-failed"; error: unknown }
  /** The caller stopped it (the answer came first, or the exchange ended). */
  | { kind: "stopped" };

const encoder = new TextEncoder();
const LAST_CHUNK = encoder.encode("0\r\n\r\n");
const CRLF = new Uint8Array([13, 10]);

/**
 * Writes `body` to `conn` (after its head). `stop` aborts it between
 * writes: the source is cancelled and nothing more is written.
 *
 * @example
 * ```ts
 * import { writeStreamedBody } from "./request_body.ts";
 * import type { ByteConn } from "./connection.ts";
 * declare const conn: ByteConn;
 * declare const request: Request;
 * const written = await writeStreamedBody(conn, {
 *   length: undefined,
 *   source: request.body!,
 *   limit: 32 * 1024 * 1024,
 * }, AbortSignal.timeout(30_000));
 * ```
 */
export async function writeStreamedBody(
  conn: ByteConn,
  body: StreamedBody,
  stop: AbortSignal,
): Promise<BodyWritten> {
  body.started?.();
  const reader = body.source.getReader();
  const chunked = body.length === undefined;
  const cancel = () => reader.cancel(stop.reason).catch(() => {});
  stop.addEventListener("abort", cancel, { once: true });
  let total = 0;
  try {
    while (true) {
      let next: ReadableStreamReadResult<Uint8Array>;
      try {
        next = await reader.read();
      } catch (error) {
        if (stop.aborted) return { kind: "stopped" };
        return { kind: "source-failed", reason: `the body could not be read: ${String(error)}` };
      }
      if (stop.aborted) return { kind: "stopped" };
      if (next.done) break;
      const piece = next.value;
      if (piece.length === 0) continue;
      total += piece.length;
      if (total > body.limit) {
        cancel();
        return { kind: "too-large" };
      }
      if (!chunked && total > body.length!) {
        cancel();
        return { kind: "source-failed", reason: "the body is longer than its content-length" };
      }
      try {
        if (chunked) await writeAll(conn, encoder.encode(piece.length.toString(16) + "\r\n"));
        await writeAll(conn, piece);
        if (chunked) await writeAll(conn, CRLF);
      } catch (error) {
        cancel();
        return stop.aborted ? { kind: "stopped" } : { kind: "write-failed", error };
      }
    }
    if (!chunked && total !== body.length) {
      return { kind: "source-failed", reason: "the body ended before its content-length" };
    }
    try {
      if (chunked) await writeAll(conn, LAST_CHUNK);
    } catch (error) {
      return stop.aborted ? { kind: "stopped" } : { kind: "write-failed", error };
    }
    return { kind: "sent" };
  } finally {
    stop.removeEventListener("abort", cancel);
    reader.releaseLock();
  }
}
