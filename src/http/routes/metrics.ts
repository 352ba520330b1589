/**
 * `/_wasmkeep/metrics`: the node's metrics, where its port renders them.
 *
 * @module
 */

import { exactPath, type Route } from "./route.ts";

/**
 * The metrics route, in the Prometheus text format; served only on a port
 * whose context renders metrics.
 *
 * @example
 * ```ts
 * import { metrics } from "./metrics.ts";
 * const routes = [metrics];
 * ```
 */
export const metrics: Route = exactPath(
  "/_wasmkeep/metrics",
  (_incoming, context) =>
    new Response(context.renderMetrics!(), {
      headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8" },
    }),
  (context) => context.renderMetrics !== undefined,
);
