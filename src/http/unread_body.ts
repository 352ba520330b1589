/**
 * A client's request body not read yet: read whole (bounded) where its
 * actor runs, or sent on as it is read where the actor runs on another
 * node, so a forwarding node never holds a long body (issue 17). Bodies up
 * to {@linkcode MAX_REPLAYED_BODY_BYTES} are read at once instead: in hand,
 * a request that comes back "not held" can be sent again to the new
 * holder, where a streamed one cannot.
 *
 * @module
 */

import { concatBytes } from "../bytes.ts";
import type { FailedOutcome } from "../actors/protocol.ts";
import type { StreamedBody } from "./forward.ts";
import { MAX_REPLAYED_BODY_BYTES } from "../limits.ts";

export { MAX_REPLAYED_BODY_BYTES };

/** A body went past its limit while it was read. */
export class BodyTooLarge extends Error {
  override name = "BodyTooLarge";
}

/**
 * Reads `stream` whole, throwing {@linkcode BodyTooLarge} past `limit`
 * bytes (the rest left unread).
 *
 * @example
 * ```ts
 * import { readStream } from "./unread_body.ts";
 * declare const request: Request;
 * const body = await readStream(request.body!, 1024 * 1024);
 * ```
 */
export async function readStream(
  stream: ReadableStream<Uint8Array>,
  limit: number,
): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  for await (const chunk of stream) {
    size += chunk.byteLength;
    if (size > limit) throw new BodyTooLarge();
    chunks.push(chunk);
  }
  return concatBytes(chunks, size);
}

/**
 * The answer to a body that could not be read whole: 413 past `limit`
 * ({@linkcode BodyTooLarge}), 503 while the node stops (a stop ends the
 * body streams of requests under way: not the client's fault), else 400.
 *
 * @example
 * ```ts
 * import { BodyTooLarge, bodyReadFailure } from "./unread_body.ts";
 * bodyReadFailure(new BodyTooLarge(), 1024, () => undefined).status; // 413
 * ```
 */
export function bodyReadFailure(
  error: unknown,
  limit: number,
  notServing: () => string | undefined,
): FailedOutcome {
  if (error instanceof BodyTooLarge) {
    return {
      kind: "failed",
      status: 413,
      message: `the request body is larger than ${limit} bytes`,
    };
  }
  const stopping = notServing();
  if (stopping) return { kind: "failed", status: 503, message: `not ready: ${stopping}` };
  return { kind: "failed", status: 400, message: "bad request: the body could not be read" };
}

/**
 * A request body left unread until its route is known.
 *
 * @example
 * ```ts
 * import { UnreadBody } from "./unread_body.ts";
 * import type { Forwarder } from "./forward.ts";
 * declare const request: Request;
 * declare const forwarder: Forwarder;
 * declare const peer: string;
 * declare const head: Omit<Parameters<Forwarder["forwardStreamed"]>[1], "stream">;
 * const maxBodyBytes = 1024 * 1024;
 * const unread = new UnreadBody(request.body!, undefined, maxBodyBytes, () => undefined);
 * const whole = await unread.read(); // where the actor runs
 * // or, forwarding:
 * await forwarder.forwardStreamed(peer, { ...head, stream: unread.streamed() });
 * ```
 */
export class UnreadBody {
  #started = false;

  /**
   * `length` is the declared content-length (undefined: chunked);
   * `notServing` says why the node cannot serve, when a read fails because
   * it stops.
   */
  constructor(
    readonly source: ReadableStream<Uint8Array>,
    readonly length: number | undefined,
    readonly limit: number,
    readonly notServing: () => string | undefined,
  ) {}

  /** Whether any of it was read (it cannot be sent again). */
  get started(): boolean {
    return this.#started;
  }

  /** The whole body, or the answer to a body that is too long or cannot be read. */
  async read(): Promise<Uint8Array | FailedOutcome> {
    this.#started = true;
    try {
      return await readStream(this.source, this.limit);
    } catch (error) {
      return bodyReadFailure(error, this.limit, this.notServing);
    }
  }

  /** The body to send on as it is read. */
  streamed(): StreamedBody {
    return {
      length: this.length,
      source: this.source,
      limit: this.limit,
      started: () => this.#started = true,
    };
  }
}
