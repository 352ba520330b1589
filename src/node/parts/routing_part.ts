/**
 * Where the node's events go: run here by the actor host, or forwarded to
 * the node holding the actor, or kept while a failed holder's lease runs
 * out (the failover wait).
 *
 * @module
 */

import { createCallHandler } from "../../actors/call_router.ts";
import type { ActorCall } from "../../actors/executor_pool.ts";
import type { CallAnswer } from "../../actors/protocol.ts";
import { FailoverWaits } from "../../cluster/failover_wait.ts";
import { RequestRouting } from "../../cluster/routing/request_routing.ts";
import type { ActorPart } from "./actor_part.ts";
import type { BoundsPart } from "./bounds_part.ts";
import type { BucketPart } from "./bucket_part.ts";
import type { ClusterPart } from "./cluster_part.ts";
import type { DeploysPart } from "./deploys_part.ts";
import type { NodeInput, NodeSeams } from "./seams.ts";

/** The node's routing of events. */
export interface RoutingPart {
  waits: FailoverWaits;
  routing: RequestRouting;
  /** Where an actor's `actors.call` goes: routed as any event. */
  onCall: (call: ActorCall) => Promise<CallAnswer>;
}

/**
 * Builds the routing: every event this node runs (requests, calls, alarms)
 * waits while its class lacks a required value.
 *
 * @example
 * ```ts
 * import { routingPart } from "./routing_part.ts";
 * import type { NodeInput, NodeSeams } from "./seams.ts";
 * import type { BucketPart } from "./bucket_part.ts";
 * import type { BoundsPart } from "./bounds_part.ts";
 * import type { ClusterPart } from "./cluster_part.ts";
 * import type { ActorPart } from "./actor_part.ts";
 * import type { DeploysPart } from "./deploys_part.ts";
 * declare const input: NodeInput;
 * declare const seams: NodeSeams;
 * declare const store: BucketPart;
 * declare const bounds: BoundsPart;
 * declare const cluster: ClusterPart;
 * declare const actors: ActorPart;
 * declare const deploys: DeploysPart;
 * const { routing } = routingPart(input, seams, { store, bounds, cluster, actors, deploys });
 * ```
 */
export function routingPart(
  input: NodeInput,
  { clock, random, log, observers }: NodeSeams,
  { store, bounds, cluster, actors, deploys }: {
    store: BucketPart;
    bounds: BoundsPart;
    cluster: ClusterPart;
    actors: ActorPart;
    deploys: DeploysPart;
  },
): RoutingPart {
  const { counters } = store;
  const { plane } = cluster;
  const { host } = actors;
  const { unsetRequired } = deploys;
  const { admission } = bounds;
  const waits = new FailoverWaits({
    clock,
    random,
    maxWaitMs: input.options.cluster?.failoverWaitMs ?? 0,
    maxKept: Math.floor(admission.max / 4),
    count: (outcome) => counters.failoverWait(outcome),
    observer: observers?.waits,
  });
  const routing = new RequestRouting({
    plane,
    holdsHere: (actor) => host.holds(actor),
    // Every event this node runs (requests, calls, alarms) waits while its
    // class lacks a required value; an alarm is retried.
    dispatch: (key, request, special) => unsetRequired(key) ?? host.dispatch(key, request, special),
    waits,
    log,
  });
  const onCall = createCallHandler({
    hasClass: (name) => input.catalog.has(name),
    route: (target, request, call) => routing.routeCall(target, request, call),
  }, clock);
  return { waits, routing, onCall };
}
