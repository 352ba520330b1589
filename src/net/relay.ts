/**
 * A byte pipe joining two connections in both directions: what a node
 * that does not hold an actor puts between a client's upgraded connection
 * and the owner's (issue 17, item 2; WebSockets relayed to the owner in
 * issue 18).
 *
 * The guarantees: each direction holds at most one buffer of
 * {@linkcode RELAY_BUFFER_BYTES} (it reads again only once what it read was
 * written: backpressure from the slower side to the sender); a close or an
 * error on either side closes both, and the relay ends; aborting `cut`
 * closes both at once (the node stopped trusting the peer: the spec's
 * "relayed WebSockets are cut within 500 ms"). Nothing is retried: a byte
 * pipe does not know what its bytes mean.
 *
 * @module
 */

import type { ByteConn } from "./h1/connection.ts";

/** What each direction of a relay reads (and holds) at most at once. */
export const RELAY_BUFFER_BYTES = 64 * 1024;

/** How a relay ended, and what it carried each way. */
export interface RelayEnd {
  /** `a` or `b` closed (end of stream), either failed, or the relay was cut. */
  reason: "a-closed" | "b-closed" | "a-failed" | "b-failed" | "cut";
  /** Bytes written to `b` that were read from `a`. */
  aToB: number;
  /** Bytes written to `a` that were read from `b`. */
  bToA: number;
}

/** Settings of {@linkcode relay}. */
export interface RelayOptions {
  /** Aborting it cuts the relay: both connections are closed at once. */
  cut?: AbortSignal;
  /** Bytes already read from `a` (after its upgrade's head), written to `b` first. */
  fromA?: Uint8Array;
  /** Bytes already read from `b` (after its 101's head), written to `a` first. */
  fromB?: Uint8Array;
  /** Default {@linkcode RELAY_BUFFER_BYTES}. */
  bufferBytes?: number;
}

function closeQuietly(conn: ByteConn): void {
  try {
    conn.close();
  } catch {
    // Already closed.
  }
}

/**
 * Joins `a` and `b` until either side closes or fails, or `cut` aborts;
 * both are closed when it resolves. Never rejects.
 *
 * @example
 * ```ts
 * import { relay } from "./relay.ts";
 * import type { ByteConn } from "./h1/connection.ts";
 * declare const clientConn: ByteConn;
 * declare const ownerConn: ByteConn;
 * declare const leftover: Uint8Array;
 * const cut = new AbortController();
 * const ended = relay(clientConn, ownerConn, { cut: cut.signal, fromB: leftover });
 * cut.abort(); // trust in the owner withdrawn
 * console.log((await ended).reason); // "cut"
 * ```
 */
export function relay(a: ByteConn, b: ByteConn, options: RelayOptions = {}): Promise<RelayEnd> {
  const size = options.bufferBytes ?? RELAY_BUFFER_BYTES;
  const end: RelayEnd = { reason: "cut", aToB: 0, bToA: 0 };
  let ended = false;
  let finish!: () => void;
  const done = new Promise<void>((resolve) => finish = resolve);
  const stop = (reason: RelayEnd["reason"]) => {
    if (ended) return;
    ended = true;
    end.reason = reason;
    closeQuietly(a);
    closeQuietly(b);
    finish();
  };
  const onCut = () => stop("cut");
  if (options.cut?.aborted) onCut();
  else options.cut?.addEventListener("abort", onCut, { once: true });

  const pump = async (
    from: ByteConn,
    to: ByteConn,
    first: Uint8Array | undefined,
    count: (n: number) => void,
    closed: RelayEnd["reason"],
    readFailed: RelayEnd["reason"],
    writeFailed: RelayEnd["reason"],
  ) => {
    const buffer = new Uint8Array(size);
    let pending = first && first.length > 0 ? first : undefined;
    while (!ended) {
      if (!pending) {
        let n: number | null;
        try {
          n = await from.read(buffer);
        } catch {
          return stop(readFailed);
        }
        if (n === null) return stop(closed);
        if (n === 0) continue;
        pending = buffer.subarray(0, n);
      }
      try {
        for (let offset = 0; offset < pending.length && !ended;) {
          const written = await to.write(offset === 0 ? pending : pending.subarray(offset));
          offset += written;
          count(written);
        }
      } catch {
        return stop(writeFailed);
      }
      pending = undefined;
    }
  };
  pump(a, b, options.fromA, (n) => end.aToB += n, "a-closed", "a-failed", "b-failed");
  pump(b, a, options.fromB, (n) => end.bToA += n, "b-closed", "b-failed", "a-failed");
  return done.then(() => {
    options.cut?.removeEventListener("abort", onCut);
    return end;
  });
}
