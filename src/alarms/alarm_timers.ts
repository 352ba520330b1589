/**
 * The node's own timer for alarms (issue 19): the alarms of the actors this
 * node holds or last held, each fired at its due time, and every alarm a
 * sweep found overdue or another node handed over. Firing routes an
 * alarm's event as a request would be (`fire`): run here, taking the actor
 * if it is free, or left to the node that holds it (that node read the
 * alarm when it took the actor, and armed it).
 *
 * An `on-alarm` that fails (an error, a trap, an event that could not run)
 * is retried with exponential backoff, from {@linkcode ALARM_FIRST_RETRY_MS}
 * up to the ceiling (`--alarm-retry-max-secs`). At most
 * {@linkcode MAX_ALARMS_FIRING} alarms fire at once, earliest first, so a
 * burst due in the same second does not take every actor in at once; at
 * most {@linkcode MAX_ARMED_ALARMS} are armed (the latest are forgotten
 * past it, and fire by a sweep).
 *
 * @module
 */

import type { Clock, Timer } from "../time/clock.ts";
import type { Logger } from "../log.ts";
import { type ActorKey, actorKeyString } from "../actors/key.ts";
import {
  ALARM_FIRST_RETRY_MS,
  ALARM_RETRY_MAX_MS,
  MAX_ALARMS_FIRING,
  MAX_ARMED_ALARMS,
} from "../limits.ts";

/**
 * How a firing ended: `fired` (on-alarm ran and succeeded), `not-due` (the
 * actor's alarm is later or gone: its event told the new time), `elsewhere`
 * (another node holds the actor and fires it), `failed` (on-alarm failed or
 * could not run: retried), `later` (this node cannot route it now, its lease
 * not valid or the bucket out: tried again after the backoff, not counted
 * as a retry).
 */
export type FireResult = "fired" | "not-due" | "elsewhere" | "failed" | "later";

/** Where an alarm came from, for its firing's metric. */
export type AlarmSource = "owner" | "sweep";

/** What {@linkcode AlarmTimers} needs. */
export interface AlarmTimersOptions {
  clock: Clock;
  log: Logger;
  /** Routes the alarm's event of `key` for the entry due at `due`. Never rejects. */
  fire(key: ActorKey, due: number): Promise<FireResult>;
  /** The ceiling of the retry backoff, ms; default {@linkcode ALARM_RETRY_MAX_MS}. */
  retryMaxMs?: number;
  maxFiring?: number;
  maxArmed?: number;
  /** Told of each firing that ran on-alarm, and of each retry. */
  onFired?: (source: AlarmSource) => void;
  onRetry?: () => void;
}

/** The least wait before an alarm that came too early is fired again. */
const EARLY_REFIRE_MS = 100;

interface Armed {
  key: ActorKey;
  id: string;
  /** The alarm's due time. */
  due: number;
  /** When it fires next: its due time, or a retry's. */
  at: number;
  /** Failed firings of this due time. */
  failures: number;
  source: AlarmSource;
  firing: boolean;
}

/**
 * Armed alarms, fired on one timer.
 *
 * @example
 * ```ts ignore
 * const timers = new AlarmTimers({ clock, log, fire: (key, due) => routing.routeAlarm(key, due) });
 * timers.seen(key, Date.now() + 1_000); // an event ended with this alarm
 * ```
 */
export class AlarmTimers {
  readonly #o: AlarmTimersOptions;
  readonly #retryMaxMs: number;
  readonly #maxFiring: number;
  readonly #maxArmed: number;
  readonly #armed = new Map<string, Armed>();
  /** Armed alarms whose time came, waiting for a place among those firing. */
  #ready: Armed[] = [];
  #firing = 0;
  #timer: Timer | undefined;
  #timerAt = Infinity;
  #stopped = false;
  #warnedFull = false;

  constructor(options: AlarmTimersOptions) {
    this.#o = options;
    this.#retryMaxMs = options.retryMaxMs ?? ALARM_RETRY_MAX_MS;
    this.#maxFiring = options.maxFiring ?? MAX_ALARMS_FIRING;
    this.#maxArmed = options.maxArmed ?? MAX_ARMED_ALARMS;
  }

  /** Alarms armed here. */
  get size(): number {
    return this.#armed.size;
  }

  /** Alarms armed here whose due time passed (firing, retried or waiting for a place). */
  overdue(): number {
    const now = this.#o.clock.now();
    let count = 0;
    for (const armed of this.#armed.values()) if (armed.due <= now) count++;
    return count;
  }

  /** The alarms armed here, for a clean stop's hand-over. */
  list(): { key: ActorKey; due: number }[] {
    return [...this.#armed.values()].map(({ key, due }) => ({ key, due }));
  }

  /**
   * An event of `key` ended with its alarm at `due` (null: none): armed at
   * that time, or disarmed. The same due time keeps its retry count.
   */
  seen(key: ActorKey, due: number | null): void {
    const id = actorKeyString(key);
    const armed = this.#armed.get(id);
    if (due === null) {
      if (armed) this.#armed.delete(id);
      return;
    }
    if (armed && armed.due === due) return;
    this.#arm(key, id, due, "owner");
  }

  /**
   * Arms an alarm this node does not hold (found overdue by a sweep, or
   * handed over): fired at `due`, unless one is armed for the actor already.
   */
  arm(key: ActorKey, due: number, source: AlarmSource): void {
    const id = actorKeyString(key);
    if (this.#armed.has(id)) return;
    this.#arm(key, id, due, source);
  }

  /** Another node holds `key` now (it arms its alarm there). */
  forget(key: ActorKey): void {
    this.#armed.delete(actorKeyString(key));
  }

  /** Stops firing (the node stops); what is armed stays listed for {@linkcode list}. */
  stop(): void {
    this.#stopped = true;
    this.#timer?.cancel();
    this.#timer = undefined;
  }

  #arm(key: ActorKey, id: string, due: number, source: AlarmSource): void {
    if (!this.#armed.has(id) && this.#armed.size >= this.#maxArmed && !this.#evictLaterThan(due)) {
      return;
    }
    const armed: Armed = { key, id, due, at: due, failures: 0, source, firing: false };
    this.#armed.set(id, armed);
    this.#schedule(due);
  }

  /** Makes room for an alarm due at `due` by forgetting the latest one, if later. */
  #evictLaterThan(due: number): boolean {
    let latest: Armed | undefined;
    for (const armed of this.#armed.values()) {
      if (!armed.firing && (!latest || armed.due > latest.due)) latest = armed;
    }
    if (!latest || latest.due <= due) {
      if (!this.#warnedFull) {
        this.#warnedFull = true;
        this.#o.log.warn("too many alarms armed on this node; later ones fire by a sweep", {
          max: this.#maxArmed,
        });
      }
      return false;
    }
    this.#armed.delete(latest.id);
    return true;
  }

  #schedule(at: number): void {
    if (this.#stopped || at >= this.#timerAt) return;
    this.#timer?.cancel();
    this.#timerAt = at;
    this.#timer = this.#o.clock.setTimer(Math.max(0, at - this.#o.clock.now()), () => {
      this.#timer = undefined;
      this.#timerAt = Infinity;
      this.#tick();
    });
  }

  /** Moves the alarms whose time came to the ready queue, fires what fits, and sets the next timer. */
  #tick(): void {
    if (this.#stopped) return;
    const now = this.#o.clock.now();
    let next = Infinity;
    const queued = new Set(this.#ready);
    for (const armed of this.#armed.values()) {
      if (armed.firing || queued.has(armed)) continue;
      if (armed.at <= now) this.#ready.push(armed);
      else if (armed.at < next) next = armed.at;
    }
    this.#ready.sort((a, b) => a.at - b.at);
    this.#pump();
    if (next < Infinity) this.#schedule(next);
  }

  #pump(): void {
    while (!this.#stopped && this.#firing < this.#maxFiring && this.#ready.length > 0) {
      const armed = this.#ready.shift()!;
      // Disarmed or replaced while it waited.
      if (this.#armed.get(armed.id) !== armed) continue;
      this.#fire(armed);
    }
  }

  #fire(armed: Armed): void {
    this.#firing++;
    armed.firing = true;
    this.#o.fire(armed.key, armed.due).then(
      (result) => this.#fired(armed, result),
      (error) => {
        this.#o.log.error("an alarm's firing failed", { error: String(error) });
        this.#fired(armed, "failed");
      },
    );
  }

  #fired(armed: Armed, result: FireResult): void {
    this.#firing--;
    armed.firing = false;
    const current = this.#armed.get(armed.id) === armed;
    if (result === "fired") this.#o.onFired?.(armed.source);
    if (current) {
      switch (result) {
        case "fired":
        case "elsewhere":
          // Fired, or fired there. (A fired event's end told the actor's
          // next alarm first, which replaced this entry.)
          this.#armed.delete(armed.id);
          break;
        case "not-due":
          // Still this entry: the actor's alarm is this one, not due yet by
          // the executor's reading of the clock. Tried again at its time.
          armed.at = Math.max(armed.due, this.#o.clock.now() + EARLY_REFIRE_MS);
          this.#schedule(armed.at);
          break;
        case "failed":
        case "later": {
          if (result === "failed") {
            armed.failures++;
            this.#o.onRetry?.();
          }
          const attempt = Math.max(1, armed.failures);
          const backoff = Math.min(ALARM_FIRST_RETRY_MS * 2 ** (attempt - 1), this.#retryMaxMs);
          armed.at = this.#o.clock.now() + backoff;
          this.#schedule(armed.at);
          break;
        }
      }
    }
    this.#pump();
  }
}
