/**
 * Length-prefixed messages between the node and an executor over a Unix
 * socket: a 4-byte little-endian length, then the value in the codec of
 * `src/sqlite/codec.ts`, which keeps byte arrays and 64-bit integers as they
 * are. Writes are batched: messages posted before the current task's
 * microtasks are done go out in one write. (A child's stdin and stdout
 * streams cost about five times as much per round trip as raw socket reads
 * and writes; flushing on a `setTimeout(0)` instead of a microtask capped a
 * hop at a fifth of what it reaches now: bench/hop_ceiling.ts.)
 *
 * @module
 */

import { decodePlain, encodePlain, MessageTooLarge, type Plain } from "../sqlite/codec.ts";
import { concatBytes } from "../bytes.ts";

/** Largest message either side sends; a larger one fails its event instead. */
export const MAX_FRAME_BYTES = 64 * 1024 * 1024;

/** Bytes asked of the socket per read. */
const READ_BYTES = 256 * 1024;

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
 * Sends messages on a connection, one write per batch of messages posted
 * together.
 *
 * @example
 * ```ts ignore
 * const sender = new FrameSender(conn);
 * sender.send({ type: "ready" });
 * ```
 */
export class FrameSender {
  readonly #conn: Deno.Conn;
  readonly #encoder = new FrameEncoder();
  #queued: Uint8Array[] = [];
  #queuedBytes = 0;
  #writing: Promise<void> = Promise.resolve();
  #scheduled = false;
  #broken = false;

  constructor(conn: Deno.Conn) {
    this.#conn = conn;
  }

  /** Queues `message`; it is written with the others posted before the next microtask checkpoint. */
  send(message: Plain): void {
    if (this.#broken) return;
    const frame = this.#encoder.encode(message).slice();
    this.#queued.push(frame);
    this.#queuedBytes += frame.length;
    if (!this.#scheduled) {
      this.#scheduled = true;
      queueMicrotask(() => this.#flush());
    }
  }

  #flush() {
    this.#scheduled = false;
    const frames = this.#queued;
    const total = this.#queuedBytes;
    this.#queued = [];
    this.#queuedBytes = 0;
    const batch = frames.length === 1 ? frames[0] : concatBytes(frames, total);
    this.#writing = this.#writing.then(async () => {
      let written = 0;
      while (written < batch.length) written += await this.#conn.write(batch.subarray(written));
    }).catch(() => {
      // The other side is gone; whoever reads from it finds out.
      this.#broken = true;
    });
  }

  /** Resolves once everything queued so far is written (or the connection broke). */
  async drain(): Promise<void> {
    if (this.#scheduled) this.#flush();
    await this.#writing;
  }
}

/**
 * Reads messages from a connection until it closes.
 *
 * @example
 * ```ts ignore
 * for await (const message of readFrames(conn)) console.log(message);
 * ```
 */
export async function* readFrames(conn: Deno.Conn): AsyncGenerator<Plain> {
  // Bytes are read into one buffer, grown only for a frame larger than it;
  // each frame is decoded once it is whole.
  let buffer = new Uint8Array(READ_BYTES);
  let start = 0;
  let end = 0;
  while (true) {
    if (buffer.length - end < READ_BYTES / 4) {
      const needed = frameLength(buffer, start, end);
      const size = Math.max(READ_BYTES, needed === undefined ? 0 : needed + 4, (end - start) * 2);
      const next = size > buffer.length ? new Uint8Array(size) : buffer;
      next.set(buffer.subarray(start, end), 0);
      buffer = next;
      end -= start;
      start = 0;
    }
    const read = await conn.read(buffer.subarray(end));
    if (read === null) return;
    end += read;
    while (true) {
      const length = frameLength(buffer, start, end);
      if (length === undefined || end - start - 4 < length) break;
      const message = decodePlain(buffer.subarray(start + 4, start + 4 + length));
      start += 4 + length;
      yield message;
    }
    if (start === end) start = end = 0;
  }
}

function frameLength(buffer: Uint8Array, start: number, end: number): number | undefined {
  if (end - start < 4) return undefined;
  const length = new DataView(buffer.buffer, buffer.byteOffset + start).getUint32(0, true);
  if (length > MAX_FRAME_BYTES) throw new Error(`a frame of ${length} bytes is over the limit`);
  return length;
}
