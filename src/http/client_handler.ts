/**
 * A node's HTTP port: a request's URL and headers read once, then the first
 * route of the port's table that matches answers it (src/http/routes/).
 * The client listener and the cluster listener are each one, under their
 * own table and context.
 *
 * @module
 */

import { NODE_HEADER } from "../net/headers.ts";
import { textResponse, withNode } from "./answers.ts";
import type { PortContext } from "./port_context.ts";
import { requestHeaders, requestUrl } from "./request_head.ts";
import type { Route } from "./routes/route.ts";

/**
 * Creates the handler of a port: `routes` in order, under `context`. Every
 * answer names the node that gave it.
 *
 * @example
 * ```ts
 * import { createPortHandler } from "./client_handler.ts";
 * import { CLIENT_ROUTES } from "./routes/tables.ts";
 * import type { PortContext } from "./port_context.ts";
 * declare const context: PortContext; // what the node answers with
 * Deno.serve(createPortHandler(CLIENT_ROUTES, context));
 * ```
 */
export function createPortHandler(
  routes: readonly Route[],
  context: PortContext,
): (request: Request) => Promise<Response> {
  return async (request: Request): Promise<Response> => {
    const headers = requestHeaders(request.headers);
    const url = requestUrl(request.url, headers.host);
    if (typeof url === "string") return withNode(textResponse(400, url), context.nodeId);
    const incoming = { request, url, headers };
    const route = routes.find((route) => route.matches(incoming, context));
    const response = route ? await route.answer(incoming, context) : textResponse(404, "not found");
    // A route that answers for another node (a forwarded answer) named it.
    return response.headers.has(NODE_HEADER) ? response : withNode(response, context.nodeId);
  };
}
