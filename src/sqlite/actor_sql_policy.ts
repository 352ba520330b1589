/**
 * What an actor's own SQL may do on its database, checked by SQLite's
 * authorizer as each statement is prepared. An actor is a tenant's code: it
 * gets its own database and nothing else, and may not change what the host
 * relies on to keep that database and replicate it.
 *
 * - No ATTACH or DETACH: an attached file could be another actor's
 *   database, or any file this process can read or create. (The
 *   connection's attach limit is also 0, which stops `VACUUM INTO`, for
 *   which SQLite asks the authorizer nothing.)
 * - A PRAGMA only from {@linkcode ACTOR_PRAGMAS}, or from
 *   {@linkcode READ_ONLY_PRAGMAS} without a value: the journal and locking
 *   modes, checkpoints, synchronous, caches and memory limits are the host's
 *   (an actor's `wal_checkpoint` or `journal_mode` would empty the `-wal`
 *   before the host captured what the event committed; a `hard_heap_limit`
 *   would apply to every actor of the process).
 * - Nothing on the host's own table ({@linkcode META_TABLE}).
 *
 * @module
 */

/** The table WasmKeep keeps its own per-actor facts in; actors must not use it. */
export const META_TABLE = "_wasmkeep_meta";

/**
 * PRAGMAs an actor may run in any form: settings of its own data, checks
 * and introspection.
 */
export const ACTOR_PRAGMAS: ReadonlySet<string> = new Set([
  "analysis_limit",
  "application_id",
  "automatic_index",
  "busy_timeout",
  "case_sensitive_like",
  "cell_size_check",
  "collation_list",
  "compile_options",
  "data_version",
  "defer_foreign_keys",
  "foreign_key_check",
  "foreign_key_list",
  "foreign_keys",
  "freelist_count",
  "function_list",
  "ignore_check_constraints",
  "incremental_vacuum",
  "index_info",
  "index_list",
  "index_xinfo",
  "integrity_check",
  "max_page_count",
  "module_list",
  "optimize",
  "page_count",
  "pragma_list",
  "quick_check",
  "recursive_triggers",
  "reverse_unordered_selects",
  "secure_delete",
  "shrink_memory",
  "table_info",
  "table_list",
  "table_xinfo",
  "user_version",
]);

/** PRAGMAs an actor may read but not set: the host sets them. */
export const READ_ONLY_PRAGMAS: ReadonlySet<string> = new Set([
  "auto_vacuum",
  "cache_size",
  "cache_spill",
  "encoding",
  "hard_heap_limit",
  "journal_mode",
  "journal_size_limit",
  "locking_mode",
  "mmap_size",
  "page_size",
  "query_only",
  "schema_version",
  "soft_heap_limit",
  "synchronous",
  "temp_store",
  "threads",
  "trusted_schema",
  "wal_autocheckpoint",
]);

/**
 * The authorizer's action codes this policy looks at, as `sqlite3.h`
 * numbers them (Deno's node:sqlite has them in `constants` at run time,
 * but its type declarations do not list them yet).
 */
export const SqliteAction = {
  CREATE_INDEX: 1,
  CREATE_TRIGGER: 7,
  DELETE: 9,
  DROP_INDEX: 10,
  DROP_TABLE: 11,
  DROP_TRIGGER: 16,
  INSERT: 18,
  PRAGMA: 19,
  READ: 20,
  UPDATE: 23,
  ATTACH: 24,
  DETACH: 25,
  ALTER_TABLE: 26,
} as const;

/** Actions whose first or second argument names a table. */
const TABLE_ACTIONS: ReadonlySet<number> = new Set([
  SqliteAction.ALTER_TABLE,
  SqliteAction.CREATE_INDEX,
  SqliteAction.CREATE_TRIGGER,
  SqliteAction.DELETE,
  SqliteAction.DROP_INDEX,
  SqliteAction.DROP_TABLE,
  SqliteAction.DROP_TRIGGER,
  SqliteAction.INSERT,
  SqliteAction.READ,
  SqliteAction.UPDATE,
]);

/**
 * Why SQLite's authorizer must refuse an action of an actor's statement,
 * or `undefined` when it may go ahead. The arguments are the authorizer's
 * (see SQLite's `sqlite3_set_authorizer`).
 *
 * @example
 * ```ts
 * import { constants } from "node:sqlite";
 * import { actorSqlRefusal } from "./actor_sql_policy.ts";
 *
 * actorSqlRefusal(SqliteAction.ATTACH, "/data/other.db", null);
 * // "an actor has its own database only: ATTACH is not allowed"
 * actorSqlRefusal(SqliteAction.PRAGMA, "user_version", "7"); // undefined
 * ```
 */
export function actorSqlRefusal(
  action: number,
  first: string | null,
  second: string | null,
): string | undefined {
  if (action === SqliteAction.ATTACH) {
    return "an actor has its own database only: ATTACH is not allowed";
  }
  if (action === SqliteAction.DETACH) {
    return "an actor has its own database only: DETACH is not allowed";
  }
  if (action === SqliteAction.PRAGMA) {
    const name = (first ?? "").toLowerCase();
    if (ACTOR_PRAGMAS.has(name)) return undefined;
    if (READ_ONLY_PRAGMAS.has(name)) {
      return second === null
        ? undefined
        : `PRAGMA ${name} is the host's: an actor may only read it`;
    }
    return `PRAGMA ${name} is not available to actors`;
  }
  if (TABLE_ACTIONS.has(action) && (isHostTable(first) || isHostTable(second))) {
    return `the table ${META_TABLE} is WasmKeep's own`;
  }
  return undefined;
}

function isHostTable(name: string | null): boolean {
  return name !== null && name.toLowerCase() === META_TABLE;
}
