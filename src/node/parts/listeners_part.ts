/**
 * The node's ports: the client port and the cluster port, each the same
 * table of routes (src/http/routes/tables.ts) under its own context, and
 * the client listener, which starts taking requests here.
 *
 * @module
 */

import type { ActorKey } from "../../actors/key.ts";
import type { ActorRequest } from "../../actors/protocol.ts";
import type { Handover } from "../../alarms/alarm_handover.ts";
import { appNameString } from "../../deploy/app_name.ts";
import { whyRefuseAlarms } from "../../handover/takers.ts";
import { createPortHandler } from "../../http/client_handler.ts";
import type { PortContext } from "../../http/port_context.ts";
import { CLIENT_ROUTES, CLUSTER_ROUTES } from "../../http/routes/tables.ts";
import type { UnreadBody } from "../../http/unread_body.ts";
import { handshakeProblem } from "../../websockets/handshake.ts";
import type { CallSecurity } from "../policies.ts";
import type { ClientListener } from "../listen.ts";
import type { ActorPart } from "./actor_part.ts";
import type { AlarmsPart } from "./alarms_part.ts";
import type { BoundsPart } from "./bounds_part.ts";
import type { BucketPart } from "./bucket_part.ts";
import type { ClusterPart } from "./cluster_part.ts";
import type { DeploysPart } from "./deploys_part.ts";
import type { RoutingPart } from "./routing_part.ts";
import type { SocketsPart } from "./sockets_part.ts";
import type { NodeInput, NodeSeams } from "./seams.ts";

/** The ports' handlers and the client listener, listening. */
export interface ListenersPart {
  /** The client listener's handler. */
  handler: (request: Request) => Promise<Response>;
  /** The cluster listener's handler (the lifecycle starts that listener on joining). */
  clusterHandler: (request: Request) => Promise<Response>;
  listener: ClientListener;
}

/** What the ports need of the node's other parts. */
export interface ListenersNeeds {
  store: BucketPart;
  bounds: BoundsPart;
  cluster: ClusterPart;
  calls: CallSecurity;
  actors: ActorPart;
  deploys: DeploysPart;
  routing: RoutingPart;
  alarms: AlarmsPart;
  sockets: SocketsPart;
  tenant: string;
}

/** What both ports share: the node's classes, readiness, places and events. */
function sharedContext(
  { options, catalog }: NodeInput,
  { log }: NodeSeams,
  { store, bounds, cluster, deploys, routing, alarms, tenant }: ListenersNeeds,
): PortContext {
  const { readiness, existing } = deploys;
  const { counters } = store;
  const dispatch = async (
    key: ActorKey,
    request: ActorRequest,
    client?: { readonly signal: AbortSignal; readonly body?: UnreadBody },
  ) => {
    const outcome = await routing.routing.route(key, request, client);
    counters.event(
      key.class,
      outcome.kind === "response" ? outcome.response.status : outcome.status,
    );
    return outcome;
  };
  return {
    nodeId: options.nodeId,
    tenant,
    maxBodyBytes: options.maxBodyBytes,
    hasClass: (name: string) => catalog.has(name),
    classesKnown: deploys.classesKnown,
    notReadyReason: () => readiness.reason(),
    readyReport: () => readiness.readyReport(),
    handshakeProblem,
    dispatch,
    // Where requests may go on to another node, a long body is sent on as it is read.
    streamsBodies: cluster.plane !== undefined,
    admit: () => bounds.admission.admit(),
    access: (className: string, name: string) => catalog.access(className, name),
    missing: (className: string) => catalog.missing(className),
    exists: (key: ActorKey) => existing.exists(key),
    // A peer's clean stop hands its alarms to this node's timer: those of
    // its own app only, since two tenants' nodes may share a prefix.
    armAlarms: cluster.plane
      ? (handover: Handover) => {
        const app = options.app && appNameString(options.app);
        const keys = handover.alarms.map(({ key }) => key);
        const refused = whyRefuseAlarms(keys, handover.app, app);
        if (refused !== undefined) {
          log.warn("refused alarms a peer handed over", { reason: refused });
          return refused;
        }
        for (const { key, due } of handover.alarms) alarms.alarmTimers.arm(key, due, "owner");
        return undefined;
      }
      : undefined,
  };
}

/**
 * Builds both ports' handlers and listens for clients. The client port
 * opens WebSockets and serves metrics; refusing plain HTTP between nodes, a
 * signed call there is a client's request (no caller, internal classes
 * refused). The cluster port believes signed calls. A listener that cannot
 * listen throws, the host drained first.
 *
 * @example
 * ```ts
 * import { type ListenersNeeds, listenersPart } from "./listeners_part.ts";
 * import type { NodeInput, NodeSeams } from "./seams.ts";
 * declare const input: NodeInput;
 * declare const seams: NodeSeams;
 * declare const needs: ListenersNeeds;
 * const { handler, listener } = listenersPart(input, seams, needs);
 * ```
 */
export function listenersPart(
  input: NodeInput,
  seams: NodeSeams,
  needs: ListenersNeeds,
): ListenersPart {
  const { calls, store, actors, sockets } = needs;
  const shared = sharedContext(input, seams, needs);
  const verifyCall: PortContext["verifyCall"] = (request) => calls.verify(request);
  const handler = createPortHandler(CLIENT_ROUTES, {
    ...shared,
    openSocket: sockets.openSocket,
    renderMetrics: () => store.metrics.render(),
    verifyCall: input.options.cluster?.plaintext === "accept" ? verifyCall : undefined,
  });
  const clusterHandler = createPortHandler(CLUSTER_ROUTES, { ...shared, verifyCall });
  let listener: ClientListener;
  try {
    listener = seams.listen(handler);
  } catch (error) {
    // Nothing runs yet but the host's hibernation sweep, which a drain ends.
    void actors.host.drain(0);
    throw error;
  }
  return { handler, clusterHandler, listener };
}
