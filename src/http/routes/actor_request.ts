/**
 * An actor's request (`/actor/<class>/<name>[/<rest>]`): admitted, its body
 * read (or left unread for where it runs), its signature checked, its
 * access rule applied, dispatched, and the actor's answer made HTTP.
 *
 * @module
 */

import type { EventOutcome } from "../../actors/protocol.ts";
import { withCallHeaders } from "../../actors/call_chain.ts";
import { NOT_HELD_HEADER, NOT_HELD_STATUS, notReadyLine } from "../../net/headers.ts";
import type { ActorTarget } from "../actor_target.ts";
import { failedAnswer, internalClass, retryLater, textResponse, withNode } from "../answers.ts";
import type { PortContext } from "../port_context.ts";
import { readBody, type RequestHeaders } from "../request_head.ts";
import {
  bodyReadFailure,
  BodyTooLarge,
  MAX_REPLAYED_BODY_BYTES,
  UnreadBody,
} from "../unread_body.ts";
import { actorOf, existenceRefusal, isActorPath } from "./actor_path.ts";
import type { Incoming, Route } from "./route.ts";

const EMPTY = new Uint8Array(0);

/**
 * What the dispatch reads of the client: the request's signal, made by
 * Deno.serve only on first read (see {@linkcode PortContext.dispatch}).
 */
class Client {
  readonly #request: Request;

  constructor(request: Request, readonly body: UnreadBody | undefined) {
    this.#request = request;
  }

  get signal(): AbortSignal {
    return this.#request.signal;
  }
}

/**
 * The body to leave unread until the route is known: one longer than
 * {@linkcode MAX_REPLAYED_BODY_BYTES} or of unknown length, on a node that
 * streams bodies, without a call signature (which covers the body); or
 * undefined: read it now.
 */
function unreadBody(
  context: PortContext,
  request: Request,
  headers: RequestHeaders,
): UnreadBody | undefined {
  const declared = headers.contentLength;
  if (!context.streamsBodies || headers.signed || declared === "0") return undefined;
  const length = declared === undefined ? undefined : Number(declared);
  if (length !== undefined && length <= MAX_REPLAYED_BODY_BYTES) return undefined;
  if (!request.body) return undefined;
  return new UnreadBody(request.body, length, context.maxBodyBytes, context.notReadyReason);
}

/**
 * The body read whole, or the answer to one that could not be; without a
 * promise when it is in hand already (a declared empty body).
 */
function wholeBody(
  { request, headers }: Incoming,
  context: PortContext,
): Uint8Array | Response | Promise<Uint8Array | Response> {
  const { maxBodyBytes } = context;
  const failed = (error: unknown) =>
    failedAnswer(bodyReadFailure(error, maxBodyBytes, () => context.notReadyReason()));
  try {
    const read = readBody(request, headers.contentLength, maxBodyBytes);
    return read instanceof Uint8Array ? read : read.catch(failed);
  } catch (error) {
    return failed(error);
  }
}

/** The actor's answer as HTTP, named by the node that ran it. */
function actorAnswer(request: Request, outcome: EventOutcome, context: PortContext): Response {
  if (outcome.kind === "failed") return failedAnswer(outcome);
  const { status, body: responseBody } = outcome.response;
  const nullBody = status === 204 || status === 304 || request.method === "HEAD";
  if (nullBody) outcome.stream?.cancel().catch(() => {});
  try {
    // The pairs as they are, not through a Headers first: the Response
    // validates them once instead of twice (1.5 against 2.0-2.8 µs with
    // the node's header set after, measured).
    const answer = outcome.stream ?? responseBody as Uint8Array<ArrayBuffer>;
    const response = new Response(nullBody ? null : answer, {
      status,
      headers: outcome.response.headers,
    });
    // An actor cannot answer "not held": only the port does.
    if (status === NOT_HELD_STATUS) response.headers.delete(NOT_HELD_HEADER);
    // A forwarded answer names the node that ran the event.
    return withNode(response, outcome.node ?? context.nodeId);
  } catch (error) {
    return textResponse(502, `the actor's answer is not valid HTTP: ${(error as Error).message}`);
  }
}

/** An admitted request for `target`: its body, signature and access rule, then its event. */
async function runAdmitted(
  incoming: Incoming,
  target: ActorTarget,
  context: PortContext,
): Promise<Response> {
  const { request, url, headers } = incoming;
  const { className, name, rest } = target;
  const declared = headers.contentLength;
  if (declared !== undefined && Number(declared) > context.maxBodyBytes) {
    const tooLarge = bodyReadFailure(
      new BodyTooLarge(),
      context.maxBodyBytes,
      () => context.notReadyReason(),
    );
    return failedAnswer(tooLarge);
  }
  const unread = unreadBody(context, request, headers);
  const access = context.access?.(className, name) ?? "run";
  if (unread && access === "internal") return internalClass(className);
  let body = unread ? EMPTY : wholeBody(incoming, context);
  if (body instanceof Promise) body = await body;
  if (body instanceof Response) return body;
  let eventHeaders = headers.pairs;
  const verdict = context.verifyCall?.({
    method: request.method,
    path: url.pathname + url.search,
    body,
    headers: request.headers,
  });
  if (verdict && !verdict.ok) {
    return verdict.status === 503
      ? retryLater(verdict.reason)
      : textResponse(verdict.status, verdict.reason);
  }
  const key = { tenant: context.tenant, class: className, name };
  if (verdict) eventHeaders = withCallHeaders(eventHeaders, verdict.caller, verdict.chain);
  else if (access === "internal") return internalClass(className);
  else if (access === "existing-only") {
    const refusal = await existenceRefusal(context, key);
    if (refusal) return refusal;
  }
  const outcome = await context.dispatch(key, {
    method: request.method,
    path: rest,
    query: url.search.slice(1),
    headers: eventHeaders,
    body,
  }, new Client(request, unread));
  return actorAnswer(request, outcome, context);
}

async function runRequest(incoming: Incoming, context: PortContext): Promise<Response> {
  const target = actorOf(incoming, context);
  if (target instanceof Response) return target;
  const reason = context.notReadyReason();
  if (reason) return retryLater(notReadyLine(reason));
  // Taken before the body is read: a client sending its body slowly holds
  // a place (and a connection, and up to maxBodyBytes) all that time.
  const admitted = context.admit?.();
  if (typeof admitted === "string") return retryLater(admitted);
  try {
    return await runAdmitted(incoming, target, context);
  } finally {
    admitted?.();
  }
}

/**
 * The request route: any other request for an actor's path.
 *
 * @example
 * ```ts
 * import { actorRequest } from "./actor_request.ts";
 * const routes = [actorRequest];
 * ```
 */
export const actorRequest: Route = {
  matches: (incoming) => isActorPath(incoming),
  answer: runRequest,
};
