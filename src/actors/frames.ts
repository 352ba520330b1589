/**
 * Length-prefixed messages between the node and an executor over a Unix
 * socket: a 4-byte little-endian length, then the value in the codec of
 * `src/actors/codec.ts`, which keeps byte arrays and 64-bit integers as they
 * are. Writes are batched: messages posted before the current task's
 * microtasks are done go out in one write. (A child's stdin and stdout
 * streams cost about five times as much per round trip as raw socket reads
 * and writes; flushing on a `setTimeout(0)` instead of a microtask capped a
 * hop at a fifth of what it reaches now: bench/hop_ceiling.ts.)
 *
 * @module
 */

import { decodePlain, encodePlain, MessageTooLarge, type Plain } from "./codec.ts";

/** Largest message either side sends; a larger one fails its event instead. */
export const MAX_FRAME_BYTES = 64 * 1024 * 1024;

/** Bytes asked of the socket per read. */
const READ_BYTES = 256 * 1024;

const INITIAL_BUFFER_BYTES = 64 * 1024;

/** A batch buffer larger than this is not kept for reuse once written. */
const MAX_SPARE_BYTES = 1024 * 1024;

/**
 * Sends messages on a connection, one write per batch of messages posted
 * together. Messages are encoded straight into the batch's buffer; two
 * buffers take turns, one filling while the other is written.
 *
 * @example
 * ```ts ignore
 * const sender = new FrameSender(conn);
 * sender.send({ type: "ready" });
 * ```
 */
export class FrameSender {
  readonly #conn: Deno.Conn;
  #batch: Uint8Array = new Uint8Array(INITIAL_BUFFER_BYTES);
  #used = 0;
  #spare: Uint8Array | undefined;
  #writing: Promise<void> = Promise.resolve();
  #scheduled = false;
  #broken = false;

  constructor(conn: Deno.Conn) {
    this.#conn = conn;
  }

  /**
   * Queues `message`; it is written with the others posted before the next
   * microtask checkpoint. Throws {@linkcode MessageTooLarge} for a message
   * over {@linkcode MAX_FRAME_BYTES}.
   */
  send(message: Plain): void {
    if (this.#broken) return;
    while (true) {
      const room = Math.min(this.#batch.length - this.#used - 4, MAX_FRAME_BYTES);
      try {
        const length = encodePlain(
          message,
          this.#batch.subarray(this.#used + 4, this.#used + 4 + room),
        );
        new DataView(this.#batch.buffer).setUint32(this.#used, length, true);
        this.#used += 4 + length;
        break;
      } catch (error) {
        if (!(error instanceof MessageTooLarge) || room >= MAX_FRAME_BYTES) throw error;
        const grown = new Uint8Array(
          Math.min(this.#batch.length * 4, this.#used + 4 + MAX_FRAME_BYTES),
        );
        grown.set(this.#batch.subarray(0, this.#used));
        this.#batch = grown;
      }
    }
    if (!this.#scheduled) {
      this.#scheduled = true;
      queueMicrotask(() => this.#flush());
    }
  }

  #flush() {
    this.#scheduled = false;
    const full = this.#batch;
    const batch = full.subarray(0, this.#used);
    this.#batch = this.#spare ?? new Uint8Array(INITIAL_BUFFER_BYTES);
    this.#spare = undefined;
    this.#used = 0;
    this.#writing = this.#writing.then(async () => {
      let written = 0;
      while (written < batch.length) written += await this.#conn.write(batch.subarray(written));
      if (full.length <= MAX_SPARE_BYTES) this.#spare = full;
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
