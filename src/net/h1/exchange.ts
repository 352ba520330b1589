/**
 * One exchange of the forwarder on one connection: the request written, the
 * answer read, and what either side's failure means for whether the request
 * may have run (see `src/http/forward.ts` for the guarantee).
 *
 * @module
 */

import { describeError } from "../../describe_error.ts";
import type { ForwardResult, StreamedForwardResult } from "./results.ts";
import { AnswerBody, type AnswerHead, readAnswerHead, STREAM_CHUNK_BYTES } from "./answer.ts";
import { type Connection, writeAll } from "./connection.ts";
import { type BodyWritten, writeStreamedBody } from "./request_body.ts";
import { AnswerError, COALESCE_BYTES, type RequestHead } from "./wire.ts";

/** What an exchange came to: a result, a streamed answer's body still to read, or nothing sent. */
export type Conversed =
  | ForwardResult
  | StreamedForwardResult
  | AnswerBody
  | Switched
  | Unsent;

/** The peer answered an upgrade with 101: the connection is the other protocol's from here. */
export class Switched {
  constructor(readonly head: AnswerHead) {}
}

/** A first write that failed before a byte was accepted: nothing of the request was sent. */
export class Unsent {
  constructor(readonly error: unknown) {}
}

/** An unreachable result (see the forwarder's module documentation). */
export function unreachable(
  written: boolean,
  reason: string,
  unansweredNew = false,
): ForwardResult {
  return unansweredNew
    ? { kind: "unreachable", written, reason, unansweredNew }
    : { kind: "unreachable", written, reason };
}

/**
 * One exchange on a connection taken for it: writes the request (its head,
 * then its body in hand or streamed while the answer is read) and reads the
 * answer's head, then its body whole, or hands the body on unread
 * (`streamed`). Never rejects; sets `connection.reusable`.
 *
 * @example
 * ```ts
 * import { converse, Unsent } from "./exchange.ts";
 * import type { Connection } from "./connection.ts";
 * declare const connection: Connection;
 * declare const wire: Uint8Array;
 * declare const request: Parameters<typeof converse>[2];
 * declare const retryOnAFreshConnection: () => void;
 * const outcome = await converse(connection, wire, request, 32 * 1024 * 1024, false);
 * if (outcome instanceof Unsent) retryOnAFreshConnection();
 * ```
 */
export async function converse(
  connection: Connection,
  wire: Uint8Array,
  request: RequestHead,
  maxBodyBytes: number,
  streamed: boolean,
): Promise<Conversed> {
  connection.reusable = false;
  if (connection.dead && connection.served > 0) {
    // Seen closed between taking it from the pool and writing: nothing written.
    return new Unsent(
      new Deno.errors.ConnectionReset("the peer had closed the kept-alive connection"),
    );
  }
  let accepted = 0;
  try {
    const { conn } = connection;
    for (let offset = 0; offset < wire.length;) {
      const n = await conn.write(offset === 0 ? wire : wire.subarray(offset));
      offset += n;
      accepted += n;
    }
    const { body } = request;
    if (body.length > COALESCE_BYTES) await writeAll(conn, body);
  } catch (error) {
    if (accepted === 0) return new Unsent(error);
    return unreachable(
      true,
      `the connection to ${connection.peerKey} failed while the request was written: ${
        describeError(error)
      }`,
      connection.served === 0 && connection.bytesRead === 0,
    );
  }
  const upgrading = request.upgrade !== undefined;
  const bodyStop = new AbortController();
  const bodyWritten = request.stream
    ? writeStreamedBody(connection.conn, request.stream, bodyStop.signal)
    : undefined;
  try {
    const head = bodyWritten
      ? await headWhileWriting(connection, request, bodyWritten, bodyStop, maxBodyBytes)
      : await readAnswerHead(connection, request.method, maxBodyBytes, upgrading);
    if ("kind" in head) return head;
    if (head.status === 101) return new Switched(head);
    const body = new AnswerBody(connection, head, maxBodyBytes);
    // A short body is read at once: a stream costs more than it saves there.
    const short = body.length !== undefined && body.length <= STREAM_CHUNK_BYTES;
    if (streamed && !short) return body;
    const { status, headers } = head;
    const bytes = await body.readWhole();
    return streamed
      ? { kind: "response", status, headers, length: bytes.length, body: bytes }
      : { kind: "response", status, headers, body: bytes };
  } catch (error) {
    const reason = error instanceof AnswerError
      ? error.message
      : `the connection failed before a complete answer: ${describeError(error)}`;
    connection.reusable = false;
    return unreachable(
      true,
      `${connection.peerKey}: ${reason}`,
      connection.served === 0 && connection.bytesRead === 0,
    );
  }
}

/**
 * The answer's head, read while a streamed body is written: an answer
 * that comes first stops the body; a body refused before it was all sent
 * closes the connection (the peer never saw a complete request).
 */
async function headWhileWriting(
  connection: Connection,
  request: RequestHead,
  bodyWritten: Promise<BodyWritten>,
  bodyStop: AbortController,
  maxBodyBytes: number,
): Promise<AnswerHead | ForwardResult> {
  const headRead = readAnswerHead(connection, request.method, maxBodyBytes);
  headRead.catch(() => {}); // Read below, or moot once the body was refused.
  const first = await Promise.race([
    bodyWritten,
    headRead.then(() => undefined, () => undefined),
  ]);
  if (first?.kind === "sent") return await headRead;
  if (first === undefined || first.kind === "write-failed") {
    // The answer came first (the rest of the body is not sent), or the write
    // failed as the peer answered and closed (a 413 of its own): its answer,
    // if whole, on a connection not used again.
    if (first === undefined) {
      bodyStop.abort(new Error("the peer answered before the body was sent"));
    }
    const head = await headRead;
    head.reusable = false;
    return head;
  }
  connection.close();
  if (first.kind === "too-large") {
    return {
      kind: "body-refused",
      status: 413,
      reason: `the request body is over ${request.stream!.limit} bytes`,
    };
  }
  return {
    kind: "body-refused",
    status: 400,
    reason: first.kind === "source-failed" ? first.reason : "the body was not sent",
  };
}
