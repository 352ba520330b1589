/**
 * Waits that all last the same time (a forwarder's answer timeout), on one
 * timer: since each starts with the same length, they end in the order they
 * started, so the list is a queue and the timer is armed for its head.
 *
 * @module
 */

import type { Clock, Timer } from "../time/clock.ts";

/** One wait in a {@linkcode DeadlineQueue}. */
export interface Deadline {
  /** The clock's monotonic time at which it times out. */
  readonly due: number;
}

interface Entry extends Deadline {
  timeout(): void;
  prev: Entry | undefined;
  next: Entry | undefined;
  queued: boolean;
}

/**
 * Deadlines of one length, earliest first, on one timer.
 *
 * @example
 * ```ts
 * import { DeadlineQueue } from "./deadlines.ts";
 * import { systemClock } from "../time/clock.ts";
 * const waits = new DeadlineQueue(systemClock, 30_000, () => false);
 * const wait = waits.add(() => console.log("timed out"));
 * waits.remove(wait); // answered in time
 * ```
 */
export class DeadlineQueue {
  readonly #clock: Clock;
  readonly #lengthMs: number;
  readonly #keepArmed: () => boolean;
  #first: Entry | undefined;
  #last: Entry | undefined;
  #timer: Timer | undefined;

  /**
   * `keepArmed` says whether a timer with nothing queued may stay armed
   * (it then wakes once for nothing, instead of being cancelled and armed
   * again at the next wait: one timer per length with steady traffic).
   */
  constructor(clock: Clock, lengthMs: number, keepArmed: () => boolean) {
    this.#clock = clock;
    this.#lengthMs = lengthMs;
    this.#keepArmed = keepArmed;
  }

  /** Starts a wait that calls `timeout` when it ends first. */
  add(timeout: () => void): Deadline {
    const entry: Entry = {
      due: this.#clock.monotonic() + this.#lengthMs,
      timeout,
      prev: this.#last,
      next: undefined,
      queued: true,
    };
    if (this.#last) this.#last.next = entry;
    else this.#first = entry;
    this.#last = entry;
    this.#arm();
    return entry;
  }

  /** Ends a wait without its timeout (again: nothing). */
  remove(deadline: Deadline): void {
    const entry = deadline as Entry;
    if (!entry.queued) return;
    entry.queued = false;
    if (entry.prev) entry.prev.next = entry.next;
    else this.#first = entry.next;
    if (entry.next) entry.next.prev = entry.prev;
    else this.#last = entry.prev;
    entry.prev = entry.next = undefined;
    if (!this.#first) this.stopIfIdle();
  }

  /** Cancels the timer when nothing waits and `keepArmed` says no. */
  stopIfIdle(): void {
    if (this.#first || !this.#timer || this.#keepArmed()) return;
    this.#timer.cancel();
    this.#timer = undefined;
  }

  /**
   * Arms the timer for the first wait, unless it is armed: then for an
   * earlier or the same one, as waits are added in the order they end. One
   * ended meanwhile leaves it armed; it then finds nothing due and arms
   * itself for the next.
   */
  #arm(): void {
    if (this.#timer || !this.#first) return;
    const wait = this.#first.due - this.#clock.monotonic();
    this.#timer = this.#clock.setTimer(Math.max(0, Math.ceil(wait)), this.#expire);
  }

  readonly #expire = (): void => {
    this.#timer = undefined;
    const now = this.#clock.monotonic();
    while (this.#first && this.#first.due <= now) {
      const due = this.#first;
      this.remove(due);
      due.timeout();
    }
    this.#arm();
  };
}
