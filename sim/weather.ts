/**
 * The bucket's weather in a run: calm latency, storms (latency, error
 * answers, silent calls, lost answers, slow listings, late uploads) and
 * outages for every node, and since when it has been calm, which the
 * invariants' bounds count from.
 *
 * @module
 */

import type { MemoryFaults, TimeWindow } from "../src/bucket/memory.ts";
import { REQUEST_TIMEOUT_MS } from "../src/bucket/bounds.ts";
import type { Random } from "../src/time/clock.ts";
import { between, type ObservedBucket } from "./bucket.ts";
import type { Scheduler } from "./scheduler.ts";

/** A storm under way. */
interface Storm {
  until: number;
  answerMaxMs: number;
  lateWriteRate: number;
}

/**
 * The weather of one run's bucket.
 *
 * @example
 * ```ts ignore
 * const weather = new Weather(sched, store, draws.net, swarm.calmLatencyMs, lateMarkers, log);
 * weather.beginStorm(10_000, draws.chaos);
 * ```
 */
export class Weather {
  readonly outages: TimeWindow[] = [];
  readonly #calm: MemoryFaults;
  #storm: Storm | undefined;
  #lastStormEnd = -Infinity;

  constructor(
    readonly sched: Scheduler,
    readonly store: ObservedBucket,
    readonly net: Random,
    calmLatencyMs: number,
    readonly lateMarkers: boolean,
    readonly log: (message: string) => void,
  ) {
    this.#calm = { latencyMs: { min: 0.2, max: calmLatencyMs }, outages: this.outages };
    store.faults = this.#calm;
  }

  /** The faults of calm weather. */
  get calm(): MemoryFaults {
    return this.#calm;
  }

  /** Whether a storm is under way. */
  get stormy(): boolean {
    return this.#storm !== undefined;
  }

  /** When the last storm ended (true time), or -Infinity. */
  get lastStormEnd(): number {
    return this.#lastStormEnd;
  }

  /** The latency of an answer's way back to a process. */
  answerLatency(): number {
    const storm = this.#storm;
    if (!storm) return between(this.net, 0.1, 3);
    // Mostly quick, sometimes slow, rarely very slow.
    const u = this.net.next();
    if (u < 0.8) return between(this.net, 0.5, 30);
    if (u < 0.98) return between(this.net, 30, storm.answerMaxMs);
    return between(this.net, storm.answerMaxMs, 4 * storm.answerMaxMs);
  }

  /**
   * During a storm, some uploads of actors' histories reach the store late
   * (up to the request timeout) while their senders give up and go on.
   */
  lateWrite(key: string): number | undefined {
    const storm = this.#storm;
    const late = this.lateMarkers ? key.startsWith("actors/") : key.endsWith(".ltx");
    if (!storm || !late || this.net.next() >= storm.lateWriteRate) return undefined;
    return between(this.net, 1_000, 30_000);
  }

  /** A storm for `ms` (one under way lasts longer), drawn from `r`. */
  beginStorm(ms: number, r: Random): boolean {
    const until = this.sched.now + ms;
    if (this.#storm) {
      this.#storm.until = Math.max(this.#storm.until, until);
      this.sched.at(until, () => this.endStorm());
      return false;
    }
    const answerMaxMs = between(r, 50, 1_500);
    const lateWriteRate = r.next() < 0.5 ? between(r, 0, 0.1) : 0;
    this.#storm = { until, answerMaxMs, lateWriteRate };
    const faults: MemoryFaults = {
      latencyMs: { min: 0.5, max: between(r, 20, 800) },
      errorRate: between(r, 0, 0.25),
      timeoutRate: r.next() < 0.5 ? between(r, 0, 0.04) : 0,
      lostAnswerRate: between(r, 0, 0.2),
      listDelayMs: r.next() < 0.4 ? between(r, 0, 4_000) : 0,
      outages: this.outages,
    };
    this.store.faults = faults;
    this.log(`bucket storm: ${JSON.stringify({ ...faults, outages: undefined, lateWriteRate })}`);
    this.sched.at(until, () => this.endStorm());
    return true;
  }

  /** Ends the storm if its time came (or at once with `now`). */
  endStorm(now = false): void {
    if (!this.#storm) return;
    if (now) this.#storm.until = this.sched.now;
    if (this.sched.now < this.#storm.until) return;
    this.#storm = undefined;
    this.store.faults = this.#calm;
    this.#lastStormEnd = this.sched.now;
    this.log("bucket calm again");
  }

  /** An outage of the bucket for every node, `ms` from now. */
  outage(ms: number): void {
    this.outages.push({ from: this.sched.now, until: this.sched.now + ms });
  }

  /** Ends every outage now (the quiet phase). */
  endOutages(): void {
    for (const w of this.outages) w.until = Math.min(w.until, this.sched.now);
  }

  /** True time since which the bucket has had no storm or outage; undefined while it has one. */
  calmSince(): number | undefined {
    const now = this.sched.now;
    if (this.#storm) return undefined;
    let calm = this.#lastStormEnd;
    for (const w of this.outages) {
      if (w.from <= now && now < w.until) return undefined;
      if (w.until <= now) calm = Math.max(calm, w.until);
    }
    return calm;
  }

  /**
   * No storm and no outage now, nor within a bucket request's timeout
   * before: a call the storm left unanswered still holds up what waits on
   * it (a take of the actor, and the requests queued behind it) until then.
   */
  bucketCalm(): boolean {
    const calm = this.calmSince();
    return calm !== undefined && calm <= this.sched.now - REQUEST_TIMEOUT_MS - 1_000;
  }
}
