/**
 * Time as the cluster code sees it. Cluster code never calls `Date.now()`,
 * `performance.now()` or `setTimeout` directly, so `sim/` can run it under a
 * simulated clock.
 *
 * @module
 */

/** A cancellable timer handle returned by {@linkcode Clock.setTimer}. */
export interface Timer {
  /** Stops the timer; calling it after the timer fired does nothing. */
  cancel(): void;
}

/**
 * Wall time, monotonic time and timers.
 *
 * @example Waiting one second
 * ```ts
 * import { systemClock } from "./clock.ts";
 * await systemClock.sleep(1000);
 * ```
 */
export interface Clock {
  /** Milliseconds since the Unix epoch, as this node believes it. */
  now(): number;
  /** Milliseconds on a clock that never goes backwards (for durations). */
  monotonic(): number;
  /** Resolves after `ms` milliseconds; rejects with the signal's reason if aborted first. */
  sleep(ms: number, signal?: AbortSignal): Promise<void>;
  /** Calls `callback` once after `ms` milliseconds. */
  setTimer(ms: number, callback: () => void): Timer;
}

/** The real clock of the machine. */
export const systemClock: Clock = {
  now: () => Date.now(),
  monotonic: () => performance.now(),
  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const onAbort = () => {
        clearTimeout(handle);
        reject(signal?.reason);
      };
      const handle = setTimeout(() => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      }, ms);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  },
  setTimer(ms: number, callback: () => void): Timer {
    const handle = setTimeout(callback, ms);
    return { cancel: () => clearTimeout(handle) };
  },
};

/** A source of randomness, seeded in the simulator. */
export interface Random {
  /** A float in [0, 1). */
  next(): number;
  /** Fills `bytes` with random bytes. */
  fill(bytes: Uint8Array): Uint8Array;
}

/** The machine's cryptographic random source. */
export const systemRandom: Random = {
  next: () => crypto.getRandomValues(new Uint32Array(1))[0] / 2 ** 32,
  fill: (bytes) => crypto.getRandomValues(bytes),
};
