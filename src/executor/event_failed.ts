/**
 * How an event that did not end well is told to the node: the status and
 * one-line message its client gets, and what the node's log keeps. A
 * failure the runtime chose ({@linkcode EventFailure}) and an on-alarm's
 * own error are said as they are; a trap or a host failure is logged with
 * its stack under an error id, and the client gets only the id.
 *
 * @module
 */

import type { Logger } from "../log.ts";
import { describeError } from "../describe_error.ts";
import { GuestError } from "../actors/abi/direct.ts";
import { EventFailure } from "../actors/event_failure.ts";

/** The status and message of a failed event, for its `failed` message. */
export interface EventFailed {
  status: number;
  message: string;
}

/**
 * What the node is told of the event of `actorId` that failed with `error`;
 * `onAlarm` when it was an alarm's event (its own error is retried).
 *
 * @example
 * ```ts
 * import { describeFailedEvent } from "./event_failed.ts";
 * import { createLogger } from "../log.ts";
 * declare const error: unknown;
 * const { status, message } = describeFailedEvent(error, {
 *   actorId: "default/counter/a",
 *   onAlarm: false,
 *   log: createLogger(),
 *   errorId: () => crypto.randomUUID(),
 * });
 * ```
 */
export function describeFailedEvent(
  error: unknown,
  context: { actorId: string; onAlarm: boolean; log: Logger; errorId: () => string },
): EventFailed {
  const { actorId, log } = context;
  if (error instanceof EventFailure) {
    log.warn("event failed", { actor: actorId, reason: error.message });
    return { status: error.status, message: error.message };
  }
  const payload = (error as { payload?: unknown } | undefined)?.payload;
  if (context.onAlarm && typeof payload === "string") {
    const message = `the actor's on-alarm failed: ${payload}`;
    log.warn("event failed", { actor: actorId, reason: message });
    return { status: 500, message };
  }
  const id = context.errorId();
  const text = error instanceof GuestError
    ? `host error not returned to the actor: ${JSON.stringify(error.payload)}`
    : describeError(error, "stack");
  log.error("actor failed", { actor: actorId, error_id: id, error: text });
  return { status: 500, message: `the actor failed (error id ${id})` };
}
