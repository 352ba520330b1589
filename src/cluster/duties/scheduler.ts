/**
 * Duties of a node that run only while its lease is valid: work that acts
 * for the cluster on what this node sees (fencing peers, the alarms'
 * overdue sweep; next, drain hand-over and move requests), which a node whose
 * lease lapsed must stop at once, since another node may by then act on the
 * same things. One scheduler starts every duty when the lease becomes
 * valid and aborts it when the lease lapses (or the node stops), on the
 * same clock as the rest of the node.
 *
 * @module
 */

import type { Clock } from "../../time/clock.ts";
import type { Logger } from "../../log.ts";
import type { LeaseListener } from "../node_lease.ts";

/** A duty: what runs while the lease is valid. */
export interface LeaseDuty {
  /** For the log. */
  readonly name: string;
  /**
   * Runs from when the lease became valid until `signal` aborts (the lease
   * lapsed, or the node stops); it must stop acting at once then. A duty
   * that ends or fails by itself meanwhile is started again after
   * {@linkcode DUTY_RESTART_MS}.
   */
  run(signal: AbortSignal): Promise<void>;
}

/** What the scheduler follows: a lease's validity and its changes. */
export interface FollowedLease {
  valid(): boolean;
  subscribe(listener: LeaseListener): () => void;
}

/**
 * How long a duty that ended by itself while the lease is valid waits
 * before it is started again.
 *
 * @example
 * ```ts
 * import { DUTY_RESTART_MS } from "./scheduler.ts";
 * console.log(DUTY_RESTART_MS); // 1000
 * ```
 */
export const DUTY_RESTART_MS = 1000;

/**
 * Starts and stops a node's duties with its lease.
 *
 * @example
 * ```ts
 * import { type LeaseDuty, LeaseDuties } from "./scheduler.ts";
 * import { systemClock as clock } from "../../time/clock.ts";
 * import { createLogger } from "../../log.ts";
 * declare const fence: LeaseDuty; // fencePeers(plane.membership), in ./fence_peers.ts
 * declare const lease: Parameters<LeaseDuties["follow"]>[0];
 * const duties = new LeaseDuties({ clock, log: createLogger() });
 * duties.add(fence);
 * duties.follow(lease);
 * await duties.stop();
 * ```
 */
export class LeaseDuties {
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #duties: LeaseDuty[] = [];
  /** The duties running now, with what stops them; empty while the lease is not valid. */
  readonly #running = new Map<LeaseDuty, { stop: AbortController; done: Promise<void> }>();
  #unsubscribe: (() => void) | undefined;
  #stopped = false;

  constructor(options: { clock: Clock; log: Logger }) {
    this.#clock = options.clock;
    this.#log = options.log;
  }

  /** Adds a duty; it runs whenever the followed lease is valid. */
  add(duty: LeaseDuty): void {
    this.#duties.push(duty);
  }

  /** Follows `lease`: its duties start now if it is valid, and with each change from now on. */
  follow(lease: FollowedLease): void {
    this.#unsubscribe?.();
    this.#unsubscribe = lease.subscribe({
      changed: (valid) => valid ? this.#startAll() : this.#stopAll(),
    });
    if (lease.valid()) this.#startAll();
  }

  /** The names of the duties running now. */
  running(): string[] {
    return [...this.#running.keys()].map((duty) => duty.name);
  }

  #startAll(): void {
    if (this.#stopped) return;
    for (const duty of this.#duties) if (!this.#running.has(duty)) this.#start(duty);
  }

  #start(duty: LeaseDuty): void {
    const stop = new AbortController();
    const done = duty.run(stop.signal).then(
      () => {
        if (!stop.signal.aborted) {
          this.#log.warn("a lease duty ended by itself", { duty: duty.name });
        }
      },
      (error) => {
        if (stop.signal.aborted) return;
        this.#log.error("a lease duty failed", { duty: duty.name, error: String(error) });
      },
    ).finally(() => {
      if (this.#running.get(duty)?.stop !== stop || stop.signal.aborted) return;
      this.#running.delete(duty);
      // Still valid: it goes on after a pause, so a duty that fails at once does not spin.
      this.#clock.sleep(DUTY_RESTART_MS, stop.signal).then(() => {
        if (!this.#stopped && !this.#running.has(duty)) this.#start(duty);
      }, () => {});
    });
    this.#running.set(duty, { stop, done });
  }

  #stopAll(): void {
    for (const { stop } of this.#running.values()) {
      stop.abort(new Error("the node lease is not valid"));
    }
    this.#running.clear();
  }

  /** Stops every duty for good and waits for them to end. */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#unsubscribe?.();
    const done = [...this.#running.values()].map((running) => running.done);
    this.#stopAll();
    await Promise.all(done);
  }
}
