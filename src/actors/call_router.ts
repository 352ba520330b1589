/**
 * actors.call as the node carries it out: checks the target, refuses a call
 * that would wait on itself, gives the callee's event its caller and chain,
 * and bounds the wait for the answer.
 *
 * What the caller gets: `ok` with the callee's answer whenever the callee's
 * node took the event (its status may be an error: a trap's 500, a 504, a
 * full queue's 503), and an error string when the call was not run: an
 * unknown class, a bad name, a cycle, an unreachable node, no answer in
 * time.
 *
 * @module
 */

import type { Clock } from "../time/clock.ts";
import type { ActorCall } from "./executor_pool.ts";
import type { ActorRequest, ActorResponse, CallAnswer, EventOutcome } from "./protocol.ts";
import { type ActorKey, actorNameProblem } from "./key.ts";
import { actorRef, callRefusal, withCallHeaders } from "./call_chain.ts";

/** How long a caller waits for its call's answer (the spec's 30 s for actors.call). */
export const CALL_TIMEOUT_MS = 30_000;

/** A call that was not run, with the error its caller gets. */
export interface CallNotRun {
  kind: "not-run";
  error: string;
}

/** Where the node sends a call's event. */
export interface CallRoutes {
  /** Whether the class is served by this node's code. */
  hasClass(name: string): boolean;
  /**
   * Runs the event here, or sends it to the node holding the target (signed
   * with `caller` and `chain`), once; `not-run` when it went nowhere.
   */
  route(
    target: ActorKey,
    request: ActorRequest,
    call: { caller: string; chain: readonly string[] },
  ): Promise<EventOutcome | CallNotRun>;
}

/**
 * Why the path of a call is refused, or `undefined`. It is the rest of the
 * callee's `/actor/<class>/<name>` path, so nothing in it may step out of
 * that (a `.` or `..` segment, plain or percent-encoded, or a backslash,
 * which URLs read as a slash) or end it (`?` or `#`: the query is a field of
 * its own).
 *
 * @example
 * ```ts
 * import { callPathProblem } from "./call_router.ts";
 * callPathProblem("/items/7"); // undefined
 * callPathProblem("/../../vault/main"); // "a '.' or '..' segment"
 * ```
 */
export function callPathProblem(path: string): string | undefined {
  if (/[?#\\]/.test(path)) return "'?', '#' or '\\'";
  for (const segment of path.split("/")) {
    if (/^(\.|%2e){1,2}$/i.test(segment)) return "a '.' or '..' segment";
  }
  return undefined;
}

/** The answer of a failed outcome, as the callee's node would answer a client. */
function failedResponse(status: number, message: string): ActorResponse {
  return {
    status,
    headers: [["content-type", "text/plain; charset=utf-8"]],
    body: new TextEncoder().encode(message + "\n"),
  };
}

/**
 * Makes the node's handler of actors.call.
 *
 * @example
 * ```ts
 * import { createCallHandler } from "./call_router.ts";
 * import { systemClock } from "../time/clock.ts";
 * const onCall = createCallHandler({
 *   hasClass: (name) => name === "room",
 *   route: () => Promise.resolve({ kind: "not-run", error: "nowhere" } as const),
 * }, systemClock);
 * const answer = await onCall({
 *   caller: { tenant: "default", class: "room", name: "a" },
 *   chain: [],
 *   target: { tenant: "default", class: "room", name: "a" },
 *   request: { method: "GET", path: "/", query: "", headers: [], body: new Uint8Array() },
 * });
 * console.log(answer.ok); // false: a call to itself is a cycle
 * ```
 */
export function createCallHandler(
  routes: CallRoutes,
  clock: Clock,
  timeoutMs = CALL_TIMEOUT_MS,
): (call: ActorCall) => Promise<CallAnswer> {
  return async ({ caller, chain, target, request }) => {
    if (!routes.hasClass(target.class)) {
      return { ok: false, error: `no actor class '${target.class}' on this node` };
    }
    const problem = actorNameProblem(target.name);
    if (problem) return { ok: false, error: `bad actor name: ${problem}` };
    const path = request.path.startsWith("/") ? request.path : `/${request.path}`;
    const pathProblem = callPathProblem(path);
    if (pathProblem) return { ok: false, error: `bad path: ${pathProblem}` };
    const callerRef = actorRef(caller);
    const refusal = callRefusal(callerRef, chain, actorRef(target));
    if (refusal) return { ok: false, error: refusal };
    const event: ActorRequest = {
      ...request,
      path,
      // Names as the callee's interface has them: lower case. A caller's
      // own X-WasmKeep-Caller would otherwise pass the filter beside the
      // node's and could be taken for it.
      headers: withCallHeaders(
        request.headers.map(([name, value]) => [name.toLowerCase(), value]),
        callerRef,
        chain,
      ),
    };
    let timer;
    const timedOut = new Promise<CallNotRun>((resolve) => {
      timer = clock.setTimer(timeoutMs, () =>
        resolve({
          kind: "not-run",
          error: `the call to ${target.class}/${target.name} was not answered within ${
            timeoutMs / 1000
          } s`,
        }));
    });
    let outcome: EventOutcome | CallNotRun;
    try {
      outcome = await Promise.race([
        routes.route(target, event, { caller: callerRef, chain }),
        timedOut,
      ]);
    } finally {
      timer!.cancel();
    }
    if (outcome.kind === "not-run") return { ok: false, error: outcome.error };
    if (outcome.kind === "failed") {
      return { ok: true, response: failedResponse(outcome.status, outcome.message) };
    }
    return { ok: true, response: outcome.response };
  };
}
