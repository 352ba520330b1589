/**
 * The executor's run token (ADR 0003): one event runs at a time, and an
 * event that waits on the bucket, a restore or a call hands the token on
 * until its wait ends. The node is told each hand-over (`suspended`,
 * `resumed`), written before anything else can run, so it always knows
 * which event is running; a waiting event keeps its wall-clock limit here,
 * and past it its wait ends with a 504.
 *
 * @module
 */

import type { Clock, Timer } from "../time/clock.ts";
import type { FromExecutor } from "../actors/protocol.ts";
import { EventFailure } from "../actors/event_failure.ts";

/** What a {@linkcode RunToken} needs. */
export interface RunTokenOptions {
  clock: Clock;
  /** The wall-clock limit of one event, ms. */
  eventTimeoutMs: number;
  /** Sends a message to the node. */
  post(message: FromExecutor): void;
  /** Resolves once every message posted so far left. */
  drain(): Promise<void>;
  /** Called as an event goes on after a wait; throws to end it (its lease ran out). */
  resumed(seq: number): void;
}

/**
 * Who runs now, and the events waiting to.
 *
 * @example
 * ```ts
 * import { RunToken } from "./run_token.ts";
 * import type { FromExecutor } from "../actors/protocol.ts";
 * import { systemClock as clock } from "../time/clock.ts";
 * declare const post: (message: FromExecutor) => void;
 * declare const drain: () => Promise<void>;
 * declare const fetchFromBucket: () => Promise<Uint8Array[]>;
 * const seq = 1;
 * const token = new RunToken({ clock, eventTimeoutMs: 30_000, post, drain, resumed: () => {} });
 * await token.acquire();
 * token.started(seq);
 * const rows = await token.suspend(seq, fetchFromBucket());
 * token.ended(seq);
 * token.release();
 * ```
 */
export class RunToken {
  readonly #o: RunTokenOptions;
  #running = false;
  readonly #queue: (() => void)[] = [];
  /** When the event holding the token started (for its wall-clock limit). */
  #startedAt = 0;
  /** Start times of the events under way, by sequence number. */
  readonly #starts = new Map<number, number>();

  constructor(options: RunTokenOptions) {
    this.#o = options;
  }

  /** Waits for the token; a resumed event goes before events not started. */
  acquire(resumed = false): Promise<void> {
    if (!this.#running) {
      this.#running = true;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      if (resumed) this.#queue.unshift(resolve);
      else this.#queue.push(resolve);
    });
  }

  /** Hands the token to the next waiting event, if any. */
  release(): void {
    const next = this.#queue.shift();
    if (next) next();
    else this.#running = false;
  }

  /** The event `seq`, holding the token, starts: its limit runs from now. */
  started(seq: number): void {
    this.#startedAt = this.#o.clock.monotonic();
    this.#starts.set(seq, this.#startedAt);
  }

  /** The event `seq` ended. */
  ended(seq: number): void {
    this.#starts.delete(seq);
  }

  /**
   * Lets other events run while the event `seq` waits for `work`. Past the
   * event's wall-clock limit the wait ends with a 504 (`onTimeout` may stop
   * the work, and it ends before the event goes on).
   */
  async suspend<T>(seq: number, work: Promise<T>, onTimeout?: () => Promise<void>): Promise<T> {
    const { clock, eventTimeoutMs } = this.#o;
    this.#o.post({ type: "suspended", seq });
    // Written before another event can start: one that loops would keep a
    // queued write from ever going out, and the node would count this
    // event, not the loop, as the one running.
    await this.#o.drain();
    this.release();
    const remaining = this.#startedAt + eventTimeoutMs - clock.monotonic();
    let stopping: Promise<void> | undefined;
    let timer: Timer | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = clock.setTimer(Math.max(0, remaining), () => {
        // The 504 wins the race before onTimeout stops the work, whose own
        // rejection (the abort) would otherwise be taken for a failure.
        reject(
          new EventFailure(
            504,
            `the actor did not finish its event within ${eventTimeoutMs / 1000} s`,
          ),
        );
        stopping = onTimeout?.().catch(() => {});
      });
    });
    let result: T;
    try {
      result = await Promise.race([work, timedOut]);
    } finally {
      timer?.cancel();
      await stopping;
      await this.acquire(true);
      this.#startedAt = this.#starts.get(seq) ?? clock.monotonic();
      // Written before the event goes on, for the same reason: the node
      // must count it, not an event waiting for the token, as running.
      this.#o.post({ type: "resumed", seq });
      await this.#o.drain();
    }
    this.#o.resumed(seq);
    return result;
  }
}
