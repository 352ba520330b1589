/**
 * One virtual time line for a whole simulated cluster: a queue of events in
 * (time, sequence) order, fired one at a time, each followed by every promise
 * continuation it made ready, before the next event. Nothing here reads a real
 * clock: time moves only from one event to the next, so a run is a function of
 * its seed.
 *
 * Events may belong to an {@linkcode Owner} (a simulated process): a crashed
 * owner's events are dropped, a paused owner's are kept aside and fired, in
 * their order, when it resumes (late: its clock has moved on meanwhile).
 *
 * @module
 */

import { setImmediate } from "node:timers";

/** A simulated process, as far as its events are concerned. */
export interface Owner {
  /** Its events are dropped from now on (crashed or exited). */
  readonly dead: boolean;
  /** Its events wait in `deferred` until it resumes. */
  readonly paused: boolean;
  /** Events that came due while it was paused, in the order they came due. */
  readonly deferred: ScheduledEvent[];
}

/** An event in the queue. */
export interface ScheduledEvent {
  /** Virtual time it fires at (ms since the epoch of the run). */
  time: number;
  /** Tie-breaker: the order events were scheduled in. */
  seq: number;
  fire: () => void;
  owner: Owner | undefined;
  cancelled: boolean;
}

/**
 * Lets every promise continuation that is ready run: a macrotask runs only
 * once the microtask queue is empty. `setImmediate` is used for that alone
 * (no time is read from it); unlike `setTimeout(0)` it is not clamped.
 */
export function drainMicrotasks(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * The event queue and the virtual clock.
 *
 * @example
 * ```ts
 * import { Scheduler } from "./scheduler.ts";
 * const s = new Scheduler(0);
 * s.after(5, () => console.log("at", s.now));
 * await s.runUntil(10);
 * ```
 */
export class Scheduler {
  /** Virtual time now, ms since the epoch. */
  now: number;
  /** Events fired so far (cancelled ones not counted). */
  fired = 0;
  #heap: ScheduledEvent[] = [];
  #seq = 0;
  #stopped = false;

  /** A time line starting at `start`. */
  constructor(start: number) {
    this.now = start;
  }

  /** Schedules `fire` at virtual time `time` (not before now). */
  at(time: number, fire: () => void, owner?: Owner): ScheduledEvent {
    const event: ScheduledEvent = {
      time: Math.max(time, this.now),
      seq: this.#seq++,
      fire,
      owner,
      cancelled: false,
    };
    this.#push(event);
    return event;
  }

  /** Schedules `fire` `ms` from now. */
  after(ms: number, fire: () => void, owner?: Owner): ScheduledEvent {
    return this.at(this.now + Math.max(0, ms), fire, owner);
  }

  /** Cancels an event; nothing happens if it already fired. */
  cancel(event: ScheduledEvent): void {
    event.cancelled = true;
  }

  /** Fires the events a paused owner held back, now, in their order. */
  resume(owner: Owner & { deferred: ScheduledEvent[] }): void {
    const held = owner.deferred.splice(0);
    for (const event of held) {
      if (!event.cancelled) this.at(this.now, event.fire, owner);
    }
  }

  /** Ends `runUntil` after the event that is firing. */
  stop(): void {
    this.#stopped = true;
  }

  /** Whether `stop` was called. */
  get stopped(): boolean {
    return this.#stopped;
  }

  /**
   * Fires events up to `until` (inclusive), each followed by a drain of the
   * promise continuations it made ready and by `afterEach`; the clock is at
   * `until` at the end unless `stop` was called.
   */
  async runUntil(until: number, afterEach?: () => void): Promise<void> {
    while (!this.#stopped) {
      const next = this.#heap[0];
      if (!next || next.time > until) break;
      this.#pop();
      if (next.cancelled) continue;
      this.now = next.time;
      const owner = next.owner;
      if (owner?.dead) continue;
      if (owner?.paused) {
        owner.deferred.push(next);
        continue;
      }
      this.fired++;
      next.fire();
      await drainMicrotasks();
      afterEach?.();
    }
    if (!this.#stopped) this.now = Math.max(this.now, until);
  }

  #push(event: ScheduledEvent): void {
    const heap = this.#heap;
    heap.push(event);
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!before(heap[i], heap[parent])) break;
      [heap[i], heap[parent]] = [heap[parent], heap[i]];
      i = parent;
    }
  }

  #pop(): void {
    const heap = this.#heap;
    const last = heap.pop()!;
    if (heap.length === 0) return;
    heap[0] = last;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1, r = l + 1;
      let m = i;
      if (l < heap.length && before(heap[l], heap[m])) m = l;
      if (r < heap.length && before(heap[r], heap[m])) m = r;
      if (m === i) break;
      [heap[i], heap[m]] = [heap[m], heap[i]];
      i = m;
    }
  }
}

function before(a: ScheduledEvent, b: ScheduledEvent): boolean {
  return a.time < b.time || (a.time === b.time && a.seq < b.seq);
}
