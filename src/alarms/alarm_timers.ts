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
  /**
   * Readies what the alarm's event runs on (its executor) as the alarm is
   * armed, so the firing does not wait for it to start.
   */
  warm?: (key: ActorKey) => void;
  /** Told of each alarm given to the timer, as it is given (the simulator's alarm checks). */
  observer?: AlarmTimerObserver;
}

/**
 * What the node's timer of alarms is given, for whoever watches it (the
 * simulator). Called synchronously, as it happens.
 *
 * @example
 * ```ts
 * import type { AlarmTimerObserver } from "./alarm_timers.ts";
 * const observer: AlarmTimerObserver = {
 *   arming: (key, due, source) => console.log(key.name, due, source),
 * };
 * ```
 */
export interface AlarmTimerObserver {
  /** `arm` was called (an alarm already armed stays as it is). */
  arming?(key: ActorKey, due: number, source: AlarmSource): void;
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
 * ```ts
 * import { AlarmTimers } from "./alarm_timers.ts";
 * import type { AlarmTimersOptions } from "./alarm_timers.ts";
 * import { systemClock as clock } from "../time/clock.ts";
 * import { createLogger } from "../log.ts";
 * declare const fire: AlarmTimersOptions["fire"]; // the node's routing of an alarm's event
 * const log = createLogger();
 * const timers = new AlarmTimers({ clock, log, fire });
 * const key = { tenant: "default", class: "counter", name: "a" };
 * timers.seen(key, Date.now() + 1_000); // an event ended with this alarm
 * ```
 */
export class AlarmTimers {
  readonly #o: AlarmTimersOptions;
  readonly #retryMaxMs: number;
  readonly #maxFiring: number;
  readonly #maxArmed: number;
  readonly #armed = new Map<string, Armed>();
  /**
   * The armed alarms by the time each fires next, earliest first: each
   * firing and each timer takes from its top, so neither looks at every
   * alarm armed. An alarm re-armed or disarmed leaves its old place behind,
   * skipped when it comes up.
   */
  #queue = new TimeQueue();
  #firing = 0;
  #timer: Timer | undefined;
  /** When the timer fires; Infinity while none is set. */
  #timerDue = Infinity;
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

  /** When the alarm armed here for `key` is due, if one is (a hand-over sends it on). */
  dueOf(key: ActorKey): number | undefined {
    return this.#armed.get(actorKeyString(key))?.due;
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
    this.#o.observer?.arming?.(key, due, source);
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
    this.#o.warm?.(key);
    this.#schedule(armed);
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

  /** Queues `armed` at its `at`, and brings the timer forward to it if it is the earliest. */
  #schedule(armed: Armed): void {
    this.#queue.push(armed.at, armed);
    // Places left behind are dropped once they outnumber the alarms.
    if (this.#queue.size > 2 * this.#armed.size + 1024) {
      this.#queue = TimeQueue.of([...this.#armed.values()].filter((a) => !a.firing));
    }
    this.#timerAt(armed.at);
  }

  #timerAt(at: number): void {
    if (this.#stopped || at >= this.#timerDue) return;
    this.#timer?.cancel();
    this.#timerDue = at;
    this.#timer = this.#o.clock.setTimer(Math.max(0, at - this.#o.clock.now()), () => {
      this.#timer = undefined;
      this.#timerDue = Infinity;
      this.#pump();
    });
  }

  /** Fires the alarms whose time came, earliest first, as many as fit; sets the timer for the next. */
  #pump(): void {
    if (this.#stopped) return;
    const now = this.#o.clock.now();
    while (this.#firing < this.#maxFiring) {
      const next = this.#queue.peek();
      if (!next) return;
      const { at, armed } = next;
      // Disarmed, replaced, re-armed at another time, or firing already.
      if (this.#armed.get(armed.id) !== armed || armed.at !== at || armed.firing) {
        this.#queue.pop();
        continue;
      }
      if (at > now) return this.#timerAt(at);
      this.#queue.pop();
      this.#fire(armed);
    }
    // Full: the next firing's end pumps again.
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
          this.#schedule(armed);
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
          this.#schedule(armed);
          break;
        }
      }
    }
    this.#pump();
  }
}

/** A binary min-heap of alarms by a time. */
class TimeQueue {
  readonly #heap: { at: number; armed: Armed }[] = [];

  static of(alarms: Armed[]): TimeQueue {
    const queue = new TimeQueue();
    for (const armed of alarms) queue.push(armed.at, armed);
    return queue;
  }

  get size(): number {
    return this.#heap.length;
  }

  peek(): { at: number; armed: Armed } | undefined {
    return this.#heap[0];
  }

  push(at: number, armed: Armed): void {
    const heap = this.#heap;
    heap.push({ at, armed });
    let i = heap.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (heap[parent].at <= heap[i].at) break;
      [heap[parent], heap[i]] = [heap[i], heap[parent]];
      i = parent;
    }
  }

  pop(): void {
    const heap = this.#heap;
    const last = heap.pop()!;
    if (heap.length === 0) return;
    heap[0] = last;
    let i = 0;
    while (true) {
      const left = 2 * i + 1, right = left + 1;
      let least = i;
      if (left < heap.length && heap[left].at < heap[least].at) least = left;
      if (right < heap.length && heap[right].at < heap[least].at) least = right;
      if (least === i) return;
      [heap[least], heap[i]] = [heap[i], heap[least]];
      i = least;
    }
  }
}
