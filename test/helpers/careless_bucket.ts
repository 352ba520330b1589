/**
 * A store that ignores conditional writes, as some S3-compatible stores do:
 * what the start-up probe must refuse to run on.
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
} from "../../src/bucket/bucket.ts";
import { MemoryBucket } from "../../src/bucket/memory.ts";

/** Which conditions the careless store ignores. */
export interface CarelessOptions {
  /** Accept a create over an existing object; default true. */
  ignoreIfNoneMatch?: boolean;
  /** Accept a replace with a stale ETag; default true. */
  ignoreIfMatch?: boolean;
}

/**
 * A {@linkcode Bucket} in memory that drops the conditions it is told to.
 *
 * @example
 * ```ts
 * import { CarelessBucket } from "./careless_bucket.ts";
 * const bucket = new CarelessBucket({ ignoreIfMatch: false });
 * await bucket.put("k", new Uint8Array([1]), { ifNoneMatch: "*" });
 * await bucket.put("k", new Uint8Array([2]), { ifNoneMatch: "*" }); // accepted
 * ```
 */
export class CarelessBucket implements Bucket {
  readonly #inner = new MemoryBucket();
  readonly #ignoreIfNoneMatch: boolean;
  readonly #ignoreIfMatch: boolean;

  /** A careless store, ignoring both conditions unless told otherwise. */
  constructor(options: CarelessOptions = {}) {
    this.#ignoreIfNoneMatch = options.ignoreIfNoneMatch ?? true;
    this.#ignoreIfMatch = options.ignoreIfMatch ?? true;
  }

  /** Reads an object. */
  get(key: string, options?: CallOptions): Promise<StoredObject | null> {
    return this.#inner.get(key, options);
  }

  /** Reads an object's metadata. */
  head(key: string, options?: CallOptions): Promise<ObjectInfo | null> {
    return this.#inner.head(key, options);
  }

  /** Writes an object, dropping the ignored conditions. */
  put(key: string, body: Uint8Array, options: PutOptions = {}): Promise<{ etag: string }> {
    return this.#inner.put(key, body, {
      signal: options.signal,
      ifNoneMatch: this.#ignoreIfNoneMatch ? undefined : options.ifNoneMatch,
      ifMatch: this.#ignoreIfMatch ? undefined : options.ifMatch,
    });
  }

  /** Deletes an object, dropping an ignored `ifMatch`. */
  delete(key: string, options: DeleteOptions = {}): Promise<void> {
    return this.#inner.delete(key, {
      signal: options.signal,
      ifMatch: this.#ignoreIfMatch ? undefined : options.ifMatch,
    });
  }

  /** Lists one page. */
  list(prefix: string, options?: ListOptions): Promise<ListPage> {
    return this.#inner.list(prefix, options);
  }

  /** Nothing to release. */
  close(): Promise<void> {
    return this.#inner.close();
  }
}
