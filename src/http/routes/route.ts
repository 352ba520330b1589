/**
 * A route of a node's port: which requests it answers, and how. A port is
 * a table of routes (src/http/routes/tables.ts) under a policy (its
 * {@linkcode PortContext}); the first route that matches answers.
 *
 * @module
 */

import type { PortContext } from "../port_context.ts";
import type { RequestHeaders } from "../request_head.ts";

/** A request as the port read it before routing. */
export interface Incoming {
  request: Request;
  /** The request's URL, judged (src/http/request_head.ts). */
  url: URL;
  headers: RequestHeaders;
}

/**
 * One route: one module under src/http/routes/, one line in a table.
 *
 * @example
 * ```ts
 * import type { Route } from "./route.ts";
 * import { textResponse } from "../answers.ts";
 * const hello: Route = {
 *   matches: ({ url }) => url.pathname === "/hello",
 *   answer: () => textResponse(200, "hello"),
 * };
 * ```
 */
export interface Route {
  /** Whether this route answers `incoming` on a port with `context`. */
  matches(incoming: Incoming, context: PortContext): boolean;
  /**
   * The answer. The port names its node in it (`x-wasmkeep-node`),
   * unless the route named another (a forwarded answer names the node
   * that ran the event).
   */
  answer(incoming: Incoming, context: PortContext): Response | Promise<Response>;
}

/**
 * A route for one exact path.
 *
 * @example
 * ```ts
 * import { exactPath } from "./route.ts";
 * import { textResponse } from "../answers.ts";
 * const hello = exactPath("/hello", () => textResponse(200, "hello"));
 * ```
 */
export function exactPath(
  path: string,
  answer: Route["answer"],
  served: (context: PortContext) => boolean = () => true,
): Route {
  return { matches: ({ url }, context) => url.pathname === path && served(context), answer };
}
