/**
 * `/_wasmkeep/health`: the process answers (nothing more is checked).
 *
 * @module
 */

import { textResponse } from "../answers.ts";
import { exactPath, type Route } from "./route.ts";

/**
 * The health route: 200 `ok` while the process serves HTTP at all.
 *
 * @example
 * ```ts
 * import { health } from "./health.ts";
 * const routes = [health];
 * ```
 */
export const health: Route = exactPath("/_wasmkeep/health", () => textResponse(200, "ok"));
