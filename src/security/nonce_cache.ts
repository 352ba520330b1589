/**
 * The nonces of signed calls a node accepted, remembered until their calls
 * can no longer be accepted anyway, so each call is accepted once (the
 * spec's "Calls between nodes": "a nonce unique to each send (valid for a
 * minute, and accepted once)").
 *
 * @module
 */

import type { Clock } from "../time/clock.ts";

/**
 * Most nonces remembered at once (500,000). Each costs about 80 bytes of
 * heap (a 32-character hex string of 48 bytes, its set entry and its slot in
 * a time bucket; measured with `Deno.memoryUsage()` over a million entries),
 * so a full cache holds about 40 MB. A signed call is remembered for its
 * validity and a margin after its call time: 61 s for a caller whose clock
 * agrees with this node's, up to 121 s for one a minute ahead. So the bound
 * sustains about 8,200 accepted calls per second from callers in sync (about
 * 4,100 from callers a minute ahead), above what a node serves (docs/performance.md);
 * beyond it calls are refused, never accepted unchecked.
 *
 * @example
 * ```ts
 * import { MAX_NONCES } from "./nonce_cache.ts";
 * console.log(MAX_NONCES); // 500000
 * ```
 */
export const MAX_NONCES = 500_000;

/**
 * Nonces are grouped into buckets by the second their keeping ends, rounded
 * up: expiry walks buckets, not nonces, and a nonce is kept up to this much
 * (1 s) longer than it was asked to be, never shorter.
 *
 * @example
 * ```ts
 * import { NONCE_BUCKET_MS } from "./nonce_cache.ts";
 * console.log(NONCE_BUCKET_MS); // 1000
 * ```
 */
export const NONCE_BUCKET_MS = 1_000;

/** What {@linkcode NonceCache.remember} found. */
export type RememberResult =
  /** The nonce was new and is now remembered. */
  | "added"
  /** The nonce is already remembered: a replay. */
  | "seen"
  /** The nonce is new but the cache is full of live nonces: refuse the call. */
  | "full";

/** Counts since the cache was made, for metrics and logs. */
export interface NonceCacheStats {
  /** Nonces remembered now. */
  size: number;
  /** Nonces added. */
  added: number;
  /** Nonces refused as already seen (replays). */
  seen: number;
  /** New nonces refused because the cache was full of live ones. */
  full: number;
  /** Nonces forgotten once their keeping ended. */
  expired: number;
}

/** How a {@linkcode NonceCache} is built. */
export interface NonceCacheOptions {
  /** Decides when a nonce's keeping ended (its wall time, as the calls' timestamps). */
  clock: Clock;
  /** Most nonces at once; default {@linkcode MAX_NONCES}. */
  maxEntries?: number;
}

/**
 * A bounded set of nonces, each kept until a wall time given with it.
 * Expiry is O(1) amortised per nonce: nonces sit in per-second buckets
 * ordered by when their keeping ends, and a whole bucket is dropped at once
 * (the buckets alive at a time are bounded by the spread of those times,
 * about two minutes for signed calls). When it is full of nonces still kept,
 * a new one is refused rather than an old one forgotten: forgetting would let
 * its call be replayed.
 *
 * @example A replay is refused
 * ```ts
 * import { NonceCache } from "./nonce_cache.ts";
 * import { systemClock } from "../time/clock.ts";
 * const nonces = new NonceCache({ clock: systemClock });
 * const until = systemClock.now() + 61_000;
 * nonces.remember("9f86d081884c7d659a2feaa0c55ad015", until); // "added"
 * nonces.remember("9f86d081884c7d659a2feaa0c55ad015", until); // "seen"
 * ```
 */
export class NonceCache {
  readonly #clock: Clock;
  readonly #maxEntries: number;
  readonly #nonces = new Set<string>();
  /** Bucket end (ms since the epoch, a multiple of NONCE_BUCKET_MS) → the nonces kept until then. */
  readonly #buckets = new Map<number, string[]>();
  /** The earliest bucket end, or Infinity when no bucket exists. */
  #nextEnd = Infinity;
  #added = 0;
  #seen = 0;
  #full = 0;
  #expired = 0;
  /**
   * The wall time (ms since the epoch) the cache began, on its clock. A call
   * dated before it may have been accepted by an earlier process of the node,
   * whose nonces are gone: the verifier refuses it.
   */
  readonly since: number;

  /** An empty cache. */
  constructor(options: NonceCacheOptions) {
    const maxEntries = options.maxEntries ?? MAX_NONCES;
    if (!Number.isSafeInteger(maxEntries) || maxEntries < 1) {
      throw new RangeError(`a nonce cache needs room for at least one nonce, not ${maxEntries}`);
    }
    this.#clock = options.clock;
    this.#maxEntries = maxEntries;
    this.since = options.clock.now();
  }

  /**
   * Remembers `nonce` until the wall time `untilMs` has passed, unless it is
   * already remembered (`"seen"`) or the cache is full of nonces still kept
   * (`"full"`).
   */
  remember(nonce: string, untilMs: number): RememberResult {
    const now = this.#clock.now();
    if (!(untilMs >= now) || !Number.isFinite(untilMs)) {
      // The caller accepts only calls still valid now: anything else is a bug there.
      throw new RangeError(`a nonce kept until ${untilMs} is of no use at ${now}`);
    }
    this.#expire(now);
    if (this.#nonces.has(nonce)) {
      this.#seen++;
      return "seen";
    }
    if (this.#nonces.size >= this.#maxEntries) {
      this.#full++;
      return "full";
    }
    const end = Math.ceil(untilMs / NONCE_BUCKET_MS) * NONCE_BUCKET_MS;
    const bucket = this.#buckets.get(end);
    if (bucket) bucket.push(nonce);
    else this.#buckets.set(end, [nonce]);
    if (end < this.#nextEnd) this.#nextEnd = end;
    this.#nonces.add(nonce);
    this.#added++;
    return "added";
  }

  /** Nonces remembered now (those whose keeping ended are forgotten first). */
  get size(): number {
    this.#expire(this.#clock.now());
    return this.#nonces.size;
  }

  /** The counts since the cache was made. */
  stats(): NonceCacheStats {
    return {
      size: this.size,
      added: this.#added,
      seen: this.#seen,
      full: this.#full,
      expired: this.#expired,
    };
  }

  /** Drops every bucket whose end has passed; runs at most once per bucket end reached. */
  #expire(now: number): void {
    if (now <= this.#nextEnd) return;
    let nextEnd = Infinity;
    for (const [end, nonces] of this.#buckets) {
      if (end < now) {
        for (const nonce of nonces) this.#nonces.delete(nonce);
        this.#expired += nonces.length;
        this.#buckets.delete(end);
      } else if (end < nextEnd) nextEnd = end;
    }
    this.#nextEnd = nextEnd;
  }
}
