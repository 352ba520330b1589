/**
 * Checks of an actor's history in the bucket, made on what the store holds
 * (the simulator's shadow of it), outside the simulated time line:
 *
 * - {@linkcode restoreFromStore}: the real restore (`restoreActor`, the walk
 *   of ADR 0002) into a scratch file, and the ids the database then holds;
 * - {@linkcode replayChain}: an independent replay of the same rule, written
 *   apart from `src/replication/history.ts` and `src/ltx/apply.ts`: files
 *   decoded with `src/ltx`'s decoder, pages laid into a database image here,
 *   every pre- and post-apply checksum checked against the image.
 *
 * @module
 */

import { DatabaseSync } from "node:sqlite";
import type {
  Bucket,
  ListOptions,
  ListPage,
  ObjectInfo,
  StoredObject,
} from "../src/bucket/bucket.ts";
import type { ActorKey } from "../src/actors/key.ts";
import { actorPrefix } from "../src/bucket/keys.ts";
import { decodeLtx, type LtxFile } from "../src/ltx/decoder.ts";
import { CHECKSUM_FLAG, databaseChecksum } from "../src/ltx/checksum.ts";
import { decodeBase, decodeDeleted } from "../src/replication/history.ts";
import { restoreActor } from "../src/replication/restore.ts";
import { ReadLimiter } from "../src/replication/read_limiter.ts";
import type { Clock, Timer } from "../src/time/clock.ts";
import { removeIfPresent } from "../src/replication/local_files.ts";

/** Where a database stands: its TXID and rolling checksum. */
export interface ChainPosition {
  txid: bigint;
  checksum: bigint;
}

/**
 * The store's content, read without a call and without faults.
 *
 * @example
 * ```ts ignore
 * const view = new StoreView(observedBucket.shadow);
 * replayChain(view, { tenant: "default", class: "counter", name: "x0" });
 * ```
 */
export class StoreView implements Bucket {
  constructor(readonly objects: ReadonlyMap<string, Uint8Array>) {}

  get(key: string): Promise<StoredObject | null> {
    const body = this.objects.get(key);
    return Promise.resolve(body ? { body: body.slice(), etag: '"x"', lastModified: 0 } : null);
  }

  head(key: string): Promise<ObjectInfo | null> {
    const body = this.objects.get(key);
    return Promise.resolve(body ? info(key, body) : null);
  }

  put(): Promise<{ etag: string }> {
    return Promise.reject(new Error("the store view is read-only"));
  }

  delete(): Promise<void> {
    return Promise.reject(new Error("the store view is read-only"));
  }

  list(prefix: string, _options?: ListOptions): Promise<ListPage> {
    return Promise.resolve({
      objects: this.keys(prefix).map((k) => info(k, this.objects.get(k)!)),
    });
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  /** Keys under `prefix`, in order. */
  keys(prefix: string): string[] {
    return [...this.objects.keys()].filter((k) => k.startsWith(prefix)).sort();
  }
}

function info(key: string, body: Uint8Array): ObjectInfo {
  return { key, etag: '"x"', size: body.length, lastModified: 0 };
}

/**
 * A clock on which nothing waits: a check's restore reads a store that
 * answers at once, so its deadlines never matter and its pauses are none.
 */
const stillClock: Clock = {
  now: () => 0,
  monotonic: () => 0,
  sleep: () => Promise.resolve(),
  setTimer: (): Timer => ({ cancel() {} }),
};

/** What the real restore made of the store's history. */
export interface Restored extends ChainPosition {
  /** The ids in the restored database's table. */
  ids: Set<number>;
}

/**
 * Restores `actor` from the store with `restoreActor` into `scratch` (which
 * is removed again), and reads what it holds. Throws what the restore throws.
 *
 * @example
 * ```ts ignore
 * const { txid, checksum, ids } = await restoreFromStore(view, actor, "/tmp/check.db");
 * ```
 */
export async function restoreFromStore(
  store: StoreView,
  actor: ActorKey,
  scratch: string,
): Promise<Restored> {
  try {
    const result = await restoreActor({
      bucket: store,
      clock: stillClock,
      actor,
      path: scratch,
      limiter: new ReadLimiter(),
    });
    return { txid: result.txid, checksum: result.checksum, ids: idsInFile(scratch) };
  } finally {
    for (const suffix of ["", "-wal", "-shm", ".replaced", ".replaced-wal", ".restoring"]) {
      removeIfPresent(scratch + suffix);
    }
  }
}

/** The ids in the table of the database file at `path` (none when absent). */
export function idsInFile(path: string): Set<number> {
  try {
    if (Deno.statSync(path).size === 0) return new Set();
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return new Set();
    throw e;
  }
  const db = new DatabaseSync(path);
  try {
    const table = db.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'w'")
      .get();
    if (!table) return new Set();
    return new Set(db.prepare("SELECT id FROM w").all().map((row) => Number(row.id)));
  } finally {
    db.close();
  }
}

/** Why the independent replay could not reach the chain's end. */
export class ReplayError extends Error {
  override name = "ReplayError";
}

interface ListedFile {
  key: string;
  generation: bigint;
  min: bigint;
  max: bigint;
}

const FILE = /^wal\/([0-9a-f]{16})\/([0-9a-f]{16})-([0-9a-f]{16})\.ltx$/;
const BASE = /^wal\/([0-9a-f]{16})\/base$/;

/**
 * Replays `actor`'s history in the store by ADR 0002's rule, independently
 * of `src/replication`: the delete marker drops what came before it (unless
 * a later generation's base starts below it: then it was lost); each
 * generation's files past the next base's TXID are late and dropped; the
 * walk starts at the newest snapshot (or the empty database at the delete or
 * at 0) and takes the file that starts right after it, the higher generation
 * first, then the longer. Each file's pre-apply checksum must be the
 * image's, and its post-apply checksum what the image has after it. Throws
 * {@linkcode ReplayError} when the walk stops short of the target or a
 * checksum does not hold.
 *
 * @example
 * ```ts ignore
 * const { txid, checksum } = replayChain(new StoreView(objects), actor);
 * ```
 */
export function replayChain(store: StoreView, actor: ActorKey): ChainPosition {
  const prefix = actorPrefix(actor);
  const files: ListedFile[] = [];
  const bases = new Map<bigint, bigint>();
  let deleted: { generation: bigint; txid: bigint } | undefined;
  for (const key of store.keys(prefix)) {
    const rest = key.slice(prefix.length);
    const body = store.objects.get(key)!;
    const file = FILE.exec(rest);
    const base = BASE.exec(rest);
    if (file) {
      files.push({
        key,
        generation: BigInt(`0x${file[1]}`),
        min: BigInt(`0x${file[2]}`),
        max: BigInt(`0x${file[3]}`),
      });
    } else if (base) {
      bases.set(BigInt(`0x${base[1]}`), decodeBase(body, key).txid);
    } else if (rest === "deleted") {
      const marker = decodeDeleted(body, key);
      deleted = { generation: marker.generation, txid: marker.txid };
    }
  }
  // A marker a later generation's base starts below was lost: that holder
  // restored without the delete (ADR 0002, step 2).
  if (deleted && [...bases].some(([g, txid]) => g > deleted!.generation && txid < deleted!.txid)) {
    deleted = undefined;
  }
  const keptBases = [...bases].filter(([g]) => !deleted || g >= deleted.generation)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const kept = files.filter((f) => {
    if (deleted) {
      if (f.generation < deleted.generation) return false;
      if (f.generation === deleted.generation && f.max <= deleted.txid) return false;
    }
    const cap = keptBases.find(([g]) => g > f.generation)?.[1];
    if (cap !== undefined && f.max > cap) return false;
    const own = bases.get(f.generation);
    return !(own !== undefined && f.min !== 1n && f.min <= own);
  });
  let target = deleted?.txid ?? 0n;
  for (const f of kept) if (f.max > target) target = f.max;
  for (const [, txid] of keptBases) if (txid > target) target = txid;

  let snapshot: ListedFile | undefined;
  for (const f of kept) {
    if (f.min !== 1n) continue;
    if (
      !snapshot || f.max > snapshot.max ||
      (f.max === snapshot.max && f.generation > snapshot.generation)
    ) snapshot = f;
  }
  const fromEmpty = !snapshot || (deleted !== undefined && snapshot.max <= deleted.txid);
  const image = new Image();
  let txid = fromEmpty ? (deleted?.txid ?? 0n) : snapshot!.max;
  if (!fromEmpty) image.apply(decode(store, snapshot!), snapshot!.key, true);
  for (;;) {
    let next: ListedFile | undefined;
    for (const f of kept) {
      if (f.min !== txid + 1n || f.min === 1n) continue;
      if (
        !next || f.generation > next.generation ||
        (f.generation === next.generation && f.max > next.max)
      ) next = f;
    }
    if (!next) break;
    image.apply(decode(store, next), next.key, false);
    txid = next.max;
  }
  if (txid < target) {
    throw new ReplayError(`the walk stops at TXID ${txid}, the target is ${target}`);
  }
  return { txid, checksum: image.checksum() };
}

function decode(store: StoreView, file: ListedFile): LtxFile {
  return decodeLtx(store.objects.get(file.key)!);
}

/** A database image built page by page. */
class Image {
  #pageSize = 0;
  #bytes = new Uint8Array(0);

  checksum(): bigint {
    return this.#pageSize === 0 ? CHECKSUM_FLAG : databaseChecksum(this.#bytes, this.#pageSize);
  }

  apply(file: LtxFile, key: string, snapshot: boolean): void {
    const { header } = file;
    if (!snapshot && header.preApplyChecksum !== this.checksum()) {
      throw new ReplayError(
        `${key}: pre-apply checksum ${hex(header.preApplyChecksum)}, the image has ` +
          hex(this.checksum()),
      );
    }
    if (snapshot) this.#bytes = new Uint8Array(0);
    this.#pageSize = header.pageSize;
    const size = header.commit * header.pageSize;
    const bytes = new Uint8Array(size);
    bytes.set(this.#bytes.subarray(0, Math.min(size, this.#bytes.length)));
    for (const page of file.pages) bytes.set(page.data, (page.pgno - 1) * header.pageSize);
    this.#bytes = bytes;
    if (file.postApplyChecksum !== this.checksum()) {
      throw new ReplayError(
        `${key}: post-apply checksum ${hex(file.postApplyChecksum)}, the image has ` +
          hex(this.checksum()),
      );
    }
  }
}

function hex(n: bigint): string {
  return n.toString(16).padStart(16, "0");
}
