/**
 * An actor's WebSocket upgrade (`GET /actor/<class>/<name>` with
 * `upgrade: websocket`): judged here, opened by the node's sockets.
 *
 * @module
 */

import { notReadyLine } from "../../net/headers.ts";
import { internalClass, retryLater, textResponse, withNode } from "../answers.ts";
import type { PortContext } from "../port_context.ts";
import { actorOf, existenceRefusal, isActorPath } from "./actor_path.ts";
import type { Incoming, Route } from "./route.ts";

const EMPTY = new Uint8Array(0);

async function openUpgrade(incoming: Incoming, context: PortContext): Promise<Response> {
  const target = actorOf(incoming, context);
  if (target instanceof Response) return target;
  const { className, name, rest } = target;
  const { request, url, headers } = incoming;
  const reason = context.notReadyReason();
  const problem = context.handshakeProblem(request);
  if (problem) return textResponse(400, `bad WebSocket upgrade: ${problem}`);
  if (!context.openSocket) return textResponse(501, "WebSockets are not served on this port");
  if (reason) return retryLater(notReadyLine(reason));
  const access = context.access?.(className, name) ?? "run";
  if (access === "internal") return internalClass(className);
  const key = { tenant: context.tenant, class: className, name };
  const missing = context.missing?.(className);
  if (missing) {
    return retryLater(
      `class '${className}' is missing required values (${missing.join(", ")}); retry`,
    );
  }
  const refusal = access === "existing-only" && await existenceRefusal(context, key);
  if (refusal) return refusal;
  // A socket holds its place for as long as it is open, as a connection would.
  const place = context.admit?.();
  if (typeof place === "string") return retryLater(place);
  const opened = await context.openSocket(key, request, {
    method: request.method,
    path: rest,
    query: url.search.slice(1),
    headers: headers.pairs,
    body: EMPTY,
  }, place);
  return withNode(opened, context.nodeId);
}

/**
 * The upgrade route: an actor path asking for a WebSocket.
 *
 * @example
 * ```ts
 * import { actorUpgrade } from "./actor_upgrade.ts";
 * const routes = [actorUpgrade];
 * ```
 */
export const actorUpgrade: Route = {
  matches: (incoming) =>
    isActorPath(incoming) && incoming.headers.upgrade?.toLowerCase() === "websocket",
  answer: openUpgrade,
};
