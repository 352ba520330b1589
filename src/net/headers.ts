/**
 * The names and answers nodes and clients read off each other's HTTP: the
 * `x-wasmkeep-*` headers a node sets, and the status lines its ports give.
 * Both ports (src/http/) and the cluster's routing (src/cluster/) speak
 * these, so they live below both.
 *
 * @module
 */

/**
 * The header naming the node that answered.
 *
 * @example
 * ```ts
 * import { NODE_HEADER } from "./headers.ts";
 * console.log(NODE_HEADER); // "x-wasmkeep-node"
 * ```
 */
export const NODE_HEADER = "x-wasmkeep-node";

/**
 * The header naming the node that forwarded a request, so its peer does not
 * forward it again.
 *
 * @example
 * ```ts
 * import { FORWARDED_BY_HEADER } from "./headers.ts";
 * console.log(FORWARDED_BY_HEADER); // "x-wasmkeep-forwarded-by"
 * ```
 */
export const FORWARDED_BY_HEADER = "x-wasmkeep-forwarded-by";

/**
 * The status and header of a "not held" answer to a forwarded request: this
 * node does not hold the actor, its record names the header's node, and the
 * request did not run. Only the node's port answers so: it removes the
 * header from every actor's own answer, so no actor can say it.
 *
 * @example
 * ```ts
 * import { NOT_HELD_HEADER, NOT_HELD_STATUS } from "./headers.ts";
 * console.log(NOT_HELD_STATUS, NOT_HELD_HEADER); // 421 "x-wasmkeep-not-held"
 * ```
 */
export const NOT_HELD_HEADER = "x-wasmkeep-not-held";
/** See {@linkcode NOT_HELD_HEADER}: 421 Misdirected Request. */
export const NOT_HELD_STATUS = 421;

/**
 * The header of an answer to retry: a 503 says to come back in a second.
 *
 * @example
 * ```ts
 * import { RETRY_SOON } from "./headers.ts";
 * new Response("busy\n", { status: 503, headers: RETRY_SOON });
 * ```
 */
export const RETRY_SOON: Readonly<Record<string, string>> = Object.freeze({ "retry-after": "1" });

/**
 * The line of a node's "not ready" answer (its ready check, and the 503 of a
 * request it cannot serve now).
 *
 * @example
 * ```ts
 * import { notReadyLine } from "./headers.ts";
 * notReadyLine("stopping"); // "not ready: stopping"
 * ```
 */
export function notReadyLine(reason: string): string {
  return `not ready: ${reason}`;
}
