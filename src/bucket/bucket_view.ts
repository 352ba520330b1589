/**
 * One pass-through {@linkcode Bucket} with hooks: every call goes on to the
 * bucket it wraps, and hooks see it before and after, to count it, delay
 * it, fail it, hold it forever or rewrite it. The request counter
 * (counted.ts), the simulator's views of a process's bucket and the tests'
 * spies are each a few hooks on it, not a class that forwards six methods.
 * A subclass with state of its own overrides {@linkcode BucketView.beforeCall}
 * and {@linkcode BucketView.afterCall} instead of passing hooks; what hooks cannot type (an answer rewritten) it
 * does by overriding one method and calling `super`.
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
} from "./bucket.ts";

/** One call of a bucket (`key` is a listing's prefix). */
export type BucketCall =
  | { op: "get"; key: string; options?: CallOptions }
  | { op: "head"; key: string; options?: CallOptions }
  | { op: "put"; key: string; body: Uint8Array; options?: PutOptions }
  | { op: "delete"; key: string; options?: DeleteOptions }
  | { op: "list"; key: string; options?: ListOptions };

/** How a call ended: the bucket's answer, or its error. */
export type BucketOutcome = { answer: unknown } | { error: unknown };

/** What a {@linkcode BucketView} does around each call of the bucket it wraps. */
export interface BucketHooks {
  /**
   * Before a call goes on. Returns nothing to send it as it is, or the call
   * rewritten (the same `op`: another key, other options); throws or
   * rejects to fail it; a promise delays it until it settles (one that
   * never settles holds the call forever). A hook that returns nothing
   * synchronously adds no wait: the call goes on at once.
   */
  before?(call: BucketCall): BucketCall | void | Promise<BucketCall | void>;
  /** After the bucket answered or failed the call (as sent); it keeps its answer or error. */
  after?(call: BucketCall, outcome: BucketOutcome): void;
  /** What `close` does instead of closing the wrapped bucket. */
  close?(): Promise<void>;
}

/**
 * `inner`, seen through `hooks`.
 *
 * @example Counting calls, failing one key, and slowing writes
 * ```ts
 * import { BucketView } from "./bucket_view.ts";
 * import { MemoryBucket } from "./memory.ts";
 * const calls: string[] = [];
 * const bucket = new BucketView(new MemoryBucket(), {
 *   before: async (call) => {
 *     calls.push(`${call.op} ${call.key}`);
 *     if (call.key === "broken") throw new Error("refused");
 *     if (call.op === "put") await new Promise((resolve) => setTimeout(resolve, 1));
 *   },
 * });
 * await bucket.put("a", new Uint8Array([1]));
 * await bucket.get("broken").catch((e) => console.log(e.message)); // refused
 * console.log(calls); // ["put a", "get broken"]
 * ```
 *
 * @example Rewriting a call
 * ```ts
 * import { BucketView } from "./bucket_view.ts";
 * import { MemoryBucket } from "./memory.ts";
 * const inner = new MemoryBucket();
 * const prefixed = new BucketView(inner, { before: (call) => ({ ...call, key: `p/${call.key}` }) });
 * await prefixed.put("a", new Uint8Array([1]));
 * console.log((await inner.list("")).objects.map((o) => o.key)); // ["p/a"]
 * ```
 */
export class BucketView implements Bucket {
  readonly #hooks: BucketHooks;

  constructor(readonly inner: Bucket, hooks: BucketHooks = {}) {
    this.#hooks = hooks;
  }

  get(key: string, options?: CallOptions): Promise<StoredObject | null> {
    return this.#call({ op: "get", key, options }) as Promise<StoredObject | null>;
  }

  head(key: string, options?: CallOptions): Promise<ObjectInfo | null> {
    return this.#call({ op: "head", key, options }) as Promise<ObjectInfo | null>;
  }

  put(key: string, body: Uint8Array, options?: PutOptions): Promise<{ etag: string }> {
    return this.#call({ op: "put", key, body, options }) as Promise<{ etag: string }>;
  }

  delete(key: string, options?: DeleteOptions): Promise<void> {
    return this.#call({ op: "delete", key, options }) as Promise<void>;
  }

  list(prefix: string, options?: ListOptions): Promise<ListPage> {
    return this.#call({ op: "list", key: prefix, options }) as Promise<ListPage>;
  }

  close(): Promise<void> {
    return this.#hooks.close ? this.#hooks.close() : this.inner.close();
  }

  /** Runs before each call, as {@linkcode BucketHooks.before}: by default the hook given. */
  protected beforeCall(call: BucketCall): BucketCall | void | Promise<BucketCall | void> {
    return this.#hooks.before?.(call);
  }

  /** Runs after each call, as {@linkcode BucketHooks.after}: by default the hook given. */
  protected afterCall(call: BucketCall, outcome: BucketOutcome): void {
    this.#hooks.after?.(call, outcome);
  }

  #call(call: BucketCall): Promise<unknown> {
    let before: BucketCall | void | Promise<BucketCall | void>;
    try {
      before = this.beforeCall(call);
    } catch (error) {
      return Promise.reject(error);
    }
    if (before instanceof Promise) return before.then((sent) => this.#send(sent ?? call));
    return this.#send(before ?? call);
  }

  #send(call: BucketCall): Promise<unknown> {
    const answer = this.#pass(call);
    // Without anything to run after it, the answer is the wrapped bucket's own.
    if (!this.#hooks.after && this.afterCall === BucketView.prototype.afterCall) return answer;
    return answer.then((value) => {
      this.afterCall(call, { answer: value });
      return value;
    }, (error) => {
      this.afterCall(call, { error });
      throw error;
    });
  }

  #pass(call: BucketCall): Promise<unknown> {
    switch (call.op) {
      case "get":
        return this.inner.get(call.key, call.options);
      case "head":
        return this.inner.head(call.key, call.options);
      case "put":
        return this.inner.put(call.key, call.body, call.options);
      case "delete":
        return this.inner.delete(call.key, call.options);
      case "list":
        return this.inner.list(call.key, call.options);
    }
  }
}
