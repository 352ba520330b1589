/**
 * The local database file and the files beside it that a restore uses: the
 * one being built (`.restoring`), the replaced one kept for a generation
 * (`.replaced`, `.replaced-wal`) and SQLite's `-wal`, and the moves between
 * them, the `-wal` first.
 *
 * Apart from the restore's walk because the replica moves a database aside
 * and asks whether files exist by the same rules, without restoring.
 *
 * @module
 */

/**
 * Suffix of the database being built beside the local one.
 *
 * @example
 * ```ts
 * import { RESTORING_SUFFIX } from "./local_files.ts";
 * console.log("actor.db" + RESTORING_SUFFIX); // "actor.db.restoring"
 * ```
 */
export const RESTORING_SUFFIX = ".restoring";

/**
 * Suffix the replaced local database is kept under (one generation).
 *
 * @example
 * ```ts
 * import { REPLACED_SUFFIX } from "./local_files.ts";
 * console.log("actor.db" + REPLACED_SUFFIX); // "actor.db.replaced"
 * ```
 */
export const REPLACED_SUFFIX = ".replaced";

/**
 * Suffix of SQLite's write-ahead log beside a database.
 *
 * @example
 * ```ts
 * import { WAL_SUFFIX } from "./local_files.ts";
 * console.log("actor.db" + WAL_SUFFIX); // "actor.db-wal"
 * ```
 */
export const WAL_SUFFIX = "-wal";

/**
 * Moves the local database and its `-wal` aside (replacing the previous ones
 * kept), then renames the new file in. The `-wal` goes first: a stale `-wal`
 * next to the new file would be replayed into it.
 *
 * @example
 * ```ts
 * import { swapIn } from "./local_files.ts";
 * swapIn("/data/actors/default/counter/a.db", "/data/actors/default/counter/a.db.restoring");
 * swapIn("/data/actors/default/counter/a.db", undefined); // the database is empty: only set aside
 * ```
 */
export function swapIn(path: string, built: string | undefined): void {
  setAside(path);
  if (built) Deno.renameSync(built, path);
}

/**
 * Moves the local database and its `-wal` to `<path>.replaced`
 * (`.replaced-wal`), replacing the ones kept there: the `-wal` first.
 *
 * @example
 * ```ts
 * import { setAside } from "./local_files.ts";
 * setAside("/data/actors/default/counter/a.db"); // now a.db.replaced
 * ```
 */
export function setAside(path: string): void {
  const replaced = path + REPLACED_SUFFIX;
  const hasDb = exists(path);
  const hasWal = exists(path + WAL_SUFFIX);
  if (hasDb || hasWal) {
    removeIfPresent(replaced + WAL_SUFFIX);
    removeIfPresent(replaced);
  }
  if (hasWal) Deno.renameSync(path + WAL_SUFFIX, replaced + WAL_SUFFIX);
  if (hasDb) Deno.renameSync(path, replaced);
}

/**
 * Whether a file is at `path`; errors other than "not found" are thrown.
 *
 * @example
 * ```ts
 * import { exists } from "./local_files.ts";
 * exists("/nonexistent"); // false
 * ```
 */
export function exists(path: string): boolean {
  try {
    Deno.lstatSync(path);
    return true;
  } catch (e) {
    if (e instanceof Deno.errors.NotFound) return false;
    throw e;
  }
}

/**
 * Removes the file at `path` if there is one; errors other than "not found"
 * are thrown.
 *
 * @example
 * ```ts
 * import { removeIfPresent } from "./local_files.ts";
 * removeIfPresent("/nonexistent"); // nothing to remove
 * ```
 */
export function removeIfPresent(path: string): void {
  try {
    Deno.removeSync(path);
  } catch (e) {
    if (!(e instanceof Deno.errors.NotFound)) throw e;
  }
}
