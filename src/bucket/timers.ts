/**
 * Deadlines on the {@linkcode Clock}, as abort signals: the one way bucket
 * code bounds a wait, so a simulated clock bounds it too.
 *
 * @module
 */

import type { Clock } from "../time/clock.ts";

/** Why a deadline fired: distinguishable from the caller's own abort. */
export class DeadlineExceeded extends Error {
  override name = "DeadlineExceeded";
}

/** A signal that aborts at a deadline or with its parent, and a way to stop its timer. */
export interface Deadline {
  /** Aborts with a {@linkcode DeadlineExceeded} at the deadline, or with the parent's reason. */
  signal: AbortSignal;
  /** Restarts the countdown from now (for silence timers). */
  extend(): void;
  /** Stops the timer; call it once the guarded work ended. */
  done(): void;
}

/**
 * A deadline `ms` from now on `clock`, also aborted when `parent` is.
 *
 * @example Bounding a sleep by two seconds
 * ```ts
 * import { deadline } from "./timers.ts";
 * import { systemClock } from "../time/clock.ts";
 * const d = deadline(systemClock, 2000, "waiting");
 * try {
 *   await systemClock.sleep(10, d.signal);
 * } finally {
 *   d.done();
 * }
 * ```
 */
export function deadline(
  clock: Clock,
  ms: number,
  what: string,
  parent?: AbortSignal,
): Deadline {
  const controller = new AbortController();
  const onParentAbort = () => controller.abort(parent?.reason);
  if (parent?.aborted) controller.abort(parent.reason);
  else parent?.addEventListener("abort", onParentAbort, { once: true });
  const arm = () =>
    clock.setTimer(
      ms,
      () => controller.abort(new DeadlineExceeded(`${what}: no answer in ${ms} ms`)),
    );
  let timer = controller.signal.aborted ? undefined : arm();
  return {
    signal: controller.signal,
    extend() {
      if (controller.signal.aborted) return;
      timer?.cancel();
      timer = arm();
    },
    done() {
      timer?.cancel();
      parent?.removeEventListener("abort", onParentAbort);
    },
  };
}

/**
 * Rejects with the signal's reason when it aborts, so a promise that cannot
 * be cancelled can still be abandoned.
 *
 * @example
 * ```ts
 * import { raceSignal } from "./timers.ts";
 * const value = await raceSignal(Promise.resolve(1), AbortSignal.timeout(1000));
 * ```
 */
export function raceSignal<T>(promise: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return promise;
  if (signal.aborted) return Promise.reject(signal.reason);
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(resolve, reject).finally(() => signal.removeEventListener("abort", onAbort));
  });
}
