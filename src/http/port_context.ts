/**
 * What a node's HTTP port needs from the node: the context every route of
 * its table reads (src/http/routes/). The client port and the cluster port
 * each get one, which is their policy: which classes, which signatures are
 * believed, whether metrics or WebSockets are served.
 *
 * @module
 */

import type { ActorKey } from "../actors/key.ts";
import type { ActorRequest, EventOutcome } from "../actors/protocol.ts";
import type { UnreadBody } from "./unread_body.ts";
import type { Handover } from "../alarms/alarm_handover.ts";
import type { AccessVerdict } from "../deploy/access_rule.ts";

/**
 * What a port's routes need from the node.
 *
 * @example
 * ```ts
 * import type { PortContext } from "./port_context.ts";
 * declare const node: Omit<PortContext, "nodeId" | "tenant">;
 * // Given to createPortHandler (client_handler.ts) with a table of routes.
 * const context: PortContext = { ...node, nodeId: "node-a", tenant: "default" };
 * console.log(context.nodeId);
 * ```
 */
export interface PortContext {
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
   * Why `request` is not a WebSocket opening handshake the node accepts
   * (answered 400), or `undefined`. The node gives its WebSockets' rule
   * (src/websockets/handshake.ts): the port knows no WebSocket itself.
   */
  handshakeProblem(request: Request): string | undefined;
  /**
   * Opens a WebSocket to the actor `key` for a valid upgrade `request`
   * (`upgrade` is it as the actor's `on-websocket-open` sees it): the 101,
   * or the answer refusing it. Unset: upgrades are answered 501. `place`
   * is the client's place ({@linkcode PortContext.admit}), given back once
   * the socket ended: an open socket holds one.
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
  /**
   * Arms alarms a peer handed over at its clean stop (a cluster node's;
   * with `verifyCall`), or arms none and says why (another tenant's, or
   * from a node of another app).
   */
  armAlarms?(handover: Handover): string | undefined;
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
