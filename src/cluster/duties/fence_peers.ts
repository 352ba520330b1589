/**
 * The first duty of a lease: fencing the peers that stopped renewing theirs.
 * After each of the membership's listing rounds, while this node's lease is
 * valid, the fences due are written (Membership.fenceDue, which also asks
 * for the lease to have been valid for a watch, ADR 0004).
 *
 * @module
 */

import type { Membership } from "../membership.ts";
import type { LeaseDuty } from "./scheduler.ts";

/**
 * The duty that fences peers through `membership`.
 *
 * @example
 * ```ts
 * import { fencePeers } from "./fence_peers.ts";
 * import type { LeaseDuties } from "./scheduler.ts";
 * import type { ClusterPlane } from "../cluster_plane.ts";
 * declare const duties: LeaseDuties;
 * declare const plane: ClusterPlane;
 * duties.add(fencePeers(plane.membership));
 * ```
 */
export function fencePeers(membership: Membership): LeaseDuty {
  return {
    name: "fence peers",
    run: (signal) =>
      new Promise<void>((resolve) => {
        const stop = membership.afterEachRound(() => membership.fenceDue(signal));
        signal.addEventListener("abort", () => {
          stop();
          resolve();
        }, { once: true });
      }),
  };
}
