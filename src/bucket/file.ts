/**
 * The embedded store for `file://PATH`: one file per object under a
 * directory, safe to share between processes on one machine.
 *
 * - A conditional write holds across processes: the condition is checked and
 *   the object replaced under a per-key lock file created with O_EXCL, which
 *   a crashed holder cannot keep forever (file_lock.ts).
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
import { PreconditionFailed } from "./errors.ts";
import { LOCK_SUFFIX, type LockContext, takeLock } from "./file_lock.ts";
import { pageSize, pageStart } from "./paging.ts";
import { randomHex } from "./random.ts";

const OBJECT_SUFFIX = ".obj";
/** Between an object file's name and its writer's process id, in a temp file's name. */
export const TEMP_INFIX = ".tmp-";
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
 * A `file://` bucket whose folder had to exist and does not: a command that
 * reads a cluster's bucket, given a typo, says so instead of reading an
 * empty bucket.
 *
 * @example
 * ```ts
 * import { FileBucketMissing } from "./file.ts";
 * new FileBucketMissing("/no/such/dir").message;
 * ```
 */
export class FileBucketMissing extends Error {
  override name = "FileBucketMissing";

  /** `root` is the bucket's folder. */
  constructor(readonly root: string) {
    super(
      `the file bucket's folder ${root} does not exist (a file bucket is made by the first node or deploy that writes to it)`,
    );
  }
}

/**
 * Throws {@linkcode FileBucketMissing} if `root` does not exist. Anything
 * else wrong with it (a file there) is left to the bucket's calls to say.
 *
 * @example
 * ```ts
 * import { requireFileBucketFolder } from "./file.ts";
 * requireFileBucketFolder(await Deno.makeTempDir());
 * ```
 */
export function requireFileBucketFolder(root: string): void {
  try {
    Deno.statSync(root);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) throw new FileBucketMissing(root);
    throw error;
  }
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
  readonly #lockContext: LockContext;

  /** A store rooted at `root` (created on first write). */
  constructor(root: string, options: FileBucketOptions = {}) {
    this.#root = root.replace(/\/+$/, "") || "/";
    this.#clock = options.clock ?? systemClock;
    this.#random = options.random ?? systemRandom;
    this.#lockContext = { clock: this.#clock, random: this.#random };
  }

  /** The folder the objects are in. */
  get root(): string {
    return this.#root;
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
    const temp = tempPath(path, this.#random);
    try {
      await writeDurably(temp, etag, body);
      // Unconditional writes lock too, or one could land between another's check and rename.
      const unlock = await takeLock(path + LOCK_SUFFIX, this.#lockContext, options.signal);
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
      unlock = await takeLock(path + LOCK_SUFFIX, this.#lockContext, options.signal);
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

/**
 * Where an object's new content is written before its rename: beside it,
 * named after the writing process, so that a node starting after a crash
 * can tell a killed writer's temp file from a live one's (file_leftovers.ts).
 */
function tempPath(objectPath: string, random: Random): string {
  return `${objectPath}${TEMP_INFIX}${Deno.pid}-${randomHex(random, 8)}`;
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
