/**
 * The object store every node shares, as the cluster code sees it: whole
 * objects under string keys, conditional writes, and ordered listings. Three
 * stores implement it: {@linkcode S3Bucket}, {@linkcode FileBucket} and
 * {@linkcode MemoryBucket}.
 *
 * Keys are relative to the prefix of the bucket URL (`s3://BUCKET/PREFIX`), so
 * code never sees the prefix.
 *
 * @module
 */

export { BucketRequestError, BucketUnavailable, PreconditionFailed } from "./errors.ts";

/** An object's metadata, as `head` and listings return it. */
export interface ObjectInfo {
  /** The key, relative to the bucket's prefix. */
  key: string;
  /** The store's ETag, quoted as the store sends it; use it for `ifMatch`. */
  etag: string;
  /** Size of the body in bytes. */
  size: number;
  /** When the store last wrote the object, in ms since the epoch (the store's clock). */
  lastModified: number;
}

/** An object read whole. */
export interface StoredObject {
  /** The object's bytes. */
  body: Uint8Array;
  /** Its ETag, for a later `ifMatch`. */
  etag: string;
  /** When the store last wrote it, in ms since the epoch. */
  lastModified: number;
}

/** Options every call takes. */
export interface CallOptions {
  /** Abandons the call: it rejects with the signal's reason. */
  signal?: AbortSignal;
}

/**
 * Conditions of a write. At most one of them is given: `ifNoneMatch: "*"`
 * creates only if the key does not exist, `ifMatch` replaces only the object
 * with that ETag.
 */
export interface PutOptions extends CallOptions {
  /** Create only: refused with `PreconditionFailed` when the key exists. */
  ifNoneMatch?: "*";
  /** Replace only this version: refused when the current ETag differs or the key is missing. */
  ifMatch?: string;
}

/** Conditions of a delete. */
export interface DeleteOptions extends CallOptions {
  /** Delete only this version: refused when the current ETag differs or the key is missing. */
  ifMatch?: string;
}

/** Where a listing starts and how much of it one call returns. */
export interface ListOptions extends CallOptions {
  /** Only keys after this one (lexicographic, like S3's StartAfter). */
  startAfter?: string;
  /** Keys per page, 1 to {@linkcode MAX_KEYS_PER_PAGE} (the default). */
  maxKeys?: number;
  /** The `continuationToken` of the previous page. */
  continuationToken?: string;
}

/** One page of a listing. */
export interface ListPage {
  /** Objects in lexicographic key order. */
  objects: ObjectInfo[];
  /** Present when more keys follow: pass it back for the next page. */
  continuationToken?: string;
}

/** Most keys one listing page holds, as in S3. */
export const MAX_KEYS_PER_PAGE = 1000;

/**
 * An S3-compatible object store with conditional writes.
 *
 * @example Creating an object once, then replacing it
 * ```ts
 * import { type Bucket, PreconditionFailed } from "./bucket.ts";
 * declare const bucket: Bucket; // any store: S3, file or memory
 * const { etag } = await bucket.put("nodes/a", new Uint8Array([1]), { ifNoneMatch: "*" });
 * await bucket.put("nodes/a", new Uint8Array([2]), { ifMatch: etag });
 * try {
 *   await bucket.put("nodes/a", new Uint8Array([3]), { ifMatch: etag }); // stale
 * } catch (e) {
 *   console.log(e instanceof PreconditionFailed); // true
 * }
 * ```
 */
export interface Bucket {
  /** Reads a whole object, or `null` when the key does not exist. */
  get(key: string, options?: CallOptions): Promise<StoredObject | null>;
  /** Reads an object's metadata, or `null` when the key does not exist. */
  head(key: string, options?: CallOptions): Promise<ObjectInfo | null>;
  /** Writes a whole object; a refused condition throws `PreconditionFailed`. */
  put(key: string, body: Uint8Array, options?: PutOptions): Promise<{ etag: string }>;
  /** Deletes an object (a missing key is not an error unless `ifMatch` is given). */
  delete(key: string, options?: DeleteOptions): Promise<void>;
  /** Lists one page of the keys that start with `prefix`, in lexicographic order. */
  list(prefix: string, options?: ListOptions): Promise<ListPage>;
  /** Releases connections or handles the store holds. */
  close(): Promise<void>;
}

/**
 * Every object under `prefix` after `startAfter`, page by page.
 *
 * @example
 * ```ts
 * import { type Bucket, listAll } from "./bucket.ts";
 * declare const bucket: Bucket;
 * for await (const object of listAll(bucket, "nodes/")) console.log(object.key);
 * ```
 */
export async function* listAll(
  bucket: Bucket,
  prefix: string,
  startAfter?: string,
  options: CallOptions = {},
): AsyncGenerator<ObjectInfo> {
  let continuationToken: string | undefined;
  do {
    const page = await bucket.list(prefix, { ...options, startAfter, continuationToken });
    yield* page.objects;
    continuationToken = page.continuationToken;
  } while (continuationToken !== undefined);
}
