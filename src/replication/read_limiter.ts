/**
 * How many restore reads a process has in flight, and how many bytes they
 * bring: a node that takes over many actors at once must not open thousands
 * of reads or hold gigabytes of LTX files. Places are granted first come,
 * first served, so a large read is not starved by small ones.
 *
 * @module
 */

/**
 * Restore reads in flight at once in one process (32).
 *
 * @example
 * ```ts
 * import { RESTORE_MAX_READS } from "./read_limiter.ts";
 * console.log(RESTORE_MAX_READS); // 32
 * ```
 */
export const RESTORE_MAX_READS = 32;

/**
 * Bytes of restore reads in flight at once in one process (256 MiB).
 *
 * @example
 * ```ts
 * import { RESTORE_MAX_READ_BYTES } from "./read_limiter.ts";
 * console.log(RESTORE_MAX_READ_BYTES / 2 ** 20); // 256
 * ```
 */
export const RESTORE_MAX_READ_BYTES = 256 * 1024 * 1024;

/** A granted place; give it back once the read is over. */
export interface ReadPermit {
  /** The bytes it counts for (the read's size, at most the limiter's byte limit). */
  readonly bytes: number;
  /** Gives the place back; later calls do nothing. */
  release(): void;
}

interface Waiter {
  bytes: number;
  grant: (permit: ReadPermit) => void;
}

/**
 * At most `maxReads` reads and `maxBytes` bytes at once, granted in the
 * order they were asked for. A read larger than `maxBytes` counts as
 * `maxBytes`, so it waits until it is alone but is never refused.
 *
 * @example Two restores sharing a process's limit
 * ```ts
 * import { ReadLimiter } from "./read_limiter.ts";
 * const limiter = new ReadLimiter();
 * const permit = await limiter.acquire(4096);
 * try {
 *   // read the object
 * } finally {
 *   permit.release();
 * }
 * ```
 */
export class ReadLimiter {
  /** Most reads at once. */
  readonly maxReads: number;
  /** Most bytes at once. */
  readonly maxBytes: number;
  #reads = 0;
  #bytes = 0;
  readonly #queue: Waiter[] = [];

  /** A limiter of `maxReads` reads and `maxBytes` bytes; an executor may get a share. */
  constructor(maxReads = RESTORE_MAX_READS, maxBytes = RESTORE_MAX_READ_BYTES) {
    if (!Number.isInteger(maxReads) || maxReads < 1) {
      throw new RangeError(`maxReads must be a positive integer, not ${maxReads}`);
    }
    if (!Number.isInteger(maxBytes) || maxBytes < 1) {
      throw new RangeError(`maxBytes must be a positive integer, not ${maxBytes}`);
    }
    this.maxReads = maxReads;
    this.maxBytes = maxBytes;
  }

  /** Reads in flight. */
  get reads(): number {
    return this.#reads;
  }

  /** Bytes of the reads in flight. */
  get bytes(): number {
    return this.#bytes;
  }

  /** Reads waiting for a place. */
  get waiting(): number {
    return this.#queue.length;
  }

  /**
   * Waits for a place for a read of `bytes` bytes, behind every earlier
   * caller still waiting. Rejects with the signal's reason if it aborts first
   * (the place is then not taken).
   */
  acquire(bytes: number, signal?: AbortSignal): Promise<ReadPermit> {
    if (!Number.isFinite(bytes) || bytes < 0) {
      return Promise.reject(new RangeError(`not a read size: ${bytes}`));
    }
    if (signal?.aborted) return Promise.reject(signal.reason);
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        bytes: Math.min(Math.ceil(bytes), this.maxBytes),
        grant: (permit) => {
          signal?.removeEventListener("abort", onAbort);
          resolve(permit);
        },
      };
      const onAbort = () => {
        const at = this.#queue.indexOf(waiter);
        if (at < 0) return;
        this.#queue.splice(at, 1);
        reject(signal?.reason);
        // The head may have been what held the others back.
        this.#grant();
      };
      signal?.addEventListener("abort", onAbort, { once: true });
      this.#queue.push(waiter);
      this.#grant();
    });
  }

  #grant(): void {
    while (this.#queue.length > 0) {
      const head = this.#queue[0];
      if (this.#reads >= this.maxReads || this.#bytes + head.bytes > this.maxBytes) return;
      this.#queue.shift();
      this.#reads++;
      this.#bytes += head.bytes;
      let released = false;
      head.grant({
        bytes: head.bytes,
        release: () => {
          if (released) return;
          released = true;
          this.#reads--;
          this.#bytes -= head.bytes;
          this.#grant();
        },
      });
    }
  }
}
