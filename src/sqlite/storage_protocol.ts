/**
 * The requests an execution worker sends its storage worker, and their
 * answers. Every request names the actor's database file.
 *
 * @module
 */

import type { ExecResult, SqlError, SqlValue } from "./actor_database.ts";

/** A request on the storage channel. */
export type StorageRequest =
  | { op: "open"; db: string }
  | { op: "exec"; db: string; sql: string; params: SqlValue[] }
  | { op: "in-transaction"; db: string }
  | { op: "rollback"; db: string }
  | { op: "set-meta"; db: string; key: string; value: string }
  | { op: "close"; db: string }
  | { op: "reset" }
  | { op: "shutdown" };

/** The answer to `open`: facts WasmKeep keeps in the actor's database. */
export interface OpenAnswer {
  /** The code version whose on-init last succeeded on this database. */
  initVersion: string | null;
}

/** Every answer is either a value or an error. */
export type StorageAnswer =
  | { ok: ExecResult | OpenAnswer | boolean | null }
  | { error: SqlError };

/** The meta key holding the code version whose on-init ran. */
export const INIT_VERSION_KEY = "init_version";
