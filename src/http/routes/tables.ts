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
 * ```ts ignore
 * Deno.serve(createPortHandler(CLIENT_ROUTES, context));
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
 * ```ts ignore
 * const handler = createPortHandler(CLUSTER_ROUTES, clusterContext);
 * ```
 */
export const CLUSTER_ROUTES: readonly Route[] = [
  health,
  ready,
  alarmHandover,
  actorUpgrade,
  actorRequest,
];
