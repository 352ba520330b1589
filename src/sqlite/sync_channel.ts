/**
 * A synchronous request channel between two threads over shared memory.
 *
 * The execution worker runs actor code and must call SQLite synchronously
 * (Wasm imports are synchronous), but must not own the SQLite connections:
 * a worker terminated while an actor loops would leak its connections and
 * their file locks for the life of the process. So a storage worker, which
 * never runs actor code, owns them and answers through this channel.
 *
 * @module
 */

import { decodePlain, encodePlain, type Plain } from "./codec.ts";

/**
 * Bytes a request or a response may take: SQL text, parameters or result
 * rows larger than this fail with `MessageTooLarge` instead of growing
 * memory without bound.
 */
export const SYNC_CHANNEL_BYTES = 8 * 1024 * 1024;

const HEADER_INTS = 2;
const STATE = 0;
const LENGTH = 1;

const IDLE = 0;
const REQUEST = 1;
const RESPONSE = 2;

/**
 * Creates the shared memory of one channel.
 *
 * @example
 * ```ts
 * import { createSyncChannelBuffer } from "./sync_channel.ts";
 * const buffer = createSyncChannelBuffer(1024);
 * ```
 */
export function createSyncChannelBuffer(bytes: number = SYNC_CHANNEL_BYTES): SharedArrayBuffer {
  return new SharedArrayBuffer(HEADER_INTS * 4 + bytes);
}

function views(buffer: SharedArrayBuffer) {
  return {
    header: new Int32Array(buffer, 0, HEADER_INTS),
    data: new Uint8Array(buffer, HEADER_INTS * 4),
  };
}

/**
 * The calling side: blocks its thread until the server answers.
 *
 * @example
 * ```ts ignore
 * const client = new SyncChannelClient(buffer);
 * const answer = client.call({ op: "ping" });
 * ```
 */
export class SyncChannelClient {
  #header: Int32Array;
  #data: Uint8Array;

  constructor(buffer: SharedArrayBuffer) {
    ({ header: this.#header, data: this.#data } = views(buffer));
  }

  /**
   * Waits until a call left unfinished by an earlier client (a terminated
   * worker) is answered, then clears it, so this client starts clean.
   */
  recover(): void {
    while (Atomics.load(this.#header, STATE) === REQUEST) {
      Atomics.wait(this.#header, STATE, REQUEST, 100);
    }
    Atomics.store(this.#header, STATE, IDLE);
  }

  /** Sends `request` and returns the server's answer. */
  call(request: Plain): Plain {
    const length = encodePlain(request, this.#data);
    Atomics.store(this.#header, LENGTH, length);
    Atomics.store(this.#header, STATE, REQUEST);
    Atomics.notify(this.#header, STATE);
    while (Atomics.load(this.#header, STATE) === REQUEST) {
      Atomics.wait(this.#header, STATE, REQUEST);
    }
    const answer = decodePlain(this.#data.subarray(0, Atomics.load(this.#header, LENGTH)));
    Atomics.store(this.#header, STATE, IDLE);
    return answer;
  }
}

/**
 * The answering side: blocks its thread, answering each request with
 * `handle`, until `handle` asks it to stop by returning `stop: true`.
 *
 * @example
 * ```ts ignore
 * serveSyncChannel(buffer, (request) => ({ answer: "pong" }));
 * ```
 */
export function serveSyncChannel(
  buffer: SharedArrayBuffer,
  handle: (request: Plain) => { answer: Plain; stop?: boolean },
): void {
  const { header, data } = views(buffer);
  while (true) {
    const state = Atomics.load(header, STATE);
    if (state !== REQUEST) {
      Atomics.wait(header, STATE, state);
      continue;
    }
    const request = decodePlain(data.subarray(0, Atomics.load(header, LENGTH)));
    const { answer, stop } = handle(request);
    let length: number;
    try {
      length = encodePlain(answer, data);
    } catch (error) {
      length = encodePlain({ error: { code: "WASMKEEP_TOO_LARGE", message: String(error) } }, data);
    }
    Atomics.store(header, LENGTH, length);
    Atomics.store(header, STATE, RESPONSE);
    Atomics.notify(header, STATE);
    if (stop) return;
  }
}
