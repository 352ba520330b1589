/**
 * The per-key lock of a file bucket (file.ts): a file created with O_EXCL
 * beside the object, holding its taker's process id, so that conditions are
 * checked and the object replaced by one process at a time on the machine.
 * A crashed holder cannot keep it forever: a lock older than
 * {@linkcode LOCK_STALE_MS} is broken, and so is one whose holder is gone
 * (file_leftovers.ts, at a node's start).
 *
 * @module
 */

import type { Clock, Random } from "../time/clock.ts";
import { BucketUnavailable } from "./errors.ts";

/**
 * A key's lock older than this (10 s) belongs to a crashed process and is
 * broken. A holder keeps it only to compare an ETag and rename one file.
 *
 * @example
 * ```ts
 * import { LOCK_STALE_MS } from "./file_lock.ts";
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
 * import { LOCK_WAIT_MS } from "./file_lock.ts";
 * console.log(LOCK_WAIT_MS); // 15000
 * ```
 */
export const LOCK_WAIT_MS = 15_000;

/**
 * Longest pause between two tries of a busy lock (5 ms, jittered).
 *
 * @example
 * ```ts
 * import { LOCK_POLL_MS } from "./file_lock.ts";
 * console.log(LOCK_POLL_MS); // 5
 * ```
 */
export const LOCK_POLL_MS = 5;

/** The suffix of a key's lock file, after the object's own name. */
export const LOCK_SUFFIX = ".lock";

/** The suffix of the lock a breaker of a stale lock takes, after the lock's name. */
export const BREAK_SUFFIX = ".break";

/** What taking a lock needs: time for its waits and staleness, randomness for its polls. */
export interface LockContext {
  clock: Clock;
  random: Random;
}

/**
 * Takes the lock at `lockPath`; resolves to its release. Fails with
 * `BucketUnavailable` after {@linkcode LOCK_WAIT_MS}, and with `NotFound`
 * when the lock's folder does not exist.
 *
 * @example
 * ```ts
 * import { LOCK_SUFFIX, takeLock } from "./file_lock.ts";
 * import { systemClock as clock, systemRandom as random } from "../time/clock.ts";
 * declare const path: string;
 * const unlock = await takeLock(`${path}${LOCK_SUFFIX}`, { clock, random });
 * try {
 *   // … change the file under the lock …
 * } finally {
 *   await unlock();
 * }
 * ```
 */
export async function takeLock(
  lockPath: string,
  context: LockContext,
  signal?: AbortSignal,
): Promise<() => Promise<void>> {
  const { clock, random } = context;
  const startedAt = clock.monotonic();
  while (true) {
    if (await createWithPid(lockPath)) return () => Deno.remove(lockPath).catch(() => {});
    const held = await Deno.stat(lockPath).catch(() => null);
    if (held && clock.now() - (held.mtime?.getTime() ?? 0) >= LOCK_STALE_MS) {
      await breakLock(lockPath, held, clock);
      continue;
    }
    if (clock.monotonic() - startedAt >= LOCK_WAIT_MS) {
      throw new BucketUnavailable(`${lockPath}: lock still held after ${LOCK_WAIT_MS} ms`, {
        ambiguous: false,
      });
    }
    await clock.sleep(1 + random.next() * LOCK_POLL_MS, signal);
  }
}

/**
 * Removes the lock at `lockPath` if it is still the one `seen` describes (a
 * stale one, or one whose holder is gone). Breakers take a lock of their own
 * first, so two of them cannot both see the stale lock, one remove it and
 * the other remove the fresh lock taken in between. Resolves to whether it
 * removed the lock.
 *
 * @example
 * ```ts
 * import { breakLock } from "./file_lock.ts";
 * import { systemClock } from "../time/clock.ts";
 * declare const lockPath: string;
 * const seen = await Deno.stat(lockPath);
 * await breakLock(lockPath, seen, systemClock);
 * ```
 */
export async function breakLock(
  lockPath: string,
  seen: Deno.FileInfo,
  clock: Clock,
): Promise<boolean> {
  const breakPath = lockPath + BREAK_SUFFIX;
  if (!await createWithPid(breakPath)) {
    const breaker = await Deno.stat(breakPath).catch(() => null);
    // A breaker holds its lock for two file operations; an old one crashed.
    if (breaker && clock.now() - (breaker.mtime?.getTime() ?? 0) >= LOCK_STALE_MS) {
      await Deno.remove(breakPath).catch(() => {});
    }
    return false;
  }
  try {
    const now = await Deno.stat(lockPath).catch(() => null);
    if (now && now.ino === seen.ino && now.mtime?.getTime() === seen.mtime?.getTime()) {
      await Deno.remove(lockPath).catch(() => {});
      return true;
    }
    return false;
  } finally {
    await Deno.remove(breakPath).catch(() => {});
  }
}

/**
 * The process id a lock or break file names, or `undefined` for one being
 * written or of an older version (empty).
 *
 * @example
 * ```ts
 * import { lockHolder } from "./file_lock.ts";
 * declare const lockPath: string;
 * const pid = await lockHolder(lockPath);
 * ```
 */
export async function lockHolder(path: string): Promise<number | undefined> {
  const text = await Deno.readTextFile(path).catch(() => "");
  const pid = Number(text.trim());
  return text.trim() !== "" && Number.isSafeInteger(pid) && pid > 0 ? pid : undefined;
}

/** Creates `path` holding this process's id; `false` when it exists. */
async function createWithPid(path: string): Promise<boolean> {
  let file: Deno.FsFile;
  try {
    file = await Deno.open(path, { createNew: true, write: true });
  } catch (e) {
    if (e instanceof Deno.errors.AlreadyExists) return false;
    throw e;
  }
  try {
    await file.write(new TextEncoder().encode(`${Deno.pid}\n`));
  } finally {
    file.close();
  }
  return true;
}
