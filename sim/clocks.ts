/**
 * Clocks on the virtual time line: the bucket's (true time), and each
 * machine's, with an offset from true time kept within half the tolerated
 * skew (so any two machines differ by at most the skew) and a drift; when the
 * drift carries the offset out of its band, the wall clock is stepped back
 * into it (as NTP does), possibly backwards. The monotonic clock drifts the
 * same way and never steps.
 *
 * A process's {@linkcode Clock} times its timers on its machine's monotonic
 * clock; its events belong to the process, so they stop with a crash and wait
 * through a pause.
 *
 * @module
 */

import type { Clock, Random, Timer } from "../src/time/clock.ts";
import type { Owner, Scheduler } from "./scheduler.ts";

/** How a machine's clock differs from true time. */
export interface MachineClockOptions {
  /** Offset of the wall clock at the start, ms (within ±skew/2). */
  offsetMs: number;
  /** Rate error, parts per million (positive: runs fast). */
  driftPpm: number;
  /** The tolerated skew between machines: offsets stay within ±skew/2. */
  skewMs: number;
  /** Source of the offsets the wall clock is stepped to. */
  random: Random;
}

/** The wall and monotonic clocks of one simulated machine (outlive its processes). */
export class MachineClock {
  readonly driftPpm: number;
  readonly #scheduler: Scheduler;
  readonly #start: number;
  readonly #bound: number;
  readonly #random: Random;
  /** Current segment: offset `#offset` at true time `#since`, drifting at `#rate - 1`. */
  #offset: number;
  #since: number;
  readonly #rate: number;
  readonly #monoBase: number;
  /** Wall-clock steps so far. */
  steps = 0;

  constructor(scheduler: Scheduler, options: MachineClockOptions) {
    this.#scheduler = scheduler;
    this.#start = scheduler.now;
    this.#since = scheduler.now;
    this.#bound = options.skewMs / 2;
    this.#offset = clamp(options.offsetMs, -this.#bound, this.#bound);
    this.driftPpm = options.driftPpm;
    this.#rate = 1 + options.driftPpm / 1e6;
    this.#random = options.random;
    // Monotonic time since an arbitrary boot, far from the wall clock's values.
    this.#monoBase = 1_000_000 + Math.floor(options.random.next() * 1_000_000);
  }

  /** The rate of this machine's clocks against true time. */
  get rate(): number {
    return this.#rate;
  }

  /** Wall time now, whole ms since the epoch (as `Date.now()`), as this machine believes it. */
  wall(): number {
    const t = this.#scheduler.now;
    let offset = this.#offset + (t - this.#since) * (this.#rate - 1);
    if (Math.abs(offset) > this.#bound) {
      // Stepped when it left the band: a fresh offset within it.
      this.steps++;
      offset = (this.#random.next() * 2 - 1) * this.#bound;
      this.#offset = offset;
      this.#since = t;
    }
    return Math.floor(t + offset);
  }

  /** The wall clock's offset from true time now. */
  offset(): number {
    return this.wall() - this.#scheduler.now;
  }

  /** Monotonic ms, drifting with the machine, never stepped. */
  monotonic(): number {
    return this.monotonicAt(this.#scheduler.now);
  }

  /** The monotonic clock at true time `t`. */
  monotonicAt(t: number): number {
    return this.#monoBase + (t - this.#start) * this.#rate;
  }

  /**
   * The true time at which this machine's monotonic clock will have moved
   * `ms` on from now: never earlier, whatever the rounding (a timer that
   * fired a hair early would find time left and set itself again, forever).
   */
  dueAfter(ms: number): number {
    const now = this.#scheduler.now;
    const target = this.monotonicAt(now) + ms;
    let due = now + ms / this.#rate;
    for (let step = 1e-3; this.monotonicAt(due) < target; step *= 2) due += step;
    return due;
  }
}

/** The {@linkcode Clock} of one process on a machine: its timers are its events. */
export class ProcessClock implements Clock {
  readonly #scheduler: Scheduler;
  readonly #machine: MachineClock;
  readonly #owner: Owner;

  constructor(scheduler: Scheduler, machine: MachineClock, owner: Owner) {
    this.#scheduler = scheduler;
    this.#machine = machine;
    this.#owner = owner;
  }

  now(): number {
    return this.#machine.wall();
  }

  monotonic(): number {
    return this.#machine.monotonic();
  }

  setTimer(ms: number, callback: () => void): Timer {
    if (!Number.isFinite(ms)) return { cancel() {} };
    const event = this.#scheduler.at(
      this.#machine.dueAfter(Math.max(0, ms)),
      callback,
      this.#owner,
    );
    return { cancel: () => this.#scheduler.cancel(event) };
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return sleepOn(this, ms, signal);
  }
}

/** True time: the bucket's clock (stamps `lastModified`, times its latencies and outages). */
export class TrueClock implements Clock {
  readonly #scheduler: Scheduler;
  readonly #start: number;

  constructor(scheduler: Scheduler) {
    this.#scheduler = scheduler;
    this.#start = scheduler.now;
  }

  now(): number {
    return this.#scheduler.now;
  }

  monotonic(): number {
    return this.#scheduler.now - this.#start;
  }

  setTimer(ms: number, callback: () => void): Timer {
    if (!Number.isFinite(ms)) return { cancel() {} };
    const event = this.#scheduler.after(ms, callback);
    return { cancel: () => this.#scheduler.cancel(event) };
  }

  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return sleepOn(this, ms, signal);
  }
}

function sleepOn(clock: Clock, ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const onAbort = () => {
      timer.cancel();
      reject(signal?.reason);
    };
    const timer = clock.setTimer(ms, () => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    });
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

function clamp(x: number, lo: number, hi: number): number {
  return Math.min(hi, Math.max(lo, x));
}
