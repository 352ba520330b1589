/**
 * Opening a WebSocket to an actor on this node: the socket caps, where the
 * actor is (in a cluster, the route a request would take), then
 * `Deno.upgradeWebSocket`, and the socket handed to {@linkcode ActorSockets},
 * whose `open` event runs once the 101 went out.
 *
 * An actor another node holds is not relayed yet (issue 18, item 2): its
 * upgrade is answered 503 with the holder named, so the client can retry
 * there or later.
 *
 * @module
 */

import type { ActorKey } from "../actors/key.ts";
import type { ActorRequest } from "../actors/protocol.ts";
import type { Route } from "../cluster/routing/router.ts";
import type { ActorSockets } from "./actor_sockets.ts";

/**
 * Seconds a socket may stay silent before the node pings it; a client that
 * does not answer the ping in as long again is dropped (dead clients
 * detected, `Deno.upgradeWebSocket`'s `idleTimeout`).
 */
export const SOCKET_IDLE_TIMEOUT_SECS = 30;

/** What {@linkcode socketOpener} works with. */
export interface SocketOpenerOptions {
  sockets: ActorSockets;
  /** Where a request for the actor goes; unset on a standalone node (always here). */
  route?: (key: ActorKey) => Promise<Route>;
}

/**
 * The function the client handler gives a valid WebSocket upgrade of
 * `key`: the 101, or the answer that refuses it.
 *
 * @example
 * ```ts ignore
 * const open = socketOpener({ sockets, route: (key) => plane.route(key, false, holdsHere) });
 * return await open(key, request, upgradeRequest);
 * ```
 */
export function socketOpener(
  options: SocketOpenerOptions,
): (key: ActorKey, request: Request, upgrade: ActorRequest) => Promise<Response> {
  const { sockets, route } = options;
  return async (key, request, upgrade) => {
    const refusal = sockets.refusal(key);
    if (refusal) return refuse(503, refusal);
    const where = route ? await route(key) : { kind: "local" as const };
    switch (where.kind) {
      case "local":
        break;
      case "forward":
        return refuse(
          503,
          `the actor is held by node ${where.node}, and WebSockets are not relayed between ` +
            "nodes in this version yet; open it there, or retry",
        );
      case "unavailable":
        return refuse(503, where.message);
      case "not-held":
        return refuse(503, `the actor is held by node ${where.node}; retry`);
    }
    const { socket, response } = Deno.upgradeWebSocket(request, {
      idleTimeout: SOCKET_IDLE_TIMEOUT_SECS,
    });
    sockets.accept(key, upgrade, socket);
    return response;
  };
}

function refuse(status: number, line: string): Response {
  return new Response(line + "\n", {
    status,
    headers: { "content-type": "text/plain; charset=utf-8", "retry-after": "1" },
  });
}
