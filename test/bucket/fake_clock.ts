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

  /** Time passing inside synchronous work (a slow disk): timers now overdue fire at the next advance. */
  jump(ms: number): void {
    this.#now += ms;
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
      const next = this.#next();
      if (!next || next.due > target) break;
      this.#fire(next);
      await settle();
    }
    this.#now = target;
    await settle();
  }

  /**
   * Runs time from timer to timer until `promise` settles; resolves to the
   * time that took.
   */
  async runUntilSettled(promise: Promise<unknown>, limitMs = 3_600_000): Promise<number> {
    let settled = false;
    promise.then(() => settled = true, () => settled = true);
    const start = this.#now;
    for (let idle = 0; !settled;) {
      await settle();
      if (settled) break;
      const next = this.#next();
      if (next) {
        idle = 0;
        if (next.due - start > limitMs) throw new Error(`still pending after ${limitMs} ms`);
        this.#fire(next);
      } else if (++idle > 100) {
        throw new Error("pending with no timer to run: it waits on something else");
      } else {
        await new Promise((resolve) => setTimeout(resolve, 0));
      }
    }
    return this.#now - start;
  }

  #next(): Pending | undefined {
    return this.#timers.reduce<Pending | undefined>(
      (
        best,
        t,
      ) => (!best || t.due < best.due || (t.due === best.due && t.seq < best.seq) ? t : best),
      undefined,
    );
  }

  #fire(timer: Pending): void {
    this.#timers = this.#timers.filter((t) => t !== timer);
    this.#now = Math.max(this.#now, timer.due);
    timer.fire();
  }
}

/** Lets every promise chain that is ready run (bucket code under test does no real I/O). */
async function settle(): Promise<void> {
  for (let i = 0; i < 50; i++) await Promise.resolve();
}
