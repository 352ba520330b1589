/**
 * Length-prefixed messages between the node and an executor over a Unix
 * socket: a 4-byte little-endian length, then the value in the codec of
 * `src/actors/codec.ts`, which keeps byte arrays and 64-bit integers as they
 * are. Writes are batched (see {@linkcode FrameBatching}). (A child's stdin
 * and stdout streams cost about five times as much per round trip as raw
 * socket reads and writes; flushing on a `setTimeout(0)` instead of a
 * microtask capped a hop at a fifth of what it reaches now:
 * bench/hop_ceiling.ts.)
 *
 * @module
 */

import { decodePlainAt, encodePlainAt, MessageTooLarge, type Plain } from "./codec.ts";

/** Largest message either side sends; a larger one fails its event instead. */
export const MAX_FRAME_BYTES = 64 * 1024 * 1024;

/** Bytes asked of the socket per read. */
const READ_BYTES = 256 * 1024;

const INITIAL_BUFFER_BYTES = 64 * 1024;

/** A batch buffer larger than this is not kept for reuse once written. */
const MAX_SPARE_BYTES = 1024 * 1024;

/**
 * Written batch buffers kept for the next batches. Several batches can be
 * on their way at once (each write completes at a later turn of the event
 * loop), and without a spare each one took a new zeroed 64 KiB buffer: 3 %
 * of an executor's time over 1,000 actors.
 */
const MAX_SPARES = 4;

/**
 * When a batch is written:
 * - `microtask`: at the next microtask checkpoint. An executor must not hold
 *   an answer back while it runs the next event, which may run long (tried:
 *   with `turn`, an event that looped kept the answer of the one before it,
 *   and that one got the 504).
 * - `turn`: at the end of the event loop's turn (`setImmediate`), so that
 *   everything posted in one turn goes out in one write. For the node's side,
 *   which never runs long: each write to an executor is a system call that
 *   also wakes it, and with `microtask` every event was written alone (one
 *   request per turn reaches the handler).
 */
export type FrameBatching = "microtask" | "turn";

/**
 * Sends messages on a connection, one write per batch of messages posted
 * together. Messages are encoded straight into the batch's buffer; written
 * buffers are reused.
 *
 * @example
 * ```ts
 * import { FrameSender } from "./frames.ts";
 * declare const conn: Deno.Conn;
 * const sender = new FrameSender(conn);
 * sender.send({ type: "ready" });
 * ```
 */
export class FrameSender {
  readonly #conn: Deno.Conn;
  readonly #schedule: (flush: () => void) => void;
  #batch: Uint8Array = new Uint8Array(INITIAL_BUFFER_BYTES);
  #used = 0;
  readonly #spares: Uint8Array[] = [];
  #writing: Promise<void> = Promise.resolve();
  #scheduled = false;
  #broken = false;
  readonly #flushNow = () => this.#flush();

  constructor(conn: Deno.Conn, batching: FrameBatching = "microtask") {
    this.#conn = conn;
    this.#schedule = batching === "turn" ? setImmediate : queueMicrotask;
  }

  /**
   * Queues `message`; it is written with the others posted before the batch
   * is written (see {@linkcode FrameBatching}). Throws
   * {@linkcode MessageTooLarge} for a message over {@linkcode MAX_FRAME_BYTES}.
   */
  send(message: Plain): void {
    if (this.#broken) return;
    while (true) {
      const room = Math.min(this.#batch.length - this.#used - 4, MAX_FRAME_BYTES);
      try {
        const length = encodePlainAt(message, this.#batch, this.#used + 4, room);
        const batch = this.#batch;
        const at = this.#used;
        batch[at] = length;
        batch[at + 1] = length >>> 8;
        batch[at + 2] = length >>> 16;
        batch[at + 3] = length >>> 24;
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
      this.#schedule(this.#flushNow);
    }
  }

  #flush() {
    if (!this.#scheduled) return;
    this.#scheduled = false;
    const full = this.#batch;
    const batch = full.subarray(0, this.#used);
    this.#batch = this.#spares.pop() ?? new Uint8Array(INITIAL_BUFFER_BYTES);
    this.#used = 0;
    this.#writing = this.#writing.then(async () => {
      let written = 0;
      while (written < batch.length) written += await this.#conn.write(batch.subarray(written));
      if (full.length <= MAX_SPARE_BYTES && this.#spares.length < MAX_SPARES) {
        this.#spares.push(full);
      }
    }).catch(() => {
      // The other side is gone; whoever reads from it finds out.
      this.#broken = true;
    });
  }

  /** Resolves once everything queued so far is written (or the connection broke). */
  async drain(): Promise<void> {
    this.#flush();
    await this.#writing;
  }
}

const DONE: IteratorReturnResult<undefined> = { done: true, value: undefined };

/**
 * Reads messages from a connection until it closes. A message already read
 * is handed over at once (one promise, not an async generator's several).
 *
 * @example
 * ```ts
 * import { readFrames } from "./frames.ts";
 * declare const conn: Deno.Conn;
 * for await (const message of readFrames(conn)) console.log(message);
 * ```
 */
export function readFrames(conn: Deno.Conn): AsyncIterableIterator<Plain> {
  return new FrameReader(conn);
}

class FrameReader implements AsyncIterableIterator<Plain> {
  readonly #conn: Deno.Conn;
  // Bytes are read into one buffer, grown only for a frame larger than it;
  // each frame is decoded once it is whole.
  #buffer = new Uint8Array(READ_BYTES);
  #start = 0;
  #end = 0;
  #done = false;

  constructor(conn: Deno.Conn) {
    this.#conn = conn;
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<Plain> {
    return this;
  }

  next(): Promise<IteratorResult<Plain>> {
    if (this.#done) return Promise.resolve(DONE);
    try {
      const length = this.#whole();
      if (length >= 0) return Promise.resolve({ done: false, value: this.#take(length) });
    } catch (error) {
      this.#done = true;
      return Promise.reject(error);
    }
    return this.#read();
  }

  return(): Promise<IteratorResult<Plain>> {
    this.#done = true;
    return Promise.resolve(DONE);
  }

  /** The length of the next frame if it is whole in the buffer, else -1. */
  #whole(): number {
    const length = frameLength(this.#buffer, this.#start, this.#end);
    return length !== undefined && this.#end - this.#start - 4 >= length ? length : -1;
  }

  #take(length: number): Plain {
    const at = this.#start + 4;
    this.#start = at + length;
    if (this.#start === this.#end) this.#start = this.#end = 0;
    return decodePlainAt(this.#buffer, at, at + length);
  }

  async #read(): Promise<IteratorResult<Plain>> {
    try {
      while (true) {
        if (this.#buffer.length - this.#end < READ_BYTES / 4) {
          const needed = frameLength(this.#buffer, this.#start, this.#end);
          const size = Math.max(
            READ_BYTES,
            needed === undefined ? 0 : needed + 4,
            (this.#end - this.#start) * 2,
          );
          const next = size > this.#buffer.length ? new Uint8Array(size) : this.#buffer;
          next.set(this.#buffer.subarray(this.#start, this.#end), 0);
          this.#buffer = next;
          this.#end -= this.#start;
          this.#start = 0;
        }
        const read = await this.#conn.read(this.#buffer.subarray(this.#end));
        if (read === null) {
          this.#done = true;
          return DONE;
        }
        this.#end += read;
        const length = this.#whole();
        if (length >= 0) return { done: false, value: this.#take(length) };
      }
    } catch (error) {
      this.#done = true;
      throw error;
    }
  }
}

function frameLength(buffer: Uint8Array, start: number, end: number): number | undefined {
  if (end - start < 4) return undefined;
  const length = (buffer[start] | (buffer[start + 1] << 8) | (buffer[start + 2] << 16) |
    (buffer[start + 3] << 24)) >>> 0;
  if (length > MAX_FRAME_BYTES) throw new Error(`a frame of ${length} bytes is over the limit`);
  return length;
}
