/**
 * The bucket of a simulated cluster: one {@linkcode MemoryBucket} on true
 * time with its seeded faults, which tells the simulator about every write it
 * applied (for the invariants), and, for each process, a view of it that adds
 * what lies between that process and the store: the answer's way back (its
 * latency, delivered as an event of the process, so a paused process gets it
 * on resume and a crashed one never), and partitions of that one machine.
 *
 * @module
 */

import type {
  Bucket,
  CallOptions,
  DeleteOptions,
  ListOptions,
  ListPage,
  ObjectInfo,
  PutOptions,
  StoredObject,
} from "../src/bucket/bucket.ts";
import { BucketUnavailable } from "../src/bucket/errors.ts";
import { MemoryBucket, type MemoryBucketOptions } from "../src/bucket/memory.ts";
import { REQUEST_TIMEOUT_MS } from "../src/bucket/bounds.ts";
import type { Random } from "../src/time/clock.ts";
import type { Owner, Scheduler } from "./scheduler.ts";

/** What the simulator learns of each write the store applied. */
export type AppliedListener = (key: string, body: Uint8Array | null, writer: string) => void;

/**
 * A {@linkcode MemoryBucket} that reports every write it applied, also those
 * whose answer it lost, and keeps a copy of what it holds (the shadow) that
 * the simulator reads without a bucket call.
 */
export class ObservedBucket extends MemoryBucket {
  /** Applied writes, as the store holds them: key → body. */
  readonly shadow = new Map<string, Uint8Array>();
  onApplied: AppliedListener = () => {};

  constructor(options: MemoryBucketOptions) {
    super(options);
  }

  /** A put, reported once applied; `writer` names the process for the trace. */
  async putAs(
    writer: string,
    key: string,
    body: Uint8Array,
    options: PutOptions = {},
  ): Promise<{ etag: string }> {
    let applied = false;
    try {
      const answer = await super.put(key, body, options);
      applied = true;
      return answer;
    } catch (e) {
      applied = isLostAnswer(e);
      throw e;
    } finally {
      if (applied) {
        this.shadow.set(key, body.slice());
        this.onApplied(key, body, writer);
      }
    }
  }

  /** A delete, reported once applied. */
  async deleteAs(writer: string, key: string, options: DeleteOptions = {}): Promise<void> {
    let applied = false;
    try {
      await super.delete(key, options);
      applied = true;
    } catch (e) {
      applied = isLostAnswer(e);
      throw e;
    } finally {
      if (applied) {
        this.shadow.delete(key);
        this.onApplied(key, null, writer);
      }
    }
  }

  override put(key: string, body: Uint8Array, options?: PutOptions): Promise<{ etag: string }> {
    return this.putAs("?", key, body, options);
  }

  override delete(key: string, options?: DeleteOptions): Promise<void> {
    return this.deleteAs("?", key, options);
  }
}

/**
 * Whether a MemoryBucket write failed after it was applied: the one failure
 * it injects after applying is the lost answer (`lostAnswerRate`), a
 * "connection broke before the answer". (The silent call it injects is
 * ambiguous too, but nothing was applied.) `test/sim/sim_test.ts` checks
 * this reading of MemoryBucket against its behaviour.
 */
export function isLostAnswer(e: unknown): boolean {
  return e instanceof BucketUnavailable && e.ambiguous &&
    e.message.includes("the connection broke before the answer");
}

/** Where one machine stands with the bucket. */
export interface Reachability {
  /** The machine is cut off from the bucket now: calls fail ("refuse") or go unanswered ("silent"). */
  partition(): "refuse" | "silent" | undefined;
  /** Latency of an answer's way back, ms, drawn per call. */
  answerLatencyMs(): number;
  /**
   * For an upload of an actor's history (`actors/…`): after how long the
   * store applies it while its sender hears nothing (a store that took the
   * body and commits it after the client gave up), or `undefined` for a
   * write that goes as usual. Drawn per call.
   */
  lateWriteMs?(key: string): number | undefined;
}

/** Transforms a process's writes (for the deliberately broken variants). */
export type PutFilter = (key: string, options: PutOptions) => PutOptions;

/** The bucket as one process sees it. */
export class ProcessBucket implements Bucket {
  readonly #store: ObservedBucket;
  readonly #scheduler: Scheduler;
  readonly #owner: Owner;
  readonly #name: string;
  readonly #net: Reachability;
  readonly #filter: PutFilter | undefined;
  readonly #onPut: ((key: string, body: Uint8Array) => void) | undefined;

  constructor(
    store: ObservedBucket,
    scheduler: Scheduler,
    owner: Owner,
    name: string,
    net: Reachability,
    filter?: PutFilter,
    onPut?: (key: string, body: Uint8Array) => void,
  ) {
    this.#store = store;
    this.#scheduler = scheduler;
    this.#owner = owner;
    this.#name = name;
    this.#net = net;
    this.#filter = filter;
    this.#onPut = onPut;
  }

  get(key: string, options: CallOptions = {}): Promise<StoredObject | null> {
    return this.#call("GET", key, false, options.signal, () => this.#store.get(key, options));
  }

  head(key: string, options: CallOptions = {}): Promise<ObjectInfo | null> {
    return this.#call("HEAD", key, false, options.signal, () => this.#store.head(key, options));
  }

  put(key: string, body: Uint8Array, options: PutOptions = {}): Promise<{ etag: string }> {
    const sent = this.#filter ? this.#filter(key, options) : options;
    this.#onPut?.(key, body);
    return this.#call(
      "PUT",
      key,
      true,
      options.signal,
      (signal) => this.#store.putAs(this.#name, key, body, { ...sent, signal }),
    );
  }

  delete(key: string, options: DeleteOptions = {}): Promise<void> {
    return this.#call(
      "DELETE",
      key,
      true,
      options.signal,
      (signal) => this.#store.deleteAs(this.#name, key, { ...options, signal }),
    );
  }

  list(prefix: string, options: ListOptions = {}): Promise<ListPage> {
    return this.#call(
      "LIST",
      prefix,
      false,
      options.signal,
      () => this.#store.list(prefix, options),
    );
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  async #call<T>(
    op: string,
    key: string,
    write: boolean,
    signal: AbortSignal | undefined,
    call: (signal: AbortSignal | undefined) => Promise<T>,
  ): Promise<T> {
    signal?.throwIfAborted();
    const cut = this.#net.partition();
    if (cut === "refuse") {
      await this.#answer(1, signal);
      throw new BucketUnavailable(`${op} ${key}: connection refused (partition)`, {
        ambiguous: false,
      });
    }
    if (cut === "silent") {
      // Nothing reaches the store; the client gives up at its request timeout.
      await this.#answer(REQUEST_TIMEOUT_MS, signal);
      throw new BucketUnavailable(
        `${op} ${key}: no answer in ${REQUEST_TIMEOUT_MS} ms (partition)`,
        {
          ambiguous: false,
        },
      );
    }
    const late = write ? this.#net.lateWriteMs?.(key) : undefined;
    if (late !== undefined) {
      // Applied later, whatever the sender does meanwhile; the sender hears
      // nothing and gives up at its deadline, or at the request timeout.
      this.#scheduler.after(late, () => void call(undefined).catch(() => {}));
      await this.#answer(REQUEST_TIMEOUT_MS, signal);
      throw new BucketUnavailable(`${op} ${key}: no answer in ${REQUEST_TIMEOUT_MS} ms`, {
        ambiguous: true,
      });
    }
    let ok = false;
    let value: T | undefined;
    let error: unknown;
    try {
      value = await call(signal);
      ok = true;
    } catch (e) {
      error = e;
    }
    await this.#answer(this.#net.answerLatencyMs(), signal);
    if (this.#net.partition() !== undefined) {
      // The answer was on its way when the machine was cut off: lost.
      throw new BucketUnavailable(`${op} ${key}: the answer was lost (partition)`, {
        ambiguous: write,
      });
    }
    if (ok) return value as T;
    throw error;
  }

  /** Waits `ms` as an event of the process, or rejects when `signal` aborts first. */
  #answer(ms: number, signal: AbortSignal | undefined): Promise<void> {
    return new Promise((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      const onAbort = () => {
        this.#scheduler.cancel(event);
        reject(signal?.reason);
      };
      const event = this.#scheduler.after(ms, () => {
        signal?.removeEventListener("abort", onAbort);
        resolve();
      }, this.#owner);
      signal?.addEventListener("abort", onAbort, { once: true });
    });
  }
}

/** Draws from `random` between `min` and `max`. */
export function between(random: Random, min: number, max: number): number {
  return min + random.next() * (max - min);
}
