/**
 * A bucket in memory, for tests and the simulator, that can misbehave the way
 * real stores do: latency, error answers, silence, writes applied whose answer
 * is lost, outages and slow listings. Every fault is drawn from a seeded
 * {@linkcode Random} and every wait is on the {@linkcode Clock}, so one seed
 * replays one run.
 *
 * @module
 */

import { type Clock, type Random, systemClock } from "../time/clock.ts";
import type {
  Bucket,
  CallOptions,
  DeleteOptions,
  ListOptions,
  ListPage,
  ObjectInfo,
  PutOptions,
  StoredObject,
} from "./bucket.ts";
import { BucketUnavailable, PreconditionFailed } from "./errors.ts";
import { pageOf } from "./paging.ts";
import { seededRandom } from "./random.ts";
import { REQUEST_TIMEOUT_MS } from "./bounds.ts";

/** A span of clock time, `from` included, `until` excluded (ms since the epoch). */
export interface TimeWindow {
  /** First instant of the window. */
  from: number;
  /** First instant after it. */
  until: number;
}

/**
 * What goes wrong, and how often. Rates are probabilities per call, drawn
 * once per call in call order.
 */
export interface MemoryFaults {
  /** Each call waits a duration drawn between `min` and `max` ms before it reaches the store. */
  latencyMs?: { min: number; max: number };
  /** Share of calls answered with an error (nothing applied). */
  errorRate?: number;
  /** Statuses those errors carry, one drawn per error; default 500, 503 and 429. */
  errorStatuses?: number[];
  /** Share of calls never answered (nothing applied) until the request timeout or the caller's signal. */
  timeoutRate?: number;
  /** Share of writes (put, delete) applied whose answer is lost: the call fails as a broken connection. */
  lostAnswerRate?: number;
  /** While the clock is in one of these windows, every call fails without reaching the store. */
  outages?: TimeWindow[];
  /** Extra wait of every listing page, in ms. */
  listDelayMs?: number;
}

/** How a {@linkcode MemoryBucket} is built. */
export interface MemoryBucketOptions {
  /** Times waits and stamps `lastModified`; default the system clock. */
  clock?: Clock;
  /** Seed of the faults' random draws; default 1. */
  seed?: number;
  /** Source of the faults' draws, instead of `seed`. */
  random?: Random;
  /** Faults from the start; change them later through `faults`. */
  faults?: MemoryFaults;
  /** How long a silent call waits before it fails; default {@linkcode REQUEST_TIMEOUT_MS}. */
  requestTimeoutMs?: number;
}

interface Entry {
  body: Uint8Array;
  etag: string;
  lastModified: number;
}

const DEFAULT_ERROR_STATUSES = [500, 503, 429];

/**
 * An in-memory {@linkcode Bucket} with seeded fault injection.
 *
 * @example Half the calls fail with a 503, the same ones for the same seed
 * ```ts
 * import { MemoryBucket } from "./memory.ts";
 * const bucket = new MemoryBucket({ seed: 42, faults: { errorRate: 0.5, errorStatuses: [503] } });
 * await bucket.put("k", new Uint8Array([1])).catch((e) => console.log(e.name));
 * ```
 */
export class MemoryBucket implements Bucket {
  /** The faults in force; assign to change them mid-run. */
  faults: MemoryFaults;
  readonly #objects = new Map<string, Entry>();
  readonly #clock: Clock;
  readonly #random: Random;
  readonly #requestTimeoutMs: number;

  /** An empty bucket. */
  constructor(options: MemoryBucketOptions = {}) {
    this.#clock = options.clock ?? systemClock;
    this.#random = options.random ?? seededRandom(options.seed ?? 1);
    this.faults = options.faults ?? {};
    this.#requestTimeoutMs = options.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
  }

  /** Reads a whole object, or `null`. */
  async get(key: string, options: CallOptions = {}): Promise<StoredObject | null> {
    await this.#arrive("GET", key, false, options.signal);
    const entry = this.#objects.get(key);
    return entry
      ? { body: entry.body.slice(), etag: entry.etag, lastModified: entry.lastModified }
      : null;
  }

  /** Reads an object's metadata, or `null`. */
  async head(key: string, options: CallOptions = {}): Promise<ObjectInfo | null> {
    await this.#arrive("HEAD", key, false, options.signal);
    const entry = this.#objects.get(key);
    return entry ? info(key, entry) : null;
  }

  /** Writes an object, honouring `ifNoneMatch` and `ifMatch`. */
  async put(key: string, body: Uint8Array, options: PutOptions = {}): Promise<{ etag: string }> {
    const loseAnswer = await this.#arrive("PUT", key, true, options.signal);
    const current = this.#objects.get(key);
    if (options.ifNoneMatch === "*" && current) throw new PreconditionFailed(key, "ifNoneMatch");
    if (options.ifMatch !== undefined && current?.etag !== options.ifMatch) {
      throw new PreconditionFailed(key, "ifMatch");
    }
    const entry = { body: body.slice(), etag: contentEtag(body), lastModified: this.#clock.now() };
    this.#objects.set(key, entry);
    if (loseAnswer) throw lostAnswer("PUT", key);
    return { etag: entry.etag };
  }

  /** Deletes an object; with `ifMatch`, only that version. */
  async delete(key: string, options: DeleteOptions = {}): Promise<void> {
    const loseAnswer = await this.#arrive("DELETE", key, true, options.signal);
    if (options.ifMatch !== undefined && this.#objects.get(key)?.etag !== options.ifMatch) {
      throw new PreconditionFailed(key, "ifMatch");
    }
    this.#objects.delete(key);
    if (loseAnswer) throw lostAnswer("DELETE", key);
  }

  /** Lists one page in lexicographic order. */
  async list(prefix: string, options: ListOptions = {}): Promise<ListPage> {
    await this.#arrive("LIST", prefix, false, options.signal);
    if (this.faults.listDelayMs) await this.#clock.sleep(this.faults.listDelayMs, options.signal);
    const keys = [...this.#objects.keys()].filter((k) => k.startsWith(prefix)).sort(compareKeys);
    const page = pageOf(keys, options);
    return {
      objects: page.keys.map((k) => info(k, this.#objects.get(k)!)),
      continuationToken: page.continuationToken,
    };
  }

  /** Nothing to release. */
  close(): Promise<void> {
    return Promise.resolve();
  }

  /**
   * Plays the faults of one call up to the moment it reaches the store.
   * Resolves to whether the answer of a write that will be applied is lost.
   */
  async #arrive(op: string, key: string, write: boolean, signal?: AbortSignal): Promise<boolean> {
    signal?.throwIfAborted();
    const faults = this.faults;
    // Draws happen before any wait, in call order, so concurrent calls stay reproducible.
    const latency = faults.latencyMs
      ? faults.latencyMs.min + this.#random.next() * (faults.latencyMs.max - faults.latencyMs.min)
      : 0;
    const draw = this.#random.next();
    const errorRate = faults.errorRate ?? 0;
    const timeoutRate = faults.timeoutRate ?? 0;
    const lostRate = write ? faults.lostAnswerRate ?? 0 : 0;
    const statuses = faults.errorStatuses ?? DEFAULT_ERROR_STATUSES;
    const status = draw < errorRate
      ? statuses[Math.floor(this.#random.next() * statuses.length)]
      : 0;

    if (latency > 0) await this.#clock.sleep(latency, signal);
    const now = this.#clock.now();
    if (faults.outages?.some((w) => now >= w.from && now < w.until)) {
      throw new BucketUnavailable(`${op} ${key}: the store cannot be reached (outage)`, {
        ambiguous: false,
      });
    }
    if (status) {
      throw new BucketUnavailable(`${op} ${key}: ${status} (injected)`, {
        ambiguous: false,
        status,
      });
    }
    if (draw < errorRate + timeoutRate) {
      await this.#clock.sleep(this.#requestTimeoutMs, signal);
      throw new BucketUnavailable(`${op} ${key}: no answer in ${this.#requestTimeoutMs} ms`, {
        ambiguous: write,
      });
    }
    return draw < errorRate + timeoutRate + lostRate;
  }
}

/** Code-unit order, the order S3 lists keys in for ASCII keys. */
function compareKeys(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function info(key: string, entry: Entry): ObjectInfo {
  return { key, etag: entry.etag, size: entry.body.length, lastModified: entry.lastModified };
}

function lostAnswer(op: string, key: string): BucketUnavailable {
  return new BucketUnavailable(`${op} ${key}: the connection broke before the answer (injected)`, {
    ambiguous: true,
  });
}

/**
 * A content-hash ETag computed synchronously (two FNV-1a lanes), so ETags do
 * not depend on an async digest's timing in a simulation.
 */
function contentEtag(body: Uint8Array): string {
  let a = 0x811c9dc5, b = 0x050c5d1f;
  for (const byte of body) {
    a = Math.imul(a ^ byte, 0x01000193);
    b = Math.imul(b ^ byte ^ (a >>> 24), 0x01000193);
  }
  const hex = (n: number) => (n >>> 0).toString(16).padStart(8, "0");
  return `"${hex(a)}${hex(b)}-${body.length.toString(16)}"`;
}
