/**
 * Failover waits (the spec's "When a node dies: what a caller sees"): a GET
 * or HEAD without a body for an actor whose node died or is stopping is kept
 * until another node took the actor over, instead of a 503 the caller would
 * have to retry. The takeover itself is the ordinary one: the wait only
 * saves the retries.
 *
 * @module
 */

import type { Clock, Random } from "../time/clock.ts";
import type { LeaseTiming } from "./lease_timing.ts";

/** Kept requests per actor at most; more get the 503 at once. */
export const MAX_KEPT_PER_ACTOR = 64;

/** A kept request looks at its actor again about this often. */
export const KEPT_CHECK_MS = 1000;

/**
 * The default `--failover-wait-secs`, from the lease timing (the spec): the
 * ttl plus grace, the watch before a fence, one heartbeat period for a node
 * that did not write the fence itself, and a second over which the kept
 * requests are spread, rounded down to whole seconds: 25 s with the
 * default 10 s ttl.
 *
 * @example
 * ```ts
 * import { defaultFailoverWaitMs } from "./failover_wait.ts";
 * import { leaseTiming } from "./lease_timing.ts";
 * defaultFailoverWaitMs(leaseTiming(10_000)); // 25000
 * ```
 */
export function defaultFailoverWaitMs(timing: LeaseTiming): number {
  const sum = timing.fenceAfterMs + timing.watchMs + timing.periodMs + KEPT_CHECK_MS;
  // Whole seconds, as the flag takes them (the watch is 6.03 s by default).
  return Math.floor(sum / 1000) * 1000;
}

/**
 * Every way a kept request ends: the values of the `outcome` label of
 * `wasmkeep_failover_waits_total`, each exported at 0 from a cluster node's
 * start.
 *
 * @example
 * ```ts
 * import { WAIT_OUTCOMES } from "./failover_wait.ts";
 * console.log(WAIT_OUTCOMES.includes("timeout")); // true
 * ```
 */
export const WAIT_OUTCOMES = [
  "served",
  "forwarded",
  "timeout",
  "stopping",
  "lease_lost",
  "client_gone",
  "over_cap",
] as const;

/** How a kept request ended: one of {@linkcode WAIT_OUTCOMES}. */
export type WaitOutcome = (typeof WAIT_OUTCOMES)[number];

/** What a look at the actor found: keep waiting, or the answer. */
export type WaitCheck<T> = { wait: true } | { wait: false; outcome: WaitOutcome; value: T };

/** Options of {@linkcode FailoverWaits}. */
export interface FailoverWaitsOptions {
  clock: Clock;
  random: Random;
  /** How long a request is kept at most (`--failover-wait-secs`). */
  maxWaitMs: number;
  /** Requests kept at once on the node: a quarter of its connection limit. */
  maxKept: number;
  /** Counts each ended wait by outcome. */
  count: (outcome: WaitOutcome) => void;
  /** Told of each wait as it begins and ends (the simulator's bound of kept requests). */
  observer?: FailoverWaitObserver;
}

/**
 * What happens to kept requests, for whoever watches them (the simulator's
 * invariants). Called synchronously, as it happens.
 *
 * @example
 * ```ts
 * import type { FailoverWaitObserver } from "./failover_wait.ts";
 * const observer: FailoverWaitObserver = {
 *   keeping: (actor) => (outcome, gaveUp) => console.log(actor, outcome, gaveUp),
 * };
 * ```
 */
export interface FailoverWaitObserver {
  /**
   * A request for `actor` is to be kept (or refused over the cap). What it
   * returns is told how the wait ended, as it is counted; `gaveUp` when the
   * wait's own answer (`giveUp`) is made next.
   */
  keeping?(actor: string): ((outcome: WaitOutcome, gaveUp: boolean) => void) | void;
}

/**
 * The node's kept requests, bounded in all and per actor.
 *
 * @example
 * ```ts
 * import { FailoverWaits } from "./failover_wait.ts";
 * import { systemClock as clock, systemRandom as random } from "../time/clock.ts";
 * declare const request: Request;
 * declare const check: Parameters<FailoverWaits["keep"]>[2];
 * declare const giveUp: Parameters<FailoverWaits["keep"]>[3];
 * const waits = new FailoverWaits({
 *   clock,
 *   random,
 *   maxWaitMs: 25_000,
 *   maxKept: 2500,
 *   count: (outcome) => console.log(outcome),
 * });
 * const answer = await waits.keep("default/counter/alice", request.signal, check, giveUp);
 * ```
 */
export class FailoverWaits {
  readonly #o: FailoverWaitsOptions;
  readonly #perActor = new Map<string, number>();
  #kept = 0;
  #stopping = false;
  readonly #stop = new AbortController();

  constructor(options: FailoverWaitsOptions) {
    this.#o = options;
  }

  /** Requests kept now. */
  get kept(): number {
    return this.#kept;
  }

  /** Whether a request can be kept at all (the wait is on, and its quarter is not zero). */
  get enabled(): boolean {
    return this.#o.maxWaitMs > 0 && this.#o.maxKept > 0 && !this.#stopping;
  }

  /**
   * Keeps a request for `actor` until `check` gives an answer, the wait runs
   * out, the node stops, or the client leaves (`signal`). The first look
   * comes after a random part of a second, so the requests kept for
   * different actors are spread over it, then one a second. `giveUp` makes
   * the answer of a wait that ended without one (`timeout`, `stopping`,
   * `lease_lost`, `over_cap`); a client that left gets `undefined`.
   *
   * `check` is given a signal that aborts when the wait runs out: a look
   * still reading the bucket then should end at once with `wait: true`, so
   * that no request is kept past the wait (a silent bucket read lasts 30 s).
   * A look that handed the request on (ran it, or forwarded it) finishes.
   */
  async keep<T>(
    actor: string,
    signal: AbortSignal | undefined,
    check: (waitEnds: AbortSignal) => Promise<WaitCheck<T>>,
    giveUp: (outcome: WaitOutcome) => T,
  ): Promise<T | undefined> {
    const ended = this.#o.observer?.keeping?.(actor);
    const end = (outcome: WaitOutcome, gaveUp = true) => {
      this.#o.count(outcome);
      ended?.(outcome, gaveUp);
      return outcome;
    };
    const perActor = this.#perActor.get(actor) ?? 0;
    if (!this.enabled || this.#kept >= this.#o.maxKept || perActor >= MAX_KEPT_PER_ACTOR) {
      return giveUp(end("over_cap"));
    }
    this.#kept++;
    this.#perActor.set(actor, perActor + 1);
    const { clock } = this.#o;
    const waitEnds = new AbortController();
    const timer = clock.setTimer(this.#o.maxWaitMs, () => waitEnds.abort());
    try {
      const deadline = clock.monotonic() + this.#o.maxWaitMs;
      let delay = Math.floor(this.#o.random.next() * KEPT_CHECK_MS);
      while (true) {
        const left = deadline - clock.monotonic();
        if (left <= 0) return giveUp(end("timeout"));
        const waited = await this.#sleep(Math.min(delay, left), signal);
        if (waited === "client_gone") {
          end("client_gone", false);
          return undefined;
        }
        if (waited === "stopping") return giveUp(end("stopping"));
        const looked = await check(waitEnds.signal);
        if (!looked.wait) {
          end(looked.outcome, false);
          return looked.value;
        }
        delay = KEPT_CHECK_MS;
      }
    } finally {
      timer.cancel();
      this.#kept--;
      const left = (this.#perActor.get(actor) ?? 1) - 1;
      if (left === 0) this.#perActor.delete(actor);
      else this.#perActor.set(actor, left);
    }
  }

  async #sleep(
    ms: number,
    signal: AbortSignal | undefined,
  ): Promise<"slept" | "client_gone" | "stopping"> {
    if (signal?.aborted) return "client_gone";
    if (this.#stopping) return "stopping";
    const both = new AbortController();
    const onClient = () => both.abort();
    const onStop = () => both.abort();
    signal?.addEventListener("abort", onClient, { once: true });
    this.#stop.signal.addEventListener("abort", onStop, { once: true });
    try {
      await this.#o.clock.sleep(ms, both.signal);
      return "slept";
    } catch {
      return signal?.aborted ? "client_gone" : "stopping";
    } finally {
      signal?.removeEventListener("abort", onClient);
      this.#stop.signal.removeEventListener("abort", onStop);
    }
  }

  /** The node begins to stop: every kept request gets its 503 now, and no new one is kept. */
  stop(): void {
    this.#stopping = true;
    this.#stop.abort();
  }
}
