/**
 * The client listener's routes: actor paths, health and readiness.
 *
 * @module
 */

import { type ActorKey, actorNameProblem } from "../actors/key.ts";
import type { ActorRequest, EventOutcome, FailedOutcome } from "../actors/protocol.ts";
import {
  bodyReadFailure,
  BodyTooLarge,
  MAX_REPLAYED_BODY_BYTES,
  readStream,
  UnreadBody,
} from "./unread_body.ts";
import { withCallHeaders } from "../actors/call_chain.ts";
import { CALL_HEADERS } from "../security/call_signature.ts";
import { ALARM_HANDOVER_PATH, decodeHandover, type HandedAlarm } from "../alarms/alarm_handover.ts";
import { handshakeProblem } from "../websockets/handshake.ts";
import type { AccessVerdict } from "../deploy/access_rule.ts";

/** The header naming the node that answered. */
export const NODE_HEADER = "x-wasmkeep-node";

/**
 * The status and header of a "not held" answer to a forwarded request: this
 * node does not hold the actor, its record names the header's node, and the
 * request did not run. Only this handler answers so: it removes the header
 * from every actor's own answer, so no actor can say it.
 *
 * @example
 * ```ts
 * import { NOT_HELD_HEADER, NOT_HELD_STATUS } from "./client_handler.ts";
 * console.log(NOT_HELD_STATUS, NOT_HELD_HEADER); // 421 "x-wasmkeep-not-held"
 * ```
 */
export const NOT_HELD_HEADER = "x-wasmkeep-not-held";
/** See {@linkcode NOT_HELD_HEADER}: 421 Misdirected Request. */
export const NOT_HELD_STATUS = 421;

/** What the handler needs from the node. */
export interface ClientHandlerContext {
  nodeId: string;
  tenant: string;
  /** Largest request body accepted, in bytes. */
  maxBodyBytes: number;
  hasClass(name: string): boolean;
  /**
   * Whether the node knows the classes it serves: `false` until a node that
   * follows an app applied its first version (a class it lacks is then
   * answered 503, not 404). Unset: it knows them.
   */
  classesKnown?(): boolean;
  /** Why the node serves no request now, or `undefined` when it does. */
  notReadyReason(): string | undefined;
  /**
   * Why `/_wasmkeep/ready` says not ready, which may also be while it
   * serves (a version of its app it cannot apply); `notReadyReason` unset.
   */
  readyReport?(): string | undefined;
  /**
   * Opens a WebSocket to the actor `key` for a valid upgrade `request`
   * (`upgrade` is it as the actor's `on-websocket-open` sees it): the 101,
   * or the answer refusing it. Unset: upgrades are answered 501. `place`
   * is the client's place ({@linkcode ClientHandlerContext.admit}), given
   * back once the socket ended: an open socket holds one.
   */
  openSocket?(
    key: ActorKey,
    request: Request,
    upgrade: ActorRequest,
    place?: () => void,
  ): Promise<Response>;
  /**
   * `client.signal` aborts when the client leaves (a failover wait drops the
   * request then). Read it only when needed: Deno.serve makes the signal on
   * first read and pays for an abort reason when each such request closes.
   */
  dispatch(
    key: ActorKey,
    request: ActorRequest,
    client?: { readonly signal: AbortSignal; readonly body?: UnreadBody },
  ): Promise<EventOutcome>;
  /**
   * Whether a long body may be left unread until its route is known (a node
   * of a cluster: it is then sent on as it is read, or read where the actor
   * runs). The dispatch then gets it as `client.body`, `request.body` empty.
   */
  streamsBodies?: boolean;
  /**
   * Takes one of the node's places for a request under way, from before its
   * body is read until it is answered: the release, or why there is none
   * (answered 503). Unset: no bound here.
   */
  admit?(): (() => void) | string;
  /** The metrics in the Prometheus text format; unset on the cluster listener (not served). */
  renderMetrics?(): string;
  /**
   * What the class's access rule lets a client do with the actor `name`
   * (ADR 0010): run it, run it only if it exists, or nothing (internal:
   * reached only by actors.call). Unset: every class is open.
   */
  access?(className: string, name: string): AccessVerdict;
  /** The class's required names unset now (its upgrades get 503), or `undefined`. */
  missing?(className: string): string[] | undefined;
  /** Whether the actor exists (it was ever created), for a class open only to existing actors. */
  exists?(key: ActorKey): Promise<boolean>;
  /**
   * Checks the signature of a call another node sent (unset where signed
   * calls are not believed: they are then a client's requests). `undefined`
   * for a request without one.
   */
  verifyCall?(call: SignedRequest): CallVerdict | undefined;
  /** Arms alarms a peer handed over at its clean stop (a cluster node's; with `verifyCall`). */
  armAlarms?(alarms: HandedAlarm[]): void;
}

/** A request as its signature covers it. */
export interface SignedRequest {
  method: string;
  /** Path and query, as received. */
  path: string;
  body: Uint8Array;
  headers: Headers;
}

/** A signed call believed (its caller and chain), or refused with the reason. */
export type CallVerdict =
  | { ok: true; caller: string; chain: string[] }
  /** 403 for a signature that is not the cluster's; 503 while this node cannot check one. */
  | { ok: false; status: 403 | 503; reason: string };

const CALL_HEADER_NAMES = new Set(CALL_HEADERS);

/** Headers only the node sets: a client's are dropped (a forged caller, a stray signature). */
function isCallHeader(name: string): boolean {
  return name.startsWith("x-wasmkeep-") && CALL_HEADER_NAMES.has(name);
}

/** A one-line plain-text answer. */
export function textResponse(
  status: number,
  message: string,
  headers: Record<string, string> = {},
): Response {
  return new Response(message + "\n", {
    status,
    headers: { "content-type": "text/plain; charset=utf-8", ...headers },
  });
}

/** The answer to a Host header that {@linkcode isValidHost} refuses. */
const BAD_HOST = "bad request: the Host header is not a valid host[:port]";
/** The answer to an absolute-form target whose authority is not a host and port. */
const BAD_TARGET = "bad request: the request target's authority is not a valid host[:port]";

/**
 * A name (RFC 3986's unreserved characters) or a bracketed IPv6 address, and
 * an optional port: nothing that could move into the path, query or userinfo
 * of a URL made from it.
 */
const HOST_PORT = /^(?:[A-Za-z0-9._~-]+|\[[0-9A-Fa-f:.]+\])(?::([0-9]*))?$/;

/**
 * Whether `host` is a valid Host header: a name, an IPv4 address or an IPv6
 * address in brackets, and an optional port from 1 to 65535 (or empty, which
 * RFC 3986 allows for the scheme's default). Both listeners judge the header
 * by this, so that a host one serves the other serves too (a forwarded
 * request keeps its client's Host).
 *
 * @example
 * ```ts
 * import { isValidHost } from "./client_handler.ts";
 * isValidHost("[::1]:8080"); // true
 * isValidHost("node:70000"); // false
 * ```
 */
export function isValidHost(host: string): boolean {
  const match = HOST_PORT.exec(host);
  if (match === null) return false;
  const port = match[1];
  if (port && !(Number(port) >= 1 && Number(port) <= 65535)) return false;
  // The parser judges what the pattern lets through: "999.1.1.1", "[:::]", bad punycode.
  return URL.canParse(`http://${host}/`);
}

/**
 * The request's URL, or why it is refused. Deno.serve makes the URL of an
 * origin-form request from its Host header as sent, where a space or a port
 * over 65535 makes `new URL` throw and a `/`, `?` or `@` moves into the path,
 * query or userinfo; an absolute-form target is the URL as sent.
 */
function requestUrl(target: string, host: string | undefined): URL | string {
  // Empty is what RFC 9112 asks a client to send for a target without an authority.
  if (host && !isValidHost(host)) return BAD_HOST;
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    return BAD_TARGET;
  }
  // Only an absolute-form target gets here with these: a URL made from a
  // Host header that passed has neither.
  if (url.username !== "" || url.password !== "" || url.port === "0") return BAD_TARGET;
  return url;
}

/**
 * The request's body, at most `limit` bytes (its declared length checked
 * already); `declared` is its content-length header. A declared empty body
 * is answered without a promise; and before `request.body` is touched,
 * since even getting an empty body's stream costs a call into the runtime.
 */
function readBody(
  request: Request,
  declared: string | undefined,
  limit: number,
): Uint8Array | Promise<Uint8Array> {
  if (declared === "0" || !request.body) return new Uint8Array();
  return readStream(request.body, limit);
}

/** The request's headers for the actor, and the three the handler reads itself. */
interface RequestHeaders {
  /** Every header but the call headers, as `[...headers]` gives them. */
  pairs: [string, string][];
  contentLength: string | undefined;
  upgrade: string | undefined;
  host: string | undefined;
  /** A call header came with it: the signature covers the body, which is read whole. */
  signed: boolean;
}

/**
 * The request's headers as `[...headers]` gives them (lower-case names in
 * order, repeated ones joined), made with forEach: about a seventh of the
 * cost of the iterator (1.9 µs against 0.3 for two headers, measured). The
 * content-length, upgrade and host headers are picked up on the way (the
 * values `headers.get` gives), since each `get` is a call into the runtime.
 */
function requestHeaders(headers: Headers): RequestHeaders {
  const found: RequestHeaders = {
    pairs: [],
    contentLength: undefined,
    upgrade: undefined,
    host: undefined,
    signed: false,
  };
  headers.forEach((value, name) => {
    if (name === "content-length") found.contentLength = value;
    else if (name === "upgrade") found.upgrade = value;
    else if (name === "host") found.host = value;
    else if (isCallHeader(name)) {
      found.signed = true;
      return;
    }
    found.pairs.push([name, value]);
  });
  return found;
}

/**
 * What the dispatch reads of the client: the request's signal, made by
 * Deno.serve only on first read (see {@linkcode ClientHandlerContext.dispatch}).
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

const EMPTY = new Uint8Array(0);

/**
 * For a class open only to existing actors: the 404 of a request for an
 * actor that never existed, a 503 when the bucket cannot tell, or nothing.
 */
async function existenceRefusal(
  context: ClientHandlerContext,
  key: ActorKey,
): Promise<Response | undefined> {
  try {
    if (await context.exists!(key)) return undefined;
  } catch {
    return textResponse(503, "the bucket did not answer whether the actor exists; retry", {
      "retry-after": "1",
    });
  }
  return textResponse(
    404,
    `no actor '${key.name}' of class '${key.class}': the class serves only actors that exist (access rule existing)`,
  );
}

/** The 403 of a client's request for an internal class. */
function internal(className: string): Response {
  return textResponse(
    403,
    `actor class '${className}' is internal: only actors reach it, with actors.call`,
  );
}

/**
 * The body to leave unread until the route is known: one longer than
 * {@linkcode MAX_REPLAYED_BODY_BYTES} or of unknown length, on a node that
 * streams bodies, without a call signature (which covers the body); or
 * undefined: read it now.
 */
function unreadBody(
  context: ClientHandlerContext,
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

/** The answer to an event that did not run to an answer (or a body that could not be read). */
function failedAnswer(outcome: FailedOutcome): Response {
  if (outcome.notHeld !== undefined) {
    return textResponse(NOT_HELD_STATUS, outcome.message, { [NOT_HELD_HEADER]: outcome.notHeld });
  }
  const headers: Record<string, string> = outcome.status === 503 ? { "retry-after": "1" } : {};
  return textResponse(outcome.status, outcome.message, headers);
}

/**
 * The actor a path `/actor/<class>/<name>[/<rest>]` names, with what
 * follows its name (`/` when nothing does); or the status and line of the
 * answer refusing it (400 for a name that is not valid, 404 for a class
 * this node does not have).
 *
 * @example
 * ```ts
 * import { actorTarget } from "./client_handler.ts";
 * actorTarget("/actor/room/lobby/chat", () => true); // { className: "room", name: "lobby", rest: "/chat" }
 * ```
 */
export function actorTarget(
  pathname: string,
  hasClass: (name: string) => boolean,
): { className: string; name: string; rest: string } | { status: number; line: string } {
  const [, , rawClass, rawName, ...rest] = pathname.split("/");
  let className: string;
  let name: string;
  try {
    className = decodeURIComponent(rawClass);
    name = decodeURIComponent(rawName ?? "");
  } catch {
    return { status: 400, line: "bad request: the path is not valid percent-encoding" };
  }
  if (!hasClass(className)) {
    return { status: 404, line: `no actor class '${className}' on this node` };
  }
  const problem = actorNameProblem(name);
  if (problem) return { status: 400, line: `bad actor name: ${problem}` };
  return { className, name, rest: rest.length > 0 ? "/" + rest.join("/") : "/" };
}

/**
 * A peer's hand-over of alarms at its clean stop (src/alarms/alarm_handover.ts):
 * believed only signed by a node of the cluster, then armed here.
 */
async function takeHandover(
  context: ClientHandlerContext,
  request: Request,
  url: URL,
  declared: string | undefined,
): Promise<Response> {
  if (request.method !== "POST") return textResponse(405, "alarms are handed over with POST");
  let body: Uint8Array;
  try {
    body = await readBody(request, declared, context.maxBodyBytes);
  } catch (error) {
    return failedAnswer(bodyReadFailure(error, context.maxBodyBytes, () => undefined));
  }
  const verdict = context.verifyCall!({
    method: request.method,
    path: url.pathname + url.search,
    body,
    headers: request.headers,
  });
  if (!verdict) return textResponse(403, "alarms are handed over only by a node of the cluster");
  if (!verdict.ok) return textResponse(verdict.status, verdict.reason);
  let alarms;
  try {
    alarms = decodeHandover(body);
  } catch (error) {
    return textResponse(400, (error as Error).message);
  }
  context.armAlarms!(alarms);
  return new Response(null, { status: 204 });
}

/**
 * Creates the handler of the client listener.
 *
 * @example
 * ```ts ignore
 * Deno.serve(createClientHandler(context));
 * ```
 */
export function createClientHandler(
  context: ClientHandlerContext,
): (request: Request) => Promise<Response> {
  const notServing = () => context.notReadyReason();
  const withNode = (response: Response, node = context.nodeId) => {
    response.headers.set(NODE_HEADER, node);
    return response;
  };

  return async (request: Request): Promise<Response> => {
    const headers = requestHeaders(request.headers);
    const url = requestUrl(request.url, headers.host);
    if (typeof url === "string") return withNode(textResponse(400, url));
    if (url.pathname === "/_wasmkeep/health") return withNode(textResponse(200, "ok"));
    if (url.pathname === "/_wasmkeep/ready") {
      const reason = context.readyReport?.() ?? context.notReadyReason();
      return withNode(
        reason ? textResponse(503, `not ready: ${reason}`) : textResponse(200, "ready"),
      );
    }
    if (url.pathname === "/_wasmkeep/metrics" && context.renderMetrics) {
      return withNode(
        new Response(context.renderMetrics!(), {
          headers: { "content-type": "text/plain; version=0.0.4; charset=utf-8" },
        }),
      );
    }
    if (url.pathname === ALARM_HANDOVER_PATH && context.armAlarms && context.verifyCall) {
      return withNode(await takeHandover(context, request, url, headers.contentLength));
    }
    if (!url.pathname.startsWith("/actor/")) return withNode(textResponse(404, "not found"));

    const target = actorTarget(url.pathname, context.hasClass);
    if ("status" in target) {
      if (target.status === 404 && context.classesKnown?.() === false) {
        const waiting = context.notReadyReason() ?? "the app's first version is not applied yet";
        return withNode(textResponse(503, `not ready: ${waiting}`, { "retry-after": "1" }));
      }
      return withNode(textResponse(target.status, target.line));
    }
    const { className, name, rest } = target;
    const reason = context.notReadyReason();
    if (headers.upgrade?.toLowerCase() === "websocket") {
      const problem = handshakeProblem(request);
      if (problem) return withNode(textResponse(400, `bad WebSocket upgrade: ${problem}`));
      if (!context.openSocket) {
        return withNode(textResponse(501, "WebSockets are not served on this port"));
      }
      if (reason) {
        return withNode(textResponse(503, `not ready: ${reason}`, { "retry-after": "1" }));
      }
      const access = context.access?.(className, name) ?? "run";
      if (access === "internal") return withNode(internal(className));
      const key = { tenant: context.tenant, class: className, name };
      const missing = context.missing?.(className);
      if (missing) {
        return withNode(textResponse(
          503,
          `class '${className}' is missing required values (${missing.join(", ")}); retry`,
          { "retry-after": "1" },
        ));
      }
      const refusal = access === "existing-only" && await existenceRefusal(context, key);
      if (refusal) return withNode(refusal);
      // A socket holds its place for as long as it is open, as a connection would.
      const place = context.admit?.();
      if (typeof place === "string") {
        return withNode(textResponse(503, place, { "retry-after": "1" }));
      }
      return withNode(
        await context.openSocket(key, request, {
          method: request.method,
          path: rest,
          query: url.search.slice(1),
          headers: headers.pairs,
          body: EMPTY,
        }, place),
      );
    }
    if (reason) return withNode(textResponse(503, `not ready: ${reason}`, { "retry-after": "1" }));

    // Taken before the body is read: a client sending its body slowly holds
    // a place (and a connection, and up to maxBodyBytes) all that time.
    const admitted = context.admit?.();
    if (typeof admitted === "string") {
      return withNode(textResponse(503, admitted, { "retry-after": "1" }));
    }
    try {
      const { maxBodyBytes } = context;
      const declared = headers.contentLength;
      if (declared !== undefined && Number(declared) > maxBodyBytes) {
        return withNode(
          failedAnswer(bodyReadFailure(new BodyTooLarge(), maxBodyBytes, notServing)),
        );
      }
      const unread = unreadBody(context, request, headers);
      const access = context.access?.(className, name) ?? "run";
      if (unread && access === "internal") return withNode(internal(className));
      let body: Uint8Array = EMPTY;
      if (!unread) {
        try {
          const read = readBody(request, declared, maxBodyBytes);
          body = read instanceof Uint8Array ? read : await read;
        } catch (error) {
          return withNode(failedAnswer(bodyReadFailure(error, maxBodyBytes, notServing)));
        }
      }
      let eventHeaders = headers.pairs;
      const verdict = context.verifyCall?.({
        method: request.method,
        path: url.pathname + url.search,
        body,
        headers: request.headers,
      });
      if (verdict && !verdict.ok) {
        const retry: Record<string, string> = verdict.status === 503 ? { "retry-after": "1" } : {};
        return withNode(textResponse(verdict.status, verdict.reason, retry));
      }
      const key = { tenant: context.tenant, class: className, name };
      if (verdict) eventHeaders = withCallHeaders(eventHeaders, verdict.caller, verdict.chain);
      else if (access === "internal") return withNode(internal(className));
      else if (access === "existing-only") {
        const refusal = await existenceRefusal(context, key);
        if (refusal) return withNode(refusal);
      }
      const outcome = await context.dispatch(key, {
        method: request.method,
        path: rest,
        query: url.search.slice(1),
        headers: eventHeaders,
        body,
      }, new Client(request, unread));
      if (outcome.kind === "failed") return withNode(failedAnswer(outcome));
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
        // An actor cannot answer "not held": only this handler does.
        if (status === NOT_HELD_STATUS) response.headers.delete(NOT_HELD_HEADER);
        // A forwarded answer names the node that ran the event.
        return withNode(response, outcome.node);
      } catch (error) {
        return withNode(
          textResponse(502, `the actor's answer is not valid HTTP: ${(error as Error).message}`),
        );
      }
    } finally {
      admitted?.();
    }
  };
}
