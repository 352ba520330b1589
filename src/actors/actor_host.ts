/**
 * Actors on this node, as the control plane keeps them: how many events each
 * has under way (bounded), which actors are resident, hibernation of idle
 * ones and the cap on how many are resident. Events go to the actor's
 * executor at once, in arrival order; the executor runs one actor's events
 * one at a time in that order, so a hot actor costs no round trip between
 * its events.
 *
 * @module
 */

import type { Clock, Timer } from "../time/clock.ts";
import type { Logger } from "../log.ts";
import { type ActorKey, actorKeyString } from "./key.ts";
import type { ActorRequest } from "./protocol.ts";
import type { EventOutcome, ExecutorPool } from "./executor_pool.ts";

/** Limits of {@linkcode ActorHost}. */
export interface ActorHostLimits {
  /** Events one actor may have waiting behind the one running. */
  maxQueuedEvents: number;
  /** Actors with an instance in memory at once. */
  maxResidentActors: number;
  /** An actor with no event for this long hibernates. */
  idleMs: number;
}

interface ActorState {
  key: ActorKey;
  id: string;
  /** Events sent to the executor and not answered yet. */
  inFlight: number;
  lastEventAt: number;
  executor: number;
}

/** How often idle actors are looked for. */
export const HIBERNATION_SWEEP_MS = 1000;

/**
 * Queues events per actor and keeps the resident set bounded.
 *
 * @example
 * ```ts ignore
 * const host = new ActorHost(pool, limits, systemClock, log);
 * const outcome = await host.dispatch({ tenant: "default", class: "counter", name: "a" }, request);
 * ```
 */
export class ActorHost {
  readonly #pool: ExecutorPool;
  readonly #limits: ActorHostLimits;
  readonly #clock: Clock;
  readonly #log: Logger;
  /** Resident actors, least recently used first (a Map keeps insertion order). */
  readonly #actors = new Map<string, ActorState>();
  #sweep: Timer | undefined;
  #inFlight = 0;
  #idleWaiters: (() => void)[] = [];

  constructor(pool: ExecutorPool, limits: ActorHostLimits, clock: Clock, log: Logger) {
    this.#pool = pool;
    this.#limits = limits;
    this.#clock = clock;
    this.#log = log;
    this.#scheduleSweep();
  }

  /** Number of resident actors. */
  get residentCount(): number {
    return this.#actors.size;
  }

  /** Events running or queued on this node. */
  get inFlight(): number {
    return this.#inFlight;
  }

  /**
   * Runs `request` on the actor after the events before it. Answers 503 at
   * once when the actor's queue or the resident set is full.
   */
  dispatch(key: ActorKey, request: ActorRequest): Promise<EventOutcome> {
    const id = actorKeyString(key);
    let state = this.#actors.get(id);
    if (state) {
      this.#actors.delete(id);
      this.#actors.set(id, state);
    } else {
      if (!this.#makeRoom()) {
        return Promise.resolve({
          kind: "failed",
          status: 503,
          message:
            `this node holds its maximum of ${this.#limits.maxResidentActors} busy actors; retry`,
        });
      }
      state = {
        key,
        id,
        inFlight: 0,
        lastEventAt: this.#clock.monotonic(),
        executor: this.#pool.executorOf(key),
      };
      this.#actors.set(id, state);
    }
    // One event runs; the others wait behind it.
    if (state.inFlight > this.#limits.maxQueuedEvents) {
      return Promise.resolve({
        kind: "failed",
        status: 503,
        message: `the actor has ${this.#limits.maxQueuedEvents} events waiting; retry`,
      });
    }
    this.#inFlight++;
    state.inFlight++;
    const actor = state;
    const settle = () => {
      this.#inFlight--;
      actor.inFlight--;
      actor.lastEventAt = this.#clock.monotonic();
      if (this.#inFlight === 0) { for (const wake of this.#idleWaiters.splice(0)) wake(); }
    };
    return this.#pool.run(actor.executor, key, request).then(
      (outcome) => {
        settle();
        return outcome;
      },
      (error): EventOutcome => {
        settle();
        this.#log.error("event could not be run", { actor: id, error: String(error) });
        return { kind: "failed", status: 500, message: "the event could not be run" };
      },
    );
  }

  /** Evicts least recently used idle actors until one more fits. */
  #makeRoom(): boolean {
    if (this.#actors.size < this.#limits.maxResidentActors) return true;
    for (const state of this.#actors.values()) {
      if (state.inFlight > 0) continue;
      this.#hibernate(state);
      return true;
    }
    return false;
  }

  #hibernate(state: ActorState) {
    this.#actors.delete(state.id);
    this.#pool.drop(state.key);
    this.#log.debug("actor hibernated", { actor: state.id });
  }

  #scheduleSweep() {
    this.#sweep = this.#clock.setTimer(HIBERNATION_SWEEP_MS, () => {
      const cutoff = this.#clock.monotonic() - this.#limits.idleMs;
      for (const state of [...this.#actors.values()]) {
        if (state.inFlight === 0 && state.lastEventAt <= cutoff) this.#hibernate(state);
      }
      this.#scheduleSweep();
    });
  }

  /** Forgets the instances an executor lost when it was replaced. */
  executorReplaced(index: number): void {
    for (const state of [...this.#actors.values()]) {
      if (state.executor === index && state.inFlight === 0) this.#actors.delete(state.id);
    }
  }

  /** Resolves once no event runs or waits, or after `timeoutMs`. */
  async drain(timeoutMs: number): Promise<boolean> {
    this.#sweep?.cancel();
    if (this.#inFlight === 0) return true;
    const idle = new Promise<boolean>((resolve) => this.#idleWaiters.push(() => resolve(true)));
    const controller = new AbortController();
    const timeout = this.#clock.sleep(timeoutMs, controller.signal).then(() => false, () => true);
    const result = await Promise.race([idle, timeout]);
    controller.abort();
    return result;
  }
}
