/**
 * Which path goes where on each of a node's ports. The first route that
 * matches answers; a request none matches is answered 404. Adding a route
 * is one module under src/http/routes/ and one line here.
 *
 * @module
 */

import { actorRequest } from "./actor_request.ts";
import { actorUpgrade } from "./actor_upgrade.ts";
import { alarmHandover } from "./alarm_handover.ts";
import { health } from "./health.ts";
import { metrics } from "./metrics.ts";
import { ready } from "./ready.ts";
import type { Route } from "./route.ts";

/**
 * The client port's routes.
 *
 * @example
 * ```ts
 * import { CLIENT_ROUTES } from "./tables.ts";
 * import type { Route } from "./route.ts";
 * // createPortHandler (../client_handler.ts) tries them in this order.
 * const paths: readonly Route[] = CLIENT_ROUTES;
 * console.log(paths.length);
 * ```
 */
export const CLIENT_ROUTES: readonly Route[] = [
  health,
  ready,
  metrics,
  alarmHandover,
  actorUpgrade,
  actorRequest,
];

/**
 * The cluster port's routes: the client port's but its metrics (peers
 * scrape nothing there). Its policy, which signatures it believes and that
 * it opens no WebSocket, is its context's.
 *
 * @example
 * ```ts
 * import { CLIENT_ROUTES, CLUSTER_ROUTES } from "./tables.ts";
 * // Served under the cluster listener's policy by createPortHandler (../client_handler.ts).
 * console.log(CLIENT_ROUTES.filter((route) => !CLUSTER_ROUTES.includes(route)).length); // 1
 * ```
 */
export const CLUSTER_ROUTES: readonly Route[] = [
  health,
  ready,
  alarmHandover,
  actorUpgrade,
  actorRequest,
];
