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
import type { ActorRequest, EventOutcome, FailedOutcome, SpecialEvent } from "./protocol.ts";
import type { ExecutorPool, UnstartedEvent } from "./executor_pool.ts";

/** A hold on an actor: this node owns it at `generation` until it releases it. */
export interface ActorHold {
  readonly generation: bigint;
}

/** Taking and giving up actors (the ownership records of src/cluster/ownership.ts). */
export interface ActorHolds<H extends ActorHold = ActorHold> {
  /** Takes the actor at a new generation; rejects when it cannot. */
  take(actor: ActorKey): Promise<H>;
  /**
   * How the events waiting on a take that rejected with `error` are
   * answered. The holds say it since the errors are theirs: this layer
   * does not import the cluster's.
   */
  takeFailure(error: unknown): FailedOutcome;
  /** Gives the actor up; a release that fails is retried in the background. */
  release(hold: H): Promise<void>;
  /** Whether the hold still stands in the bucket. */
  stillHolds(hold: H): Promise<boolean>;
}

/** Releases sent at once when the node stops. */
export const STOP_RELEASE_CONCURRENCY = 64;

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
  /** Set once the take landed. */
  hold: ActorHold | undefined;
  /** The take, while it is under way. */
  taking: Promise<ActorHold> | undefined;
  /** Events sent to the executor and not answered yet. */
  inFlight: number;
  lastEventAt: number;
  executor: number;
  /** Set while the actor is handed to another node: its new events are refused. */
  handingOver?: true;
  /** Woken when its events under way and queued are done, while it is handed over. */
  idle?: () => void;
}

/**
 * What the host does with events and actors, for whoever watches it (the
 * simulator's invariants). Called synchronously, as it happens.
 *
 * @example
 * ```ts
 * import type { ActorHostObserver } from "./actor_host.ts";
 * const observer: ActorHostObserver = {
 *   dispatching: (key) => (outcome) => console.log(key.name, outcome.kind),
 * };
 * ```
 */
export interface ActorHostObserver {
  /** An event for `key` arrives; what it returns is told the event's outcome once it settles. */
  dispatching?(key: ActorKey): ((outcome: EventOutcome) => void) | void;
  /** An executor gave up an actor (before the host forgets and releases it). */
  gaveUp?(actor: ActorKey, generation: number): void;
  /** An executor was replaced (before the host releases its actors and sends its events again). */
  executorReplaced?(index: number, unstarted: UnstartedEvent[]): void;
}

/** How often idle actors are looked for. */
export const HIBERNATION_SWEEP_MS = 1000;

/**
 * Queues events per actor and keeps the resident set bounded.
 *
 * @example
 * ```ts
 * import type { ActorHost } from "./actor_host.ts";
 * import type { ActorRequest } from "./protocol.ts";
 * declare const host: ActorHost;
 * declare const request: ActorRequest;
 * const outcome = await host.dispatch({ tenant: "default", class: "counter", name: "a" }, request);
 * ```
 */
export class ActorHost {
  readonly #pool: ExecutorPool;
  readonly #holds: ActorHolds;
  /** Takes under way, by actor. */
  readonly #takes = new Map<string, Promise<ActorHold>>();
  /** Whether this node may run events now (in a cluster: its lease is valid). */
  readonly #canRun: () => boolean;
  /** The end of the node's lease on the wall clock (ms), 0 for none: sent with each event. */
  readonly #runUntil: () => number;
  readonly #limits: ActorHostLimits;
  readonly #clock: Clock;
  readonly #log: Logger;
  /** Resident actors, least recently used first (a Map keeps insertion order). */
  readonly #actors = new Map<string, ActorState>();
  /**
   * The actor last put at the end of #actors. While it is in the map it is
   * still last (only dispatch adds to the map, and it sets this), so its next
   * event moves nothing: a hot actor's events skip the delete and the set.
   */
  #newest: ActorState | undefined;
  #sweep: Timer | undefined;
  #inFlight = 0;
  #idleWaiters: (() => void)[] = [];
  readonly #observer: ActorHostObserver | undefined;

  constructor(
    pool: ExecutorPool,
    holds: ActorHolds,
    limits: ActorHostLimits,
    clock: Clock,
    log: Logger,
    canRun: () => boolean = () => true,
    runUntil: () => number = () => 0,
    observer?: ActorHostObserver,
  ) {
    this.#observer = observer;
    this.#pool = pool;
    this.#holds = holds;
    this.#canRun = canRun;
    this.#runUntil = runUntil;
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
   * Runs `request` on the actor after the events before it (a WebSocket
   * event or an alarm's when `socket` is set: `request` is then the
   * socket's upgrade request, or empty). Answers 503 at once when the actor's queue or the resident set
   * is full. `stillWanted`, asked as the event is sent (after any take),
   * can call it off then: it is answered 409 unsent.
   */
  dispatch(
    key: ActorKey,
    request: ActorRequest,
    socket?: SpecialEvent,
    stillWanted?: () => boolean,
  ): Promise<EventOutcome> {
    const settled = this.#observer?.dispatching?.(key);
    const outcome = this.#dispatch(key, request, socket, stillWanted);
    // It never rejects: a failure is an outcome.
    if (settled) outcome.then(settled);
    return outcome;
  }

  #dispatch(
    key: ActorKey,
    request: ActorRequest,
    socket: SpecialEvent | undefined,
    stillWanted: (() => boolean) | undefined,
  ): Promise<EventOutcome> {
    const id = actorKeyString(key);
    let state = this.#actors.get(id);
    if (state) {
      if (state !== this.#newest) {
        this.#actors.delete(id);
        this.#actors.set(id, state);
        this.#newest = state;
      }
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
        hold: undefined,
        taking: undefined,
        inFlight: 0,
        lastEventAt: this.#clock.monotonic(),
        executor: this.#pool.executorOf(key),
      };
      this.#actors.set(id, state);
      this.#newest = state;
      this.#take(state);
    }
    if (state.handingOver) {
      return Promise.resolve({
        kind: "failed",
        status: 503,
        message: "the actor is being handed to another node; retry",
      });
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
      if (actor.inFlight === 0) actor.idle?.();
      if (this.#inFlight === 0) { for (const wake of this.#idleWaiters.splice(0)) wake(); }
    };
    const hold = actor.hold;
    // Checked when the event is sent, not only when it arrived: a take
    // can outlast the lease, and dropAll can drop the actor meanwhile.
    const send = (generation: bigint): Promise<EventOutcome> => {
      if (this.#actors.get(id) !== actor || !this.#canRun()) {
        return Promise.resolve({
          kind: "failed",
          status: 503,
          message: "this node gave the actor up (its lease is not valid); retry",
        });
      }
      if (stillWanted && !stillWanted()) {
        return Promise.resolve({ kind: "failed", status: 409, message: "called off unsent" });
      }
      return this.#pool.run(
        actor.executor,
        key,
        Number(generation),
        request,
        this.#runUntil(),
        socket,
      );
    };
    const run = hold ? send(hold.generation) : actor.taking!.then(
      (taken) => send(taken.generation),
      (error): EventOutcome => this.#holds.takeFailure(error),
    );
    return run.then(
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

  /** Takes the actor (its first event after waking waits for it). */
  #take(state: ActorState) {
    // One take of an actor at a time: an older one still in flight (its
    // actor dropped meanwhile) must not land after this one and supersede
    // it, since this node's takes may replace its own records.
    const earlier = this.#takes.get(state.id);
    const taking = (earlier ? earlier.then(() => {}, () => {}) : Promise.resolve()).then(() =>
      this.#holds.take(state.key)
    );
    this.#takes.set(state.id, taking);
    taking.finally(() => {
      if (this.#takes.get(state.id) === taking) this.#takes.delete(state.id);
    }).catch(() => {});
    state.taking = taking;
    state.taking.then((hold) => {
      state.taking = undefined;
      if (this.#actors.get(state.id) === state && this.#canRun()) state.hold = hold;
      else {
        if (this.#actors.get(state.id) === state) this.#actors.delete(state.id);
        this.#holds.release(hold).catch(() => {});
      }
    }, (error) => {
      state.taking = undefined;
      this.#log.warn("could not take the actor", { actor: state.id, error: String(error) });
      if (this.#actors.get(state.id) === state) this.#actors.delete(state.id);
    });
  }

  /** Whether this node holds `actor` now: resident, with its take landed. */
  holds(actor: ActorKey): boolean {
    return this.#actors.get(actorKeyString(actor))?.hold !== undefined;
  }

  /** The hold this node has on `actor` now, if it holds it. */
  holdOf(actor: ActorKey): ActorHold | undefined {
    return this.#actors.get(actorKeyString(actor))?.hold;
  }

  /**
   * Drops every actor at once, without waiting for uploads or writing
   * releases: the node's lease ran out, so the bucket may not answer and
   * another node may soon take them. Each is taken again, at a new
   * generation, at its next event.
   */
  dropAll(): void {
    this.#actors.clear();
    this.#pool.discardAll();
  }

  /** Whether this node still holds `actor` at `generation`, in the bucket too. */
  async stillHolds(actor: ActorKey, generation: number): Promise<boolean> {
    const hold = this.#actors.get(actorKeyString(actor))?.hold;
    if (!hold || Number(hold.generation) !== generation) return false;
    return await this.#holds.stillHolds(hold);
  }

  /** Forgets an actor an executor gave up, and releases it. */
  gaveUp(actor: ActorKey, generation: number): void {
    this.#observer?.gaveUp?.(actor, generation);
    const id = actorKeyString(actor);
    const state = this.#actors.get(id);
    if (!state?.hold || Number(state.hold.generation) !== generation) return;
    this.#actors.delete(id);
    this.#holds.release(state.hold).catch(() => {});
  }

  /**
   * Hands `actor` over (a drain or a move, src/handover/): from now on its
   * new events are answered 503 (retry), its events under way and queued
   * finish, its executor closes it once its uploads landed, then its record
   * is released. Until the release landed this node still holds it, so no
   * event of its own takes it back meanwhile. False, doing nothing, when
   * this node does not hold it (or hands it over already).
   */
  async handOver(actor: ActorKey): Promise<boolean> {
    const id = actorKeyString(actor);
    const state = this.#actors.get(id);
    const hold = state?.hold;
    if (!state || !hold || state.handingOver) return false;
    state.handingOver = true;
    if (state.inFlight > 0) {
      await new Promise<void>((resolve) => state.idle = resolve);
    }
    try {
      await this.#pool.drop(state.key, Number(hold.generation));
      await this.#holds.release(hold);
    } finally {
      if (this.#actors.get(id) === state) this.#actors.delete(id);
      if (this.#newest === state) this.#newest = undefined;
    }
    this.#log.debug("actor handed over", { actor: id });
    return true;
  }

  /** Evicts least recently used idle actors until one more fits. */
  #makeRoom(): boolean {
    if (this.#actors.size < this.#limits.maxResidentActors) return true;
    for (const state of this.#actors.values()) {
      if (state.inFlight > 0 || state.handingOver) continue;
      this.#hibernate(state);
      return true;
    }
    return false;
  }

  #hibernate(state: ActorState) {
    this.#actors.delete(state.id);
    const hold = state.hold;
    if (!hold) return;
    // Its uploads land first; then the record says it is free.
    this.#pool.drop(state.key, Number(hold.generation)).then(() =>
      this.#holds.release(hold).catch(() => {})
    );
    this.#log.debug("actor hibernated", { actor: state.id });
  }

  #scheduleSweep() {
    this.#sweep = this.#clock.setTimer(HIBERNATION_SWEEP_MS, () => {
      const cutoff = this.#clock.monotonic() - this.#limits.idleMs;
      for (const state of [...this.#actors.values()]) {
        if (state.inFlight === 0 && state.lastEventAt <= cutoff && !state.handingOver) {
          this.#hibernate(state);
        }
      }
      this.#scheduleSweep();
    });
  }

  /**
   * Forgets the actors an executor lost when it was replaced and releases
   * them; the events it never started run again at a new hold, in order.
   */
  executorReplaced(index: number, unstarted: UnstartedEvent[]): void {
    this.#observer?.executorReplaced?.(index, unstarted);
    for (const state of [...this.#actors.values()]) {
      if (state.executor !== index) continue;
      this.#actors.delete(state.id);
      if (state.hold) this.#holds.release(state.hold).catch(() => {});
    }
    for (const event of unstarted) {
      this.dispatch(event.actor, event.request, event.socket).then(event.resolve);
    }
  }

  /**
   * Releases every actor this node holds (at a clean stop, once the
   * executors closed their databases and their uploads landed).
   */
  async releaseAll(): Promise<void> {
    const holds = [...this.#actors.values()].flatMap((state) => state.hold ? [state.hold] : []);
    this.#actors.clear();
    let next = 0;
    const worker = async () => {
      while (next < holds.length) await this.#holds.release(holds[next++]).catch(() => {});
    };
    await Promise.all(Array.from({ length: STOP_RELEASE_CONCURRENCY }, worker));
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
