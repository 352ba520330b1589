/**
 * `/_wasmkeep/ready`: whether the node serves, and why not.
 *
 * @module
 */

import { textResponse } from "../answers.ts";
import { notReadyLine } from "../../net/headers.ts";
import { exactPath, type Route } from "./route.ts";

/**
 * The ready route: 200 `ready`, or 503 with the reason the node gives
 * (its ready report, which may name what keeps it from being ready while
 * it still serves).
 *
 * @example
 * ```ts
 * import { ready } from "./ready.ts";
 * const routes = [ready];
 * ```
 */
export const ready: Route = exactPath("/_wasmkeep/ready", (_incoming, context) => {
  const reason = context.readyReport?.() ?? context.notReadyReason();
  return reason ? textResponse(503, notReadyLine(reason)) : textResponse(200, "ready");
});
