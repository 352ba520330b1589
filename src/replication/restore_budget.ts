/**
 * The time the reads of one restore have together, as the spec's
 * "Replication" section bounds it: 30 s, plus a second per megabyte and per
 * eight objects they read, and the deadline that charges that time only
 * while the reads count. Time waiting for a limiter place is not charged,
 * nor the seconds other restores' megabytes add to a read, nor work on the
 * local disk.
 *
 * Apart from the reads themselves (`restore_reads.ts`): what is
 * charged and when is one rule with its own state (the running charge, the
 * reads outstanding and charging, the timer), which a read only reports to.
 *
 * @module
 */

import { BYTES_PER_MB } from "../bucket/bounds.ts";
import type { Clock, Timer } from "../time/clock.ts";
import type { HistoryObject } from "./history.ts";

/**
 * The reads of one restore have this long together (30 s), plus the allowances below.
 *
 * @example
 * ```ts
 * import { RESTORE_TOTAL_BASE_MS } from "./restore_budget.ts";
 * console.log(RESTORE_TOTAL_BASE_MS); // 30000
 * ```
 */
export const RESTORE_TOTAL_BASE_MS = 30_000;

/**
 * Added to a restore's time per megabyte it reads (1 s).
 *
 * @example
 * ```ts
 * import { RESTORE_TOTAL_MS_PER_MB } from "./restore_budget.ts";
 * console.log(RESTORE_TOTAL_MS_PER_MB); // 1000
 * ```
 */
export const RESTORE_TOTAL_MS_PER_MB = 1_000;

/**
 * Added to a restore's time per group of {@linkcode RESTORE_OBJECTS_PER_GROUP} objects (1 s).
 *
 * @example
 * ```ts
 * import { RESTORE_MS_PER_OBJECT_GROUP } from "./restore_budget.ts";
 * console.log(RESTORE_MS_PER_OBJECT_GROUP); // 1000
 * ```
 */
export const RESTORE_MS_PER_OBJECT_GROUP = 1_000;

/**
 * Objects per group of {@linkcode RESTORE_MS_PER_OBJECT_GROUP} (eight).
 *
 * @example
 * ```ts
 * import { RESTORE_OBJECTS_PER_GROUP } from "./restore_budget.ts";
 * console.log(RESTORE_OBJECTS_PER_GROUP); // 8
 * ```
 */
export const RESTORE_OBJECTS_PER_GROUP = 8;

/**
 * The time the reads of one restore have together, for `objects` objects of
 * `bytes` bytes in all.
 *
 * @example
 * ```ts
 * import { restoreBudgetMs } from "./restore_budget.ts";
 * restoreBudgetMs(9, 2_000_000); // 30000 + 2000 + 2000
 * ```
 */
export function restoreBudgetMs(objects: number, bytes: number): number {
  return RESTORE_TOTAL_BASE_MS + Math.ceil(bytes / BYTES_PER_MB) * RESTORE_TOTAL_MS_PER_MB +
    Math.ceil(objects / RESTORE_OBJECTS_PER_GROUP) * RESTORE_MS_PER_OBJECT_GROUP;
}

/**
 * The time the reads of one restore are charged, as a deadline that runs
 * only while it counts: while no read is outstanding (planning) or while at
 * least one read holds a limiter place within its own share of time, or
 * pauses before a resend. It stands still while every outstanding read waits
 * for a place or runs on seconds other restores' megabytes added, and for
 * work on the local disk (applying a file, copying the local database:
 * {@linkcode ReadBudget.uncounted}).
 *
 * @example
 * ```ts
 * import { ReadBudget } from "./restore_budget.ts";
 * import { systemClock } from "../time/clock.ts";
 * const budget = new ReadBudget(systemClock, (ms) => console.log(`reads over ${ms} ms`));
 * budget.allow([{ key: "actors/t/c/n/wal/0/1-1.ltx", size: 4096, lastModified: 0 }]);
 * budget.enter(); // a read waits for a limiter place: not charged
 * budget.startCharging(); // it holds one
 * budget.stopCharging();
 * budget.leave();
 * budget.close();
 * ```
 */
export class ReadBudget {
  readonly #clock: Clock;
  readonly #expire: (allowedMs: number) => void;
  #objects = 0;
  #bytes = 0;
  #allowedMs = restoreBudgetMs(0, 0);
  #chargedMs = 0;
  #since: number | undefined;
  #timer: Timer | undefined;
  #outstanding = 0;
  #charging = 0;
  #closed = false;

  /** Charged on `clock`; `expire` is told the allowed time once it has all been charged. */
  constructor(clock: Clock, expire: (allowedMs: number) => void) {
    this.#clock = clock;
    this.#expire = expire;
    this.#update();
  }

  /** Adds the allowance of reading `objects`. */
  allow(objects: readonly HistoryObject[]): void {
    for (const o of objects) {
      this.#objects++;
      this.#bytes += o.size;
    }
    this.#allowedMs = restoreBudgetMs(this.#objects, this.#bytes);
    if (this.#since !== undefined) this.#arm();
  }

  /** A read began (waiting for a place, not charged yet). */
  enter(): void {
    this.#outstanding++;
    this.#update();
  }

  /** A read ended. */
  leave(): void {
    this.#outstanding--;
    this.#update();
  }

  /** A read holds a place within its own time, or pauses before a resend. */
  startCharging(): void {
    this.#charging++;
    this.#update();
  }

  /** It no longer does. */
  stopCharging(): void {
    this.#charging--;
    this.#update();
  }

  /** Stops the deadline for good. */
  close(): void {
    this.#closed = true;
    this.#update();
  }

  #charged(): number {
    return this.#chargedMs +
      (this.#since === undefined ? 0 : this.#clock.monotonic() - this.#since);
  }

  #update(): void {
    const running = !this.#closed && (this.#outstanding === 0 || this.#charging > 0);
    if (running === (this.#since !== undefined)) return;
    if (running) {
      this.#since = this.#clock.monotonic();
      this.#arm();
    } else {
      this.#chargedMs = this.#charged();
      this.#since = undefined;
      this.#timer?.cancel();
      this.#timer = undefined;
    }
  }

  /**
   * Runs `work` on the local disk, whose time is not charged (the spec: the
   * deadline does not count work on the local disk): reads that land
   * meanwhile are only seen once it ends, so the time would be theirs.
   */
  uncounted<T>(work: () => T): T {
    const start = this.#clock.monotonic();
    try {
      return work();
    } finally {
      const spent = this.#clock.monotonic() - start;
      if (this.#since !== undefined && spent > 0) {
        this.#since += spent;
        this.#arm();
      }
    }
  }

  #arm(): void {
    this.#timer?.cancel();
    const left = this.#allowedMs - this.#charged();
    this.#timer = this.#clock.setTimer(Math.max(0, left), () => {
      this.#timer = undefined;
      if (this.#allowedMs - this.#charged() <= 0) this.#expire(this.#allowedMs);
      else this.#arm();
    });
  }
}
