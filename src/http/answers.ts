/**
 * The one-line answers of a node's ports: plain text, the node that
 * answered named in a header, and the answer to an event that did not run.
 *
 * @module
 */

import type { FailedOutcome } from "../actors/protocol.ts";
import { NODE_HEADER, NOT_HELD_HEADER, NOT_HELD_STATUS, RETRY_SOON } from "../net/headers.ts";

/**
 * A one-line plain-text answer.
 *
 * @example
 * ```ts
 * import { textResponse } from "./answers.ts";
 * const response = textResponse(404, "not found");
 * console.log(await response.text()); // "not found\n"
 * ```
 */
export function textResponse(
  status: number,
  message: string,
  headers: Readonly<Record<string, string>> = {},
): Response {
  return new Response(message + "\n", {
    status,
    headers: { "content-type": "text/plain; charset=utf-8", ...headers },
  });
}

/**
 * A 503 to retry in a second, with its one line.
 *
 * @example
 * ```ts
 * import { retryLater } from "./answers.ts";
 * retryLater("not ready: stopping").headers.get("retry-after"); // "1"
 * ```
 */
export function retryLater(message: string): Response {
  return textResponse(503, message, RETRY_SOON);
}

/**
 * `response` with the node that answered it named ({@linkcode NODE_HEADER}).
 *
 * @example
 * ```ts
 * import { textResponse, withNode } from "./answers.ts";
 * withNode(textResponse(200, "ok"), "node-a").headers.get("x-wasmkeep-node"); // "node-a"
 * ```
 */
export function withNode(response: Response, node: string): Response {
  response.headers.set(NODE_HEADER, node);
  return response;
}

/**
 * The answer to an event that did not run to an answer (or a body that
 * could not be read): "not held" with the holder named, or its status and
 * line (a 503 to retry).
 *
 * @example
 * ```ts
 * import { failedAnswer } from "./answers.ts";
 * failedAnswer({ kind: "failed", status: 503, message: "busy" }).status; // 503
 * ```
 */
export function failedAnswer(outcome: FailedOutcome): Response {
  if (outcome.notHeld !== undefined) {
    return textResponse(NOT_HELD_STATUS, outcome.message, { [NOT_HELD_HEADER]: outcome.notHeld });
  }
  return textResponse(outcome.status, outcome.message, outcome.status === 503 ? RETRY_SOON : {});
}

/**
 * The 403 of a client's request for an internal class.
 *
 * @example
 * ```ts
 * import { internalClass } from "./answers.ts";
 * internalClass("ledger").status; // 403
 * ```
 */
export function internalClass(className: string): Response {
  return textResponse(
    403,
    `actor class '${className}' is internal: only actors reach it, with actors.call`,
  );
}
