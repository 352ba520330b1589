/**
 * What a node's parts tell whoever watches them: one observer per part,
 * each given to its part when it is built (assemble.ts). The simulator
 * (sim/world.ts) checks its invariants through them; `serve` gives none.
 * No part's method is replaced to watch it.
 *
 * @module
 */

import type { ActorHostObserver } from "../actors/actor_host.ts";
import type { AlarmTimerObserver } from "../alarms/alarm_timers.ts";
import type { FailoverWaitObserver } from "../cluster/failover_wait.ts";
import type { OwnershipObserver } from "../cluster/ownership.ts";
import type { ForwardObserver } from "../cluster/routing/peer_forwarding.ts";

/**
 * The observers of one node's parts, each optional.
 *
 * @example
 * ```ts
 * import type { NodeObservers } from "./observers.ts";
 * let takes = 0;
 * const observers: NodeObservers = {
 *   ownership: { took: () => void takes++ },
 *   forwards: { forwarding: (node) => (outcome) => console.log(node, outcome.kind) },
 * };
 * ```
 */
export interface NodeObservers {
  /** The takes and releases of the node's ownership records. */
  ownership?: OwnershipObserver;
  /** The actor host's events, the actors executors gave up, and replaced executors. */
  host?: ActorHostObserver;
  /** The requests kept for a takeover (failover waits), as they begin and end. */
  waits?: FailoverWaitObserver;
  /** The requests forwarded to the nodes holding their actors (a cluster node). */
  forwards?: ForwardObserver;
  /** The alarms given to the node's timer. */
  alarmTimers?: AlarmTimerObserver;
}
