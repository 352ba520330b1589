/**
 * An actor's `on-init`: run once per code version (ADR 0008), the version
 * whose on-init ran recorded in the actor's database, so a new instance of
 * the same code (after a trap, a hibernation, a new configuration) does not
 * run it again.
 *
 * @module
 */

import type { ActorDatabase } from "../sqlite/actor_database.ts";
import type { ActorExportCalls } from "../actors/abi/direct.ts";
import { EventFailure } from "../actors/event_failure.ts";

/** The meta key holding the code version whose on-init ran. */
const INIT_VERSION_KEY = "init_version";

/**
 * Runs `exports`' on-init unless the code `hash` already ran it on this
 * database; a failed one is the event's 500 and runs again next time.
 *
 * @example
 * ```ts
 * import { initOnce } from "./actor_init.ts";
 * import type { ActorExportCalls } from "../actors/abi/direct.ts";
 * import type { ActorProgram } from "./program.ts";
 * import type { DatabasePool } from "../sqlite/database_pool.ts";
 * declare const exports: ActorExportCalls;
 * declare const program: ActorProgram;
 * declare const databases: DatabasePool;
 * declare const path: string;
 * await initOnce(exports, program.spec.hash, () => databases.get(path));
 * ```
 */
export async function initOnce(
  exports: ActorExportCalls,
  hash: string,
  db: () => ActorDatabase,
): Promise<void> {
  if (db().getMeta(INIT_VERSION_KEY) === hash) return;
  try {
    await exports.onInit();
  } catch (error) {
    // The guest's err: a GuestError from the direct bindings, jco's
    // ComponentError from its glue; both carry the payload.
    const payload = (error as { payload?: unknown } | undefined)?.payload;
    if (typeof payload !== "string") throw error;
    throw new EventFailure(500, `the actor's on-init failed: ${payload}`);
  }
  if (db().inTransaction) {
    throw new EventFailure(
      500,
      "the actor's on-init ended with a transaction open; it was rolled back",
    );
  }
  db().setMeta(INIT_VERSION_KEY, hash);
}
