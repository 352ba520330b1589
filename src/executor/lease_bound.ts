/**
 * What bounds an executor's events by the node's lease: each event belongs
 * to the lease it was sent under. A `discard-all` (the lease ran out) ends
 * an epoch, and an event received before it never runs; within an epoch an
 * event runs only before the lease's end on the wall clock (as the event
 * carried it, or later as a `lease` message renewed it). A node frozen with
 * its executors may resume them before it sends `discard-all`: the wall
 * clock ends their events meanwhile.
 *
 * @module
 */

import type { Clock } from "../time/clock.ts";

/** Why an event may not go on: its lease ended (`expired`), or its epoch was discarded. */
export type LeaseVerdict = "valid" | "expired" | "discarded";

/**
 * The lease bounds of the events under way.
 *
 * @example
 * ```ts
 * import { LeaseBound } from "./lease_bound.ts";
 * import { systemClock } from "../time/clock.ts";
 * const bound = new LeaseBound(systemClock);
 * bound.received(1, Date.now() + 10_000);
 * bound.discardAll();
 * console.log(bound.check(1)); // "discarded"
 * ```
 */
export class LeaseBound {
  readonly #clock: Clock;
  /** Counts `discard-all`s. */
  #epoch = 0;
  /** What bounds each event under way: the epoch it came in and its lease's end. */
  readonly #events = new Map<number, { epoch: number; until: number }>();
  /**
   * The lease's end as the node's last `lease` message in this epoch gave it
   * (0 before one): the lease an event of this epoch was sent under, renewed.
   */
  #renewedUntil = 0;

  constructor(clock: Clock) {
    this.#clock = clock;
  }

  /** Event `seq` came, sent under a lease ending at `until` (wall-clock ms; 0 for none). */
  received(seq: number, until: number): void {
    this.#events.set(seq, { epoch: this.#epoch, until });
  }

  /** Whether event `seq` is under way (received and not ended). */
  has(seq: number): boolean {
    return this.#events.has(seq);
  }

  /** Event `seq` ended: it is bounded no more. */
  ended(seq: number): void {
    this.#events.delete(seq);
  }

  /** The lease ran out: every event received so far belongs to a lease that is over. */
  discardAll(): void {
    this.#epoch++;
    this.#renewedUntil = 0;
  }

  /** The lease, still valid, now ends at `until`: this epoch's events may run until then. */
  renew(until: number): void {
    this.#renewedUntil = Math.max(this.#renewedUntil, until);
  }

  /** Whether event `seq` may go on now (one not under way is not bounded here). */
  check(seq: number): LeaseVerdict {
    const event = this.#events.get(seq);
    if (!event) return "valid";
    if (event.epoch !== this.#epoch) return "discarded";
    const until = event.until === 0 ? 0 : Math.max(event.until, this.#renewedUntil);
    return until === 0 || this.#clock.now() < until ? "valid" : "expired";
  }
}
