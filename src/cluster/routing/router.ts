/**
 * Where a request for an actor runs: here, on the live node that holds it
 * (forwarded once), or nowhere yet (its holder is neither live nor freed by
 * a fence or a release). The spec's "How it works": "A request that reaches
 * a node not holding the actor is forwarded once to the node the record
 * names, if that node is live."
 *
 * @module
 */

import type { ActorKey } from "../../actors/key.ts";
import type { OwnerRecord } from "../ownership.ts";

/** What the router needs to know of the cluster. */
export interface RouterView {
  /** This node's id. */
  nodeId: string;
  /** Whether this node holds the actor now (resident, with a hold). */
  holdsHere(actor: ActorKey): boolean;
  /** The actor's ownership record, `undefined` when it has none. */
  readRecord(actor: ActorKey): Promise<OwnerRecord | undefined>;
  /** Whether a node's heartbeat is live. */
  isLive(nodeId: string): boolean;
  /**
   * Whether the record is free to take: its node's heartbeat says released
   * or fenced, as the process the record names or a later one (the rule
   * the take itself applies, so routing and taking agree).
   */
  frees(record: OwnerRecord): boolean;
  /**
   * The address to send a live node's requests to (its cluster listener, or
   * its `--advertise`), or undefined when this node may not reach it.
   */
  addressOf(nodeId: string): string | undefined;
  /** Why a live node has no address for this node, when it has none. */
  whyNoAddress?(nodeId: string): string | undefined;
  /**
   * Whether a live node is suspected: this node could not open a connection
   * to it, and no lease write of it since proves it alive.
   */
  isSuspected(nodeId: string): boolean;
  /**
   * The node remembered to hold the actor from an earlier route (its record
   * is then not read while that node is live), if any.
   */
  rememberedHolder?(actor: ActorKey): string | undefined;
}

/** Where a request goes. */
export type Route =
  | { kind: "local" }
  | {
    kind: "forward";
    node: string;
    address: string;
    /** Sent to a remembered holder, without reading the record. */
    remembered?: boolean;
  }
  /**
   * A request another node forwarded here for an actor this node does not
   * hold and will not take (its record names `node`): answered "not held",
   * which proves it did not run, so the sender may route it again.
   */
  | { kind: "not-held"; node: string }
  | {
    kind: "unavailable";
    /** The node the record names. */
    node: string;
    message: string;
    /**
     * The holder is gone or going (not live, not freed yet): a GET or HEAD
     * may be kept until the takeover (failover wait).
     */
    ownerDown: boolean;
  };

/**
 * Decides where a request for `actor` runs. `forwarded`: another node sent
 * it here already, so it is never sent on (it is run here, or answered
 * "not held"). A remembered holder that is live, not suspected and
 * reachable gets the request without a read of the record, unless
 * `fresh` (the route after a "not held" answer).
 *
 * @example
 * ```ts
 * import { routeRequest, type RouterView } from "./router.ts";
 * declare const view: RouterView;
 * declare const forward: (address: string, request: Request) => Promise<Response>;
 * declare const request: Request;
 * const actor = { tenant: "default", class: "counter", name: "a" };
 * const route = await routeRequest(view, actor, false);
 * if (route.kind === "forward") await forward(route.address, request);
 * ```
 */
export async function routeRequest(
  view: RouterView,
  actor: ActorKey,
  forwarded: boolean,
  fresh = false,
): Promise<Route> {
  if (view.holdsHere(actor)) return { kind: "local" };
  if (!forwarded && !fresh) {
    const remembered = view.rememberedHolder?.(actor);
    if (
      remembered !== undefined && remembered !== view.nodeId && view.isLive(remembered) &&
      !view.isSuspected(remembered)
    ) {
      const address = view.addressOf(remembered);
      if (address) return { kind: "forward", node: remembered, address, remembered: true };
    }
  }
  const record = await view.readRecord(actor);
  if (!record || record.state === "released" || record.node === view.nodeId) {
    return { kind: "local" };
  }
  if (view.frees(record)) return { kind: "local" };
  // Sent here by a node that took this one for the holder: it routes again.
  if (forwarded) return { kind: "not-held", node: record.node };
  if (view.isLive(record.node) && view.isSuspected(record.node)) {
    return {
      kind: "unavailable",
      node: record.node,
      message: `the actor's node ${record.node} is not reachable; retry`,
      ownerDown: true,
    };
  }
  if (view.isLive(record.node)) {
    const address = view.addressOf(record.node);
    if (!address) {
      return {
        kind: "unavailable",
        node: record.node,
        message: view.whyNoAddress?.(record.node) ||
          `the actor is held by node ${record.node}; retry`,
        ownerDown: false,
      };
    }
    return { kind: "forward", node: record.node, address };
  }
  return {
    kind: "unavailable",
    node: record.node,
    message: `the actor's node ${record.node} is not reachable; retry`,
    ownerDown: true,
  };
}
