/**
 * The type that names an actor, apart from the rules and helpers of
 * `actors/key.ts`, which re-exports it: the bucket's keys and the replication
 * name actors too, and they sit below `actors/` in the layers (they may not
 * import it), so the type lives at the bottom, with nothing else.
 *
 * @module
 */

/**
 * Who an actor is: the tenant, the class and the name that identify it.
 *
 * @example
 * ```ts
 * import type { ActorKey } from "./actor_key.ts";
 * const key: ActorKey = { tenant: "default", class: "counter", name: "alice" };
 * ```
 */
export interface ActorKey {
  /** The tenant that owns the app (`default` for `wasmkeep serve --actor`). */
  tenant: string;
  /** The actor's class. */
  class: string;
  /** The actor's name within its class. */
  name: string;
}
