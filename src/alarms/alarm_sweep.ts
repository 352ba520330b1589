/**
 * The alarms' overdue sweep (issue 19, the spec's "Every node reads the
 * overdue part of that list every 10 s and fires alarms overdue by more than
 * a lease period plus grace"): every {@linkcode ALARM_SWEEP_MS}, each of the
 * node's tenants' index is listed from its start up to now less the grace,
 * in pages, and each entry found is armed on this node's timer, which fires
 * it as a request would reach the actor: taken here if its owner is gone,
 * left to its holder if that one is live. An entry still overdue by that
 * much means the owner did not fire it (it died, or stopped): so an alarm
 * whose node died fires within the ttl plus grace plus one sweep.
 *
 * In a cluster the sweep is a lease duty: it runs only while the node's
 * lease is valid. A standalone node has no other node to wait for: its
 * sweep has no grace and looks one period ahead, so that after a restart
 * its actors' alarms fire on time.
 *
 * @module
 */

import type { Clock } from "../time/clock.ts";
import type { Logger } from "../log.ts";
import { ALARM_SWEEP_MS } from "../limits.ts";
import type { AlarmIndex } from "./alarm_index.ts";
import type { AlarmTimers } from "./alarm_timers.ts";

/** What {@linkcode AlarmSweep} needs. */
export interface AlarmSweepOptions {
  index: AlarmIndex;
  timers: AlarmTimers;
  clock: Clock;
  log: Logger;
  /** The tenants whose alarms this node fires. */
  tenants: () => readonly string[];
  /**
   * How far past due an entry must be before this node fires it: the
   * lease period plus grace in a cluster; negative to look ahead (a
   * standalone node: minus one sweep period).
   */
  graceMs: number;
  /** Between runs; default {@linkcode ALARM_SWEEP_MS}. */
  everyMs?: number;
  /** Told after each run: entries read, and whether the listing failed. */
  onRun?: (entries: number, failed: boolean) => void;
}

/**
 * The sweep, run as a lease duty or on its own.
 *
 * @example
 * ```ts
 * import { AlarmSweep } from "./alarm_sweep.ts";
 * import type { AlarmIndex } from "./alarm_index.ts";
 * import type { AlarmTimers } from "./alarm_timers.ts";
 * import { systemClock as clock } from "../time/clock.ts";
 * import { createLogger } from "../log.ts";
 * declare const index: AlarmIndex;
 * declare const timers: AlarmTimers;
 * // A cluster node's lease duties (cluster/duties/scheduler.ts) run it.
 * declare const duties: { add(duty: ReturnType<AlarmSweep["duty"]>): void };
 * const log = createLogger();
 * const sweep = new AlarmSweep({ index, timers, clock, log, tenants: () => ["default"], graceMs: 15_000 });
 * duties.add(sweep.duty());
 * ```
 */
export class AlarmSweep {
  readonly #o: AlarmSweepOptions;

  constructor(options: AlarmSweepOptions) {
    this.#o = options;
  }

  /** One run: arms every entry overdue by more than the grace; how many it read. */
  async runOnce(signal?: AbortSignal): Promise<number> {
    const until = this.#o.clock.now() - this.#o.graceMs;
    let entries = 0;
    let failed = false;
    for (const tenant of this.#o.tenants()) {
      try {
        for await (const entry of this.#o.index.overdue(tenant, until, { signal })) {
          if (signal?.aborted) break;
          entries++;
          this.#o.timers.arm(entry.actor, entry.dueMs, "sweep");
        }
      } catch (error) {
        if (signal?.aborted) break;
        failed = true;
        this.#o.log.warn("could not list the overdue alarms; the next sweep tries again", {
          tenant,
          error: String((error as Error)?.message ?? error),
        });
      }
    }
    this.#o.onRun?.(entries, failed);
    return entries;
  }

  /** Runs every period until `signal` aborts. */
  async run(signal: AbortSignal): Promise<void> {
    const every = this.#o.everyMs ?? ALARM_SWEEP_MS;
    while (!signal.aborted) {
      await this.runOnce(signal);
      await this.#o.clock.sleep(every, signal).catch(() => {});
    }
  }

  /**
   * The sweep as a lease duty: it runs only while the node's lease is valid.
   * Its shape is the cluster's `LeaseDuty` (src/cluster/duties/scheduler.ts),
   * named here by its members, since cluster/ sits above alarms/.
   */
  duty(): { readonly name: string; run(signal: AbortSignal): Promise<void> } {
    return { name: "alarm sweep", run: (signal) => this.run(signal) };
  }
}
