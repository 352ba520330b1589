/**
 * The owner sweep of a node's sockets (the spec's "or at the node's owner
 * sweep (once a minute)"): a room whose actor hibernated keeps its sockets
 * on its node, and a client that only listens sends nothing that would
 * find out another node took the actor meanwhile. Once a minute the node
 * reads the ownership record of each actor it keeps sockets of but does not
 * hold, and closes the sockets of those another node holds now, with 1012
 * and no `close` event here.
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

/** What {@linkcode sweepMovedActors} works with. */
export interface OwnerSweepOptions {
  /** This node's id. */
  nodeId: string;
  /** The actors this node keeps sockets of. */
  actors(): ActorKey[];
  /** Whether this node holds the actor now (its record is then its own). */
  holdsHere(key: ActorKey): boolean;
  /** The actor's ownership record, undefined when it has none. */
  readRecord(key: ActorKey): Promise<OwnerRecord | undefined>;
  /** Closes the actor's sockets here: another node holds it. */
  closeMoved(key: ActorKey): number;
  log: Logger;
}

/**
 * One sweep; resolves with how many sockets it closed.
 *
 * @example
 * ```ts ignore
 * const closed = await sweepMovedActors({ nodeId, actors: () => sockets.actors(),
 *   holdsHere: (key) => host.holds(key), readRecord: (key) => ownership.read(key),
 *   closeMoved: (key) => sockets.closeMoved(key), log });
 * ```
 */
export async function sweepMovedActors(options: OwnerSweepOptions): Promise<number> {
  const { nodeId, log } = options;
  let closed = 0;
  let reads = 0;
  for (const key of options.actors()) {
    if (options.holdsHere(key)) continue;
    if (reads++ >= MAX_OWNER_SWEEP_READS) break;
    let record: OwnerRecord | undefined;
    try {
      record = await options.readRecord(key);
    } catch (error) {
      log.debug("the owner sweep could not read a record", { error: String(error) });
      continue;
    }
    // Held since the read began (a message woke it here): its own record.
    if (options.holdsHere(key)) continue;
    if (record && record.state === "held" && record.node !== nodeId) {
      closed += options.closeMoved(key);
    }
  }
  return closed;
}
