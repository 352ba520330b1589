/**
 * A {@linkcode MemoryBucket} whose reads of objects (GET) misbehave while
 * listings answer, to try the restore's read bounds one at a time.
 *
 * @module
 */

import type { CallOptions, StoredObject } from "../../src/bucket/bucket.ts";
import { BucketUnavailable } from "../../src/bucket/errors.ts";
import { MemoryBucket } from "../../src/bucket/memory.ts";
import type { Clock } from "../../src/time/clock.ts";

/** How GETs misbehave. */
export interface ReadFaults {
  /** Every GET waits this long on the clock before it answers. */
  latencyMs?: number;
  /** This many GETs (the first ones) are refused with a 503. */
  refuseFirst?: number;
  /** Every GET is refused with a 503. */
  refuseAll?: boolean;
  /** Every GET is never answered (until its signal aborts). */
  silent?: boolean;
}

/**
 * A memory bucket with faults on GET only.
 *
 * @example
 * ```ts
 * import { FaultyReads } from "./fault_bucket.ts";
 * import { FakeClock } from "../bucket/fake_clock.ts";
 * const bucket = new FaultyReads(new FakeClock(), { refuseFirst: 1 });
 * ```
 */
export class FaultyReads extends MemoryBucket {
  /** The faults in force. */
  reads: ReadFaults;
  /** GETs asked, including refused and abandoned ones. */
  gets = 0;
  readonly #clock: Clock;

  /** A bucket on `clock` with `reads` faults. */
  constructor(clock: Clock, reads: ReadFaults = {}) {
    super({ clock });
    this.#clock = clock;
    this.reads = reads;
  }

  /** Reads an object, after the faults. */
  override async get(key: string, options: CallOptions = {}): Promise<StoredObject | null> {
    const n = ++this.gets;
    const { latencyMs, refuseFirst = 0, refuseAll, silent } = this.reads;
    if (silent) {
      await new Promise((_, reject) => {
        options.signal?.addEventListener("abort", () => reject(options.signal?.reason));
      });
    }
    if (latencyMs) await this.#clock.sleep(latencyMs, options.signal);
    if (refuseAll || n <= refuseFirst) {
      throw new BucketUnavailable(`GET ${key}: 503 (injected)`, { ambiguous: false, status: 503 });
    }
    return await super.get(key, options);
  }
}
