/**
 * Length-prefixed messages over a byte stream (an executor's stdin and
 * stdout): a 4-byte little-endian length, then the value in the codec of
 * `src/sqlite/codec.ts`, which keeps byte arrays and 64-bit integers as they
 * are.
 *
 * @module
 */

import { decodePlain, encodePlain, MessageTooLarge, type Plain } from "../sqlite/codec.ts";

/** Largest message either side sends; a larger one fails its event instead. */
export const MAX_FRAME_BYTES = 64 * 1024 * 1024;

const INITIAL_BUFFER_BYTES = 64 * 1024;

/**
 * Encodes messages into one reusable buffer that grows as needed, up to
 * {@linkcode MAX_FRAME_BYTES}.
 *
 * @example
 * ```ts
 * import { FrameEncoder } from "./frames.ts";
 * const frame = new FrameEncoder().encode({ type: "ready" });
 * ```
 */
export class FrameEncoder {
  #buffer = new Uint8Array(INITIAL_BUFFER_BYTES);

  /** The frame of `message`: a view into the encoder's buffer, valid until the next call. */
  encode(message: Plain): Uint8Array {
    while (true) {
      try {
        const length = encodePlain(message, this.#buffer.subarray(4));
        new DataView(this.#buffer.buffer).setUint32(0, length, true);
        return this.#buffer.subarray(0, 4 + length);
      } catch (error) {
        if (!(error instanceof MessageTooLarge) || this.#buffer.length >= MAX_FRAME_BYTES + 4) {
          throw error;
        }
        this.#buffer = new Uint8Array(Math.min(this.#buffer.length * 4, MAX_FRAME_BYTES + 4));
      }
    }
  }
}

/**
 * Reads messages from a byte stream until it ends.
 *
 * @example
 * ```ts ignore
 * for await (const message of readFrames(child.stdout)) console.log(message);
 * ```
 */
export async function* readFrames(stream: ReadableStream<Uint8Array>): AsyncGenerator<Plain> {
  // Chunks are kept in a list and joined once a whole frame is there, so a
  // large frame arriving in many chunks is copied once, not once per chunk.
  let chunks: Uint8Array[] = [];
  let buffered = 0;
  let needed = 4;
  for await (const chunk of stream) {
    chunks.push(chunk);
    buffered += chunk.length;
    while (buffered >= needed) {
      const joined = chunks.length === 1 ? chunks[0] : join(chunks, buffered);
      chunks = [joined];
      const length = new DataView(joined.buffer, joined.byteOffset).getUint32(0, true);
      if (length > MAX_FRAME_BYTES) throw new Error(`a frame of ${length} bytes is over the limit`);
      if (buffered < 4 + length) {
        needed = 4 + length;
        break;
      }
      yield decodePlain(joined.subarray(4, 4 + length));
      const rest = joined.subarray(4 + length);
      chunks = rest.length > 0 ? [rest] : [];
      buffered = rest.length;
      needed = 4;
    }
  }
}

function join(chunks: Uint8Array[], total: number): Uint8Array {
  const joined = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    joined.set(chunk, offset);
    offset += chunk.length;
  }
  return joined;
}
