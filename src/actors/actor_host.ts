/**
 * Actors on this node, as the control plane keeps them: one queue of events
 * per actor (run one at a time, in arrival order), which actors are resident,
 * hibernation of idle ones and the cap on how many are resident.
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

interface QueuedEvent {
  request: ActorRequest;
  resolve: (outcome: EventOutcome) => void;
}

interface ActorState {
  key: ActorKey;
  id: string;
  running: boolean;
  queue: QueuedEvent[];
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
        running: false,
        queue: [],
        lastEventAt: this.#clock.monotonic(),
        executor: this.#pool.executorOf(key),
      };
      this.#actors.set(id, state);
    }
    if (state.running && state.queue.length >= this.#limits.maxQueuedEvents) {
      return Promise.resolve({
        kind: "failed",
        status: 503,
        message: `the actor has ${this.#limits.maxQueuedEvents} events waiting; retry`,
      });
    }
    this.#inFlight++;
    return new Promise((resolve) => {
      state.queue.push({ request, resolve });
      if (!state.running) this.#next(state);
    });
  }

  #next(state: ActorState) {
    const event = state.queue.shift();
    if (!event) {
      state.running = false;
      state.lastEventAt = this.#clock.monotonic();
      return;
    }
    state.running = true;
    this.#pool.run(state.key, event.request).then((outcome) => {
      this.#inFlight--;
      event.resolve(outcome);
      this.#next(state);
      if (this.#inFlight === 0) { for (const wake of this.#idleWaiters.splice(0)) wake(); }
    });
  }

  /** Evicts least recently used idle actors until one more fits. */
  #makeRoom(): boolean {
    if (this.#actors.size < this.#limits.maxResidentActors) return true;
    for (const state of this.#actors.values()) {
      if (state.running) continue;
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
        if (!state.running && state.lastEventAt <= cutoff) this.#hibernate(state);
      }
      this.#scheduleSweep();
    });
  }

  /** Forgets the instances an executor lost when it was replaced. */
  executorReplaced(index: number): void {
    for (const state of [...this.#actors.values()]) {
      if (state.executor === index && !state.running) this.#actors.delete(state.id);
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
