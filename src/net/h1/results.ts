/**
 * What an exchange with a peer comes to, as the forwarder (`src/http/forward.ts`,
 * whose module documentation states the guarantee) returns it.
 *
 * @module
 */

import type { ByteConn } from "./connection.ts";

/** How a forwarded request ended. */
export type ForwardResult =
  | {
    kind: "response";
    status: number;
    /** Names in lower case, hop-by-hop headers removed (`content-length` kept). */
    headers: [string, string][];
    body: Uint8Array;
  }
  | {
    kind: "unreachable";
    /** Whether any byte of the request was handed to a socket: if so, it may have run. */
    written: boolean;
    reason: string;
    /**
     * The connection was a new one and the peer sent no byte on it before it
     * ended: over mutual TLS, what a peer refusing this node's certificate
     * does (the spec's "came back unsent on a new TLS connection").
     */
    unansweredNew?: boolean;
  }
  | { kind: "timeout" }
  /**
   * A streamed request body was refused before it was all sent: over its
   * limit (413) or unreadable (400, the client's stream failed or did not
   * match its length). The peer never saw a complete request: it did not run.
   */
  | { kind: "body-refused"; status: 413 | 400; reason: string };

/**
 * How a forward whose answer body streams ended: as `ForwardResult`,
 * with the answer's body read as the stream is (null for none).
 */
export type StreamedForwardResult =
  | Exclude<ForwardResult, { kind: "response" }>
  | {
    kind: "response";
    status: number;
    /** As `ForwardResult`'s (`content-length` kept). */
    headers: [string, string][];
    /** The body's length when the answer states it. */
    length: number | undefined;
    /**
     * The body: in hand when the answer states a length of at most
     * 64 KiB (`STREAM_CHUNK_BYTES`; read at once, as `forward` does), else
     * a stream of pieces of at most that size, each read from the peer when
     * the reader asks (no more held); it errors when the peer sends nothing
     * for the answer timeout, fails, or goes past the body limit, and
     * cancelling it closes the connection.
     */
    body: Uint8Array | ReadableStream<Uint8Array>;
  };

/** How an upgrade request ended: switched (101), or as a forward whose answer is read whole. */
export type UpgradeResult =
  | ForwardResult
  | {
    kind: "switched";
    /** The 101's headers (names in lower case). */
    headers: [string, string][];
    /** The connection, now the other protocol's; closing it frees its slot. */
    conn: ByteConn;
    /** Bytes the peer sent after its 101's head, read already. */
    leftover: Uint8Array;
  };
