/**
 * What a process killed while writing to a file bucket leaves in it: temp
 * files of writes that never reached their rename, and key locks (with the
 * breakers' locks) that were never released. Neither is ever read as an
 * object (listings and reads see only `.obj` files), and a stale lock is
 * broken by the next write of its key, but both stay on disk until then,
 * and a lock costs that write up to {@linkcode LOCK_STALE_MS} of waiting.
 * A node removes them at its start: those whose writer (named in the file)
 * is gone, and any temp file older than {@linkcode FILE_TEMP_MAX_AGE_MS}.
 * Files of live processes (other nodes sharing the bucket on this machine,
 * their executors) are left alone: a temp file is being written, a lock held.
 *
 * @module
 */

import type { Clock } from "../time/clock.ts";
import { processState } from "../os/process_alive.ts";
import { TEMP_INFIX } from "./file.ts";
import { BREAK_SUFFIX, breakLock, LOCK_STALE_MS, LOCK_SUFFIX, lockHolder } from "./file_lock.ts";

/**
 * A temp file older than this (one hour) is removed whoever wrote it: a
 * write lasts seconds, so it is a killed writer's whose process id was
 * reused, or of a version that did not name the writer.
 *
 * @example
 * ```ts
 * import { FILE_TEMP_MAX_AGE_MS } from "./file_leftovers.ts";
 * console.log(FILE_TEMP_MAX_AGE_MS); // 3600000
 * ```
 */
export const FILE_TEMP_MAX_AGE_MS = 3_600_000;

/** `<object>.obj.tmp-<pid>-<hex>`, or `<object>.obj.tmp-<hex>` before writers were named. */
const TEMP_FILE = new RegExp(`\\.obj${TEMP_INFIX.replace(".", "\\.")}(?:(\\d+)-)?[0-9a-f]+$`);

/** What {@linkcode removeFileLeftovers} removed. */
export interface FileLeftovers {
  temps: number;
  locks: number;
}

/**
 * Walks the file bucket at `root` and removes what killed writers left
 * (above), until `signal` aborts (then it rejects with its reason). Its
 * memory is bounded by the folders' depth, not their size.
 *
 * @example
 * ```ts
 * import { removeFileLeftovers } from "./file_leftovers.ts";
 * import { systemClock } from "../time/clock.ts";
 * const { temps, locks } = await removeFileLeftovers("/var/lib/wasmkeep/bucket", systemClock);
 * ```
 */
export async function removeFileLeftovers(
  root: string,
  clock: Clock,
  signal?: AbortSignal,
): Promise<FileLeftovers> {
  const removed: FileLeftovers = { temps: 0, locks: 0 };
  await sweep(root.replace(/\/+$/, "") || "/", clock, removed, signal);
  return removed;
}

async function sweep(
  dir: string,
  clock: Clock,
  removed: FileLeftovers,
  signal: AbortSignal | undefined,
): Promise<void> {
  try {
    for await (const entry of Deno.readDir(dir)) {
      signal?.throwIfAborted();
      const path = `${dir}/${entry.name}`;
      if (entry.isDirectory) {
        await sweep(path, clock, removed, signal);
      } else if (entry.isFile) {
        await sweepFile(path, entry.name, clock, removed);
      }
    }
  } catch (error) {
    // A folder removed meanwhile (an actor's erasure) has nothing left.
    if (!(error instanceof Deno.errors.NotFound)) throw error;
  }
}

async function sweepFile(
  path: string,
  name: string,
  clock: Clock,
  removed: FileLeftovers,
): Promise<void> {
  const temp = TEMP_FILE.exec(name);
  if (temp) {
    const writer = temp[1] === undefined ? undefined : Number(temp[1]);
    if (writer !== undefined && writer !== Deno.pid && processState(writer) === "gone") {
      if (await removeIfThere(path)) removed.temps++;
      return;
    }
    const info = await Deno.stat(path).catch(() => null);
    if (info && clock.now() - (info.mtime?.getTime() ?? 0) >= FILE_TEMP_MAX_AGE_MS) {
      if (await removeIfThere(path)) removed.temps++;
    }
    return;
  }
  if (name.endsWith(LOCK_SUFFIX + BREAK_SUFFIX)) {
    // A breaker's own lock: it holds it for two file operations.
    if (await heldByGone(path, clock)) await removeIfThere(path);
    return;
  }
  if (name.endsWith(LOCK_SUFFIX)) {
    const seen = await Deno.stat(path).catch(() => null);
    if (seen && await heldByGone(path, clock, seen) && await breakLock(path, seen, clock)) {
      removed.locks++;
    }
  }
}

/** Whether the lock at `path` is stale, or names a process that is gone. */
async function heldByGone(path: string, clock: Clock, seen?: Deno.FileInfo): Promise<boolean> {
  const info = seen ?? await Deno.stat(path).catch(() => null);
  if (!info) return false;
  if (clock.now() - (info.mtime?.getTime() ?? 0) >= LOCK_STALE_MS) return true;
  const holder = await lockHolder(path);
  return holder !== undefined && holder !== Deno.pid && processState(holder) === "gone";
}

async function removeIfThere(path: string): Promise<boolean> {
  try {
    await Deno.remove(path);
    return true;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    throw error;
  }
}
