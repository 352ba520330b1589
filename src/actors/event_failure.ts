/**
 * An event's failure with a status the actor did not choose.
 *
 * @module
 */

/**
 * Raised when an event must fail with a status the actor did not choose (a
 * 503 when the lease ran out, a 504 past its limit, an alarm the bucket did
 * not list): an outcome, not a bug.
 *
 * @example
 * ```ts
 * import { EventFailure } from "./event_failure.ts";
 * const failure = new EventFailure(503, "the node's lease ran out; retry");
 * console.log(failure.status); // 503
 * ```
 */
export class EventFailure extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
    this.name = "EventFailure";
  }
}
