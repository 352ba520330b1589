/**
 * What both actor routes (requests and upgrades) judge first: the actor the
 * path names, and whether a class open only to existing actors lets a
 * client reach it.
 *
 * @module
 */

import type { ActorKey } from "../../actors/key.ts";
import { notReadyLine } from "../../net/headers.ts";
import { type ActorTarget, actorTarget, dotSegmentProblem } from "../actor_target.ts";
import { retryLater, textResponse } from "../answers.ts";
import type { PortContext } from "../port_context.ts";
import type { Incoming } from "./route.ts";

/**
 * Whether the request is for an actor's path (`/actor/...`), or was sent
 * as one before its `.` and `..` steps were resolved.
 *
 * @example
 * ```ts
 * import { isActorPath } from "./actor_path.ts";
 * const request = new Request("http://a/actor/c/n");
 * isActorPath({ request, url: new URL(request.url) }); // true
 * ```
 */
export function isActorPath({ request, url }: Pick<Incoming, "request" | "url">): boolean {
  return url.pathname.startsWith("/actor/") || dotSegmentProblem(request.url) !== undefined;
}

/**
 * The actor the request's path names, or the answer refusing it: 400 for a
 * bad name, 404 for a class this node does not have, 503 while the node
 * does not know its classes yet (its app's first version not applied).
 * A `.` or `..` for the class or name is a bad name too, as sent.
 *
 * @example
 * ```ts
 * import { actorOf } from "./actor_path.ts";
 * declare const incoming: Parameters<typeof actorOf>[0];
 * declare const context: Parameters<typeof actorOf>[1];
 * const target = actorOf(incoming, context);
 * console.log(target instanceof Response ? target.status : target.name);
 * ```
 */
export function actorOf({ request, url }: Incoming, context: PortContext): ActorTarget | Response {
  const dots = dotSegmentProblem(request.url);
  if (dots) return textResponse(dots.status, dots.line);
  const target = actorTarget(url.pathname, context.hasClass);
  if (!("status" in target)) return target;
  if (target.status === 404 && context.classesKnown?.() === false) {
    const waiting = context.notReadyReason() ?? "the app's first version is not applied yet";
    return retryLater(notReadyLine(waiting));
  }
  return textResponse(target.status, target.line);
}

/**
 * For a class open only to existing actors: the 404 of a request for an
 * actor that never existed, a 503 when the bucket cannot tell, or nothing.
 *
 * @example
 * ```ts
 * import { existenceRefusal } from "./actor_path.ts";
 * declare const context: Parameters<typeof existenceRefusal>[0];
 * const key = { tenant: "default", class: "counter", name: "alice" };
 * const refusal = await existenceRefusal(context, key);
 * console.log(refusal?.status ?? "exists");
 * ```
 */
export async function existenceRefusal(
  context: PortContext,
  key: ActorKey,
): Promise<Response | undefined> {
  try {
    if (await context.exists!(key)) return undefined;
  } catch {
    return retryLater("the bucket did not answer whether the actor exists; retry");
  }
  return textResponse(
    404,
    `no actor '${key.name}' of class '${key.class}': the class serves only actors that exist (access rule existing)`,
  );
}
