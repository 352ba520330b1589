/**
 * A clock that moves only when a test says so, to check bounds of seconds in
 * milliseconds of real time.
 *
 * @module
 */

import type { Clock, Timer } from "../../src/time/clock.ts";

interface Pending {
  due: number;
  seq: number;
  fire: () => void;
}

/**
 * A {@linkcode Clock} driven by {@linkcode FakeClock.advance}.
 *
 * @example
 * ```ts
 * import { FakeClock } from "./fake_clock.ts";
 * const clock = new FakeClock();
 * const slept = clock.sleep(1000);
 * await clock.advance(1000);
 * await slept;
 * ```
 */
export class FakeClock implements Clock {
  #now: number;
  #seq = 0;
  #timers: Pending[] = [];

  /** A clock at `start` ms since the epoch. */
  constructor(start = 1_700_000_000_000) {
    this.#now = start;
  }

  /** The current fake time. */
  now(): number {
    return this.#now;
  }

  /** The same as `now`: fake time never goes backwards. */
  monotonic(): number {
    return this.#now;
  }

  /** Resolves once the clock advanced by `ms`. */
  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const onAbort = () => {
        timer.cancel();
        reject(signal?.reason);
      };
      const timer = this.setTimer(ms, () => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      });
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }

  /** Calls `callback` once the clock advanced by `ms`. */
  setTimer(ms: number, callback: () => void): Timer {
    const pending = { due: this.#now + Math.max(0, ms), seq: this.#seq++, fire: callback };
    this.#timers.push(pending);
    return { cancel: () => void (this.#timers = this.#timers.filter((t) => t !== pending)) };
  }

  /** Moves time forward by `ms`, firing due timers in order and letting their work run. */
  async advance(ms: number): Promise<void> {
    const target = this.#now + ms;
    await settle();
    while (true) {
      const next = this.#timers
        .filter((t) => t.due <= target)
        .sort((a, b) => a.due - b.due || a.seq - b.seq)[0];
      if (!next) break;
      this.#timers = this.#timers.filter((t) => t !== next);
      this.#now = next.due;
      next.fire();
      await settle();
    }
    this.#now = target;
    await settle();
  }

  /** Advances in `stepMs` steps until `promise` settles; resolves to when it did. */
  async runUntilSettled(
    promise: Promise<unknown>,
    stepMs = 10,
    limitMs = 600_000,
  ): Promise<number> {
    let settled = false;
    promise.then(() => settled = true, () => settled = true);
    const start = this.#now;
    await settle();
    while (!settled) {
      if (this.#now - start > limitMs) throw new Error(`still pending after ${limitMs} ms`);
      await this.advance(stepMs);
    }
    return this.#now - start;
  }
}

/** Lets every promise chain that is ready run, including ones waiting on real I/O-free work. */
function settle(): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, 0));
}
