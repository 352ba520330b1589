/**
 * The owner sweep of a node's sockets (the spec's "or at the node's owner
 * sweep (once a minute)"): a room whose actor hibernated keeps its sockets
 * on its node, and a client that only listens sends nothing that would
 * find out another node took the actor meanwhile. Once a minute the node
 * reads the ownership record of each actor it keeps sockets of but does not
 * hold, and closes the sockets of those whose record names another node at
 * a later generation than their last event here (held there now, or held
 * and released since: either way its events ran where these sockets could
 * not see them), with 1012 and no `close` event here.
 *
 * Bounded: at most {@linkcode MAX_OWNER_SWEEP_READS} records a sweep (the
 * actors not read wait for the next one), one at a time; a record that
 * cannot be read is read again at the next sweep.
 *
 * @module
 */

import type { ActorKey } from "../actors/key.ts";
import type { OwnerRecord } from "../cluster/ownership.ts";
import type { Logger } from "../log.ts";

/** How often the owner sweep runs (the spec's once a minute). */
export const OWNER_SWEEP_MS = 60_000;

/** Most ownership records one sweep reads. */
export const MAX_OWNER_SWEEP_READS = 1024;

/**
 * Whether `record` says another node took the actor after its sockets'
 * last event ran on `nodeId` at generation `lastHeld`: it names another
 * node at a later generation. Before any event of them ran here (an open
 * whose take is under way: `lastHeld` undefined), no.
 *
 * @example
 * ```ts
 * import { movedSince } from "./owner_sweep.ts";
 * const record = { version: 1 as const, node: "b", process: "p", generation: 3n,
 *   state: "released" as const, at: 0 };
 * movedSince(record, "a", 2n); // true
 * movedSince(record, "a", undefined); // false
 * ```
 */
export function movedSince(
  record: OwnerRecord | undefined,
  nodeId: string,
  lastHeld: bigint | undefined,
): boolean {
  if (record === undefined || lastHeld === undefined) return false;
  return record.node !== nodeId && record.generation > lastHeld;
}

/** What {@linkcode sweepMovedActors} works with. */
export interface OwnerSweepOptions {
  /** The actors this node keeps sockets of. */
  actors(): ActorKey[];
  /** Whether this node holds the actor now (its record is then its own). */
  holdsHere(key: ActorKey): boolean;
  /**
   * Whether another node took the actor since its sockets' last event ran
   * here (a read of its record); rejects when the record cannot be read.
   */
  movedAway(key: ActorKey): Promise<boolean>;
  /** Closes the actor's sockets here: another node took it. */
  closeMoved(key: ActorKey): number;
  log: Logger;
}

/**
 * One sweep; resolves with how many sockets it closed.
 *
 * @example
 * ```ts
 * import { sweepMovedActors } from "./owner_sweep.ts";
 * import type { ActorSockets } from "./actor_sockets.ts";
 * import type { ActorHost } from "../actors/actor_host.ts";
 * import type { ActorKey } from "../actors/key.ts";
 * import { createLogger } from "../log.ts";
 * declare const sockets: ActorSockets;
 * declare const host: ActorHost;
 * declare const movedAway: (key: ActorKey) => Promise<boolean>;
 * const closed = await sweepMovedActors({ actors: () => sockets.actors(),
 *   holdsHere: (key) => host.holds(key), movedAway, closeMoved: (key) => sockets.closeMoved(key),
 *   log: createLogger() });
 * ```
 */
export async function sweepMovedActors(options: OwnerSweepOptions): Promise<number> {
  const { log } = options;
  let closed = 0;
  let reads = 0;
  for (const key of options.actors()) {
    if (options.holdsHere(key)) continue;
    if (reads++ >= MAX_OWNER_SWEEP_READS) break;
    let moved: boolean;
    try {
      moved = await options.movedAway(key);
    } catch (error) {
      log.debug("the owner sweep could not read a record", { error: String(error) });
      continue;
    }
    // Held since the read began (a message woke it here): its own record.
    if (moved && !options.holdsHere(key)) closed += options.closeMoved(key);
  }
  return closed;
}
