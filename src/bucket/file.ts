/**
 * The embedded store for `file://PATH`: one file per object under a
 * directory, safe to share between processes on one machine.
 *
 * - A conditional write holds across processes: the condition is checked and
 *   the object replaced under a per-key lock file created with O_EXCL, which
 *   a crashed holder cannot keep forever (stale after {@linkcode LOCK_STALE_MS}).
 * - A crash never leaves a torn object: the new content is written to a temp
 *   file and fsynced before an atomic rename puts it in place.
 * - ETags are content hashes (the first 128 bits of SHA-256, quoted), kept in
 *   a small header of each file so heads and listings need not hash bodies.
 *
 * Key `a/b` is the file `PATH/a/b.obj`, so `a` and `a/b` can both exist.
 *
 * @module
 */

import { type Clock, type Random, systemClock, systemRandom } from "../time/clock.ts";
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
import { pageSize, pageStart } from "./paging.ts";
import { randomHex } from "./random.ts";

/**
 * A key's lock older than this (10 s) belongs to a crashed process and is
 * broken. A holder keeps it only to compare an ETag and rename one file.
 *
 * @example
 * ```ts
 * import { LOCK_STALE_MS } from "./file.ts";
 * console.log(LOCK_STALE_MS); // 10000
 * ```
 */
export const LOCK_STALE_MS = 10_000;

/**
 * Longest a write waits for a key's lock (15 s: long enough to outlast a
 * stale lock) before it fails with `BucketUnavailable`.
 *
 * @example
 * ```ts
 * import { LOCK_WAIT_MS } from "./file.ts";
 * console.log(LOCK_WAIT_MS); // 15000
 * ```
 */
export const LOCK_WAIT_MS = 15_000;

/**
 * Longest pause between two tries of a busy lock (5 ms, jittered).
 *
 * @example
 * ```ts
 * import { LOCK_POLL_MS } from "./file.ts";
 * console.log(LOCK_POLL_MS); // 5
 * ```
 */
export const LOCK_POLL_MS = 5;

const OBJECT_SUFFIX = ".obj";
const LOCK_SUFFIX = ".lock";
const BREAK_SUFFIX = ".break";
const HEADER_TAG = "wk1 ";
const ETAG_HEX = 32;
/** `wk1 <32 hex>\n`: the ETag in front of the body. */
const HEADER_BYTES = HEADER_TAG.length + ETAG_HEX + 1;
/** Room left in a 255-byte file name for the suffixes. */
const MAX_SEGMENT_BYTES = 240;

/** How a {@linkcode FileBucket} is built. */
export interface FileBucketOptions {
  /** Times lock waits; the lock age compares file times with it, so keep it real. */
  clock?: Clock;
  /** Names temp files and jitters lock polls. */
  random?: Random;
}

/**
 * A {@linkcode Bucket} in a local directory.
 *
 * @example
 * ```ts
 * import { FileBucket } from "./file.ts";
 * const bucket = new FileBucket(await Deno.makeTempDir());
 * await bucket.put("nodes/a", new TextEncoder().encode("hello"), { ifNoneMatch: "*" });
 * ```
 */
export class FileBucket implements Bucket {
  readonly #root: string;
  readonly #clock: Clock;
  readonly #random: Random;

  /** A store rooted at `root` (created on first write). */
  constructor(root: string, options: FileBucketOptions = {}) {
    this.#root = root.replace(/\/+$/, "") || "/";
    this.#clock = options.clock ?? systemClock;
    this.#random = options.random ?? systemRandom;
  }

  /** Reads a whole object, or `null`. */
  async get(key: string, options: CallOptions = {}): Promise<StoredObject | null> {
    options.signal?.throwIfAborted();
    const path = this.#objectPath(key);
    const file = await openIfExists(path);
    if (!file) return null;
    try {
      const stat = await file.stat();
      const bytes = new Uint8Array(stat.size);
      const read = await readInto(file, bytes);
      const etag = parseHeader(bytes.subarray(0, read), path);
      return {
        body: bytes.slice(HEADER_BYTES, read),
        etag,
        lastModified: stat.mtime?.getTime() ?? 0,
      };
    } finally {
      file.close();
    }
  }

  /** Reads an object's metadata, or `null`. */
  head(key: string, options: CallOptions = {}): Promise<ObjectInfo | null> {
    options.signal?.throwIfAborted();
    return readInfo(this.#objectPath(key), key);
  }

  /** Writes an object; conditions are checked under the key's lock. */
  async put(key: string, body: Uint8Array, options: PutOptions = {}): Promise<{ etag: string }> {
    options.signal?.throwIfAborted();
    const path = this.#objectPath(key);
    const etag = await contentEtag(body);
    await Deno.mkdir(dirname(path), { recursive: true });
    const temp = `${path}.tmp-${randomHex(this.#random, 8)}`;
    try {
      await writeDurably(temp, etag, body);
      // Unconditional writes lock too, or one could land between another's check and rename.
      const unlock = await this.#lock(path, options.signal);
      try {
        if (options.ifNoneMatch !== undefined || options.ifMatch !== undefined) {
          const current = await readInfo(path, key);
          if (options.ifNoneMatch === "*" && current) {
            throw new PreconditionFailed(key, "ifNoneMatch");
          }
          if (options.ifMatch !== undefined && current?.etag !== options.ifMatch) {
            throw new PreconditionFailed(key, "ifMatch");
          }
        }
        await Deno.rename(temp, path);
        await syncDir(dirname(path));
      } finally {
        await unlock();
      }
    } finally {
      await Deno.remove(temp).catch(() => {});
    }
    return { etag: quote(etag) };
  }

  /** Deletes an object; with `ifMatch`, only that version. */
  async delete(key: string, options: DeleteOptions = {}): Promise<void> {
    options.signal?.throwIfAborted();
    const path = this.#objectPath(key);
    let unlock: () => Promise<void>;
    try {
      unlock = await this.#lock(path, options.signal);
    } catch (e) {
      // No directory for the key's lock: no object either.
      if (!(e instanceof Deno.errors.NotFound)) throw e;
      if (options.ifMatch !== undefined) throw new PreconditionFailed(key, "ifMatch");
      return;
    }
    try {
      if (options.ifMatch !== undefined) {
        const current = await readInfo(path, key);
        if (current?.etag !== options.ifMatch) throw new PreconditionFailed(key, "ifMatch");
      }
      try {
        await Deno.remove(path);
      } catch (e) {
        if (!(e instanceof Deno.errors.NotFound)) throw e;
        return;
      }
      await syncDir(dirname(path));
    } finally {
      await unlock();
    }
  }

  /** Lists one page in lexicographic key order. */
  async list(prefix: string, options: ListOptions = {}): Promise<ListPage> {
    options.signal?.throwIfAborted();
    const size = pageSize(options.maxKeys);
    const start = pageStart(options);
    const slash = prefix.lastIndexOf("/");
    const dirKey = prefix.slice(0, slash + 1);
    const dirSegments = dirKey.split("/").slice(0, -1);
    if (!dirSegments.every(validSegment)) return { objects: [] };
    const keys: string[] = [];
    for await (const key of walk(this.#dirPath(dirSegments), dirKey, prefix, start)) {
      keys.push(key);
      if (keys.length > size) break;
    }
    const more = keys.length > size;
    if (more) keys.pop();
    const objects: ObjectInfo[] = [];
    for (const key of keys) {
      // A key deleted since the walk saw it is left out, as S3 would.
      const info = await readInfo(this.#objectPath(key), key);
      if (info) objects.push(info);
    }
    return { objects, continuationToken: more ? keys[keys.length - 1] : undefined };
  }

  /** Nothing to release: files are opened per call. */
  close(): Promise<void> {
    return Promise.resolve();
  }

  #objectPath(key: string): string {
    const segments = key.split("/");
    if (key === "" || !segments.every(validSegment)) {
      throw new TypeError(`not a valid key for a file bucket: ${JSON.stringify(key)}`);
    }
    return `${this.#dirPath(segments.slice(0, -1))}/${segments.at(-1)}${OBJECT_SUFFIX}`;
  }

  #dirPath(segments: string[]): string {
    return [this.#root, ...segments].join("/");
  }

  /** Takes the lock of the object at `path`; resolves to its release. */
  async #lock(path: string, signal?: AbortSignal): Promise<() => Promise<void>> {
    const lockPath = path + LOCK_SUFFIX;
    const startedAt = this.#clock.monotonic();
    while (true) {
      try {
        const file = await Deno.open(lockPath, { createNew: true, write: true });
        try {
          await file.write(new TextEncoder().encode(`${Deno.pid}\n`));
        } finally {
          file.close();
        }
        return () => Deno.remove(lockPath).catch(() => {});
      } catch (e) {
        if (!(e instanceof Deno.errors.AlreadyExists)) throw e;
      }
      const held = await Deno.stat(lockPath).catch(() => null);
      if (held && this.#clock.now() - (held.mtime?.getTime() ?? 0) >= LOCK_STALE_MS) {
        await this.#breakStaleLock(lockPath, held);
        continue;
      }
      if (this.#clock.monotonic() - startedAt >= LOCK_WAIT_MS) {
        throw new BucketUnavailable(`${lockPath}: lock still held after ${LOCK_WAIT_MS} ms`, {
          ambiguous: false,
        });
      }
      await this.#clock.sleep(1 + this.#random.next() * LOCK_POLL_MS, signal);
    }
  }

  /**
   * Removes a lock a crashed process left. Breakers take a lock of their
   * own first, so two of them cannot both see the stale lock, one remove it
   * and the other remove the fresh lock taken in between.
   */
  async #breakStaleLock(lockPath: string, seen: Deno.FileInfo): Promise<void> {
    const breakPath = lockPath + BREAK_SUFFIX;
    try {
      (await Deno.open(breakPath, { createNew: true, write: true })).close();
    } catch (e) {
      if (!(e instanceof Deno.errors.AlreadyExists)) throw e;
      const breaker = await Deno.stat(breakPath).catch(() => null);
      // A breaker holds its lock for two file operations; an old one crashed.
      if (breaker && this.#clock.now() - (breaker.mtime?.getTime() ?? 0) >= LOCK_STALE_MS) {
        await Deno.remove(breakPath).catch(() => {});
      }
      return;
    }
    try {
      const now = await Deno.stat(lockPath).catch(() => null);
      if (now && now.ino === seen.ino && now.mtime?.getTime() === seen.mtime?.getTime()) {
        await Deno.remove(lockPath).catch(() => {});
      }
    } finally {
      await Deno.remove(breakPath).catch(() => {});
    }
  }
}

/**
 * One directory's keys with `prefix` after `start`, in lexicographic order,
 * and its subdirectories' in place: a file `x.obj` sorts as `x`, a directory
 * `x` as `x/`, which is where all its keys sort.
 */
async function* walk(
  dir: string,
  dirKey: string,
  prefix: string,
  start: string,
): AsyncGenerator<string> {
  const entries: { key: string; isDir: boolean; name: string }[] = [];
  try {
    for await (const entry of Deno.readDir(dir)) {
      if (entry.isDirectory) {
        entries.push({ key: `${dirKey}${entry.name}/`, isDir: true, name: entry.name });
      } else if (entry.isFile && entry.name.endsWith(OBJECT_SUFFIX)) {
        const key = dirKey + entry.name.slice(0, -OBJECT_SUFFIX.length);
        entries.push({ key, isDir: false, name: entry.name });
      }
    }
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return;
    throw e;
  }
  entries.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  for (const entry of entries) {
    if (!entry.isDir) {
      if (entry.key > start && entry.key.startsWith(prefix)) yield entry.key;
      continue;
    }
    const inPrefix = entry.key.startsWith(prefix) || prefix.startsWith(entry.key);
    // Otherwise every key under this directory sorts before `start`.
    const afterStart = entry.key > start || start.startsWith(entry.key);
    if (inPrefix && afterStart) yield* walk(`${dir}/${entry.name}`, entry.key, prefix, start);
  }
}

function validSegment(segment: string): boolean {
  return segment !== "" && segment !== "." && segment !== ".." && !segment.includes("\0") &&
    new TextEncoder().encode(segment).length <= MAX_SEGMENT_BYTES;
}

/** Opens `path` for reading, or `null` when there is no such file. */
async function openIfExists(path: string): Promise<Deno.FsFile | null> {
  try {
    return await Deno.open(path, { read: true });
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return null;
    throw e;
  }
}

/** Reads until `bytes` is full or the file ends; returns how much was read. */
async function readInto(file: Deno.FsFile, bytes: Uint8Array): Promise<number> {
  let read = 0;
  while (read < bytes.length) {
    const n = await file.read(bytes.subarray(read));
    if (n === null) break;
    read += n;
  }
  return read;
}

async function readInfo(path: string, key: string): Promise<ObjectInfo | null> {
  const file = await openIfExists(path);
  if (!file) return null;
  try {
    const stat = await file.stat();
    const header = new Uint8Array(HEADER_BYTES);
    const read = await readInto(file, header);
    return {
      key,
      etag: parseHeader(header.subarray(0, read), path),
      size: stat.size - HEADER_BYTES,
      lastModified: stat.mtime?.getTime() ?? 0,
    };
  } finally {
    file.close();
  }
}

function parseHeader(bytes: Uint8Array, path: string): string {
  const text = new TextDecoder().decode(bytes.subarray(0, HEADER_BYTES));
  if (text.length !== HEADER_BYTES || !text.startsWith(HEADER_TAG) || !text.endsWith("\n")) {
    throw new Error(`${path}: not an object file of a file bucket (bad header)`);
  }
  return quote(text.slice(HEADER_TAG.length, -1));
}

async function writeDurably(path: string, etag: string, body: Uint8Array): Promise<void> {
  const file = await Deno.open(path, { createNew: true, write: true });
  try {
    const bytes = new Uint8Array(HEADER_BYTES + body.length);
    bytes.set(new TextEncoder().encode(`${HEADER_TAG}${etag}\n`));
    bytes.set(body, HEADER_BYTES);
    let written = 0;
    while (written < bytes.length) written += await file.write(bytes.subarray(written));
    await file.sync();
  } finally {
    file.close();
  }
}

/** Makes a rename or removal in `dir` survive a crash. */
async function syncDir(dir: string): Promise<void> {
  const handle = await Deno.open(dir, { read: true });
  try {
    await handle.sync();
  } finally {
    handle.close();
  }
}

async function contentEtag(body: Uint8Array): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", body as BufferSource));
  return Array.from(digest.subarray(0, ETAG_HEX / 2), (b) => b.toString(16).padStart(2, "0"))
    .join("");
}

function quote(etag: string): string {
  return `"${etag}"`;
}

function dirname(path: string): string {
  return path.slice(0, path.lastIndexOf("/")) || "/";
}
