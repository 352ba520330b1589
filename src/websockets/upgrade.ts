/**
 * Opening a WebSocket to an actor, on the node that holds it or through
 * another one (the spec's "A client may open a socket on any node"):
 *
 * - held here (or taken here, as a request would be): `Deno.upgradeWebSocket`,
 *   and the socket handed to {@linkcode ActorSockets}, whose `open` event runs
 *   once the 101 went out;
 * - held by another node: the upgrade is sent on to it (over its cluster
 *   listener when both have one, plain in accept mode), and only once it
 *   switched does the client get its 101; the two sockets are then joined
 *   message by message (`socket_relay.ts`), and the relay is held with the
 *   node's others, cut when trust in that peer ends or the node stops. A
 *   refusal of the owner is the client's answer; an owner that does not
 *   answer, a 503 to retry;
 * - a relayed upgrade arriving at the owner (a peer's, on the cluster
 *   listener: {@linkcode relayedSocketAcceptor}; in plain accept mode on the
 *   client port, as any client's) is served here, never sent on again.
 *
 * @module
 */

import type { ActorKey } from "../actors/key.ts";
import type { ActorRequest } from "../actors/protocol.ts";
import type { RelayPeer } from "../cluster/relays.ts";
import type { PeerForwarding } from "../cluster/routing/peer_forwarding.ts";
import { lookupFailure, type RequestRouting } from "../cluster/routing/request_routing.ts";
import type { Route } from "../cluster/routing/router.ts";
import { actorTarget } from "../http/actor_target.ts";
import { textResponse } from "../http/answers.ts";
import { FORWARDED_BY_HEADER } from "../net/headers.ts";
import type { UpgradeAnswer } from "../net/h1/server.ts";
import { acceptKeyOf } from "../net/websocket_accept.ts";
import type { Clock, Random } from "../time/clock.ts";
import { type ActorSockets, bufferedBytesFor } from "./actor_sockets.ts";
import { handshakeProblem } from "./handshake.ts";
import { relaySockets } from "./socket_relay.ts";
import { type SocketLike, webSocketOf } from "./socket_like.ts";
import { WireSocket } from "./wire_socket.ts";

/**
 * Seconds a socket may stay silent before the node pings it; a client that
 * does not answer the ping in as long again is dropped (dead clients
 * detected, `Deno.upgradeWebSocket`'s `idleTimeout`).
 */
export const SOCKET_IDLE_TIMEOUT_SECS = 30;

/**
 * Switches a client's upgrade request to a WebSocket: the socket, and the
 * answer that opens it (the 101). By default `Deno.upgradeWebSocket`
 * ({@linkcode denoSocketUpgrade}); the simulator's client port has its own.
 */
export type SocketUpgrade = (request: Request) => { socket: SocketLike; response: Response };

/**
 * The upgrade of a request `Deno.serve` gave: `Deno.upgradeWebSocket`, with
 * the idle pings of {@linkcode SOCKET_IDLE_TIMEOUT_SECS}.
 *
 * @example
 * ```ts
 * import { denoSocketUpgrade } from "./upgrade.ts";
 * import { systemClock as clock } from "../time/clock.ts";
 * declare const request: Request;
 * const { socket, response } = denoSocketUpgrade(clock)(request);
 * ```
 */
export function denoSocketUpgrade(clock: Clock): SocketUpgrade {
  return (request) => {
    const { socket, response } = Deno.upgradeWebSocket(request, {
      idleTimeout: SOCKET_IDLE_TIMEOUT_SECS,
    });
    return { socket: webSocketOf(socket, clock), response };
  };
}

/** How a node sends upgrades on to the owners of their actors. */
export interface SocketRelaying {
  upgrade: PeerForwarding["upgrade"];
  /** The relays the node holds (`Relays.hold`, `Relays.full`). */
  relays: {
    readonly full: boolean;
    hold(peer: RelayPeer, ended: Promise<unknown>, cut: (reason: Error) => void): boolean;
  };
  /** Counts a socket relayed. */
  relayed?: () => void;
  /** The certificate fingerprint a peer publishes, for cutting its relays when trust ends. */
  fingerprintOf(node: string): string | undefined;
  clock: Clock;
  random: Random;
}

/** What {@linkcode socketOpener} works with. */
export interface SocketOpenerOptions {
  sockets: ActorSockets;
  /** Times the drop of a client that does not answer a close. */
  clock: Clock;
  /** Default {@linkcode denoSocketUpgrade}. */
  upgrade?: SocketUpgrade;
  /**
   * Where a request for the actor goes (`fresh`: from its record, not the
   * holder remembered); unset on a standalone node (always here).
   */
  route?: (key: ActorKey, forwarded: boolean, fresh?: boolean) => Promise<Route>;
  /** Unset on a standalone node. */
  relaying?: SocketRelaying;
  /**
   * Keeps an upgrade from outside for an actor whose node is gone or going
   * until another node took it (`RequestRouting.keepUntilTaken`); unset on a
   * standalone node.
   */
  keep?: RequestRouting["keepUntilTaken"];
}

/**
 * Gives back a client's place (`Admission`) once its socket ended: an open
 * socket holds the place its upgrade took, so that sockets are counted in
 * the client connections the open-file limit allows.
 */
export type Place = () => void;

/**
 * The function the client handler gives a valid WebSocket upgrade of
 * `key`: the 101, or the answer that refuses it. `place` is given back
 * when the socket (or its relay) ended, or at once when it did not open.
 *
 * @example
 * ```ts
 * import { type SocketOpenerOptions, socketOpener } from "./upgrade.ts";
 * import type { ActorKey } from "../actors/key.ts";
 * import type { ActorRequest } from "../actors/protocol.ts";
 * declare const o: SocketOpenerOptions;
 * declare const key: ActorKey;
 * declare const request: Request;
 * declare const upgradeRequest: ActorRequest;
 * declare const release: () => void;
 * const { sockets, clock, route, relaying } = o;
 * const open = socketOpener({ sockets, clock, route, relaying });
 * const response = await open(key, request, upgradeRequest, release);
 * ```
 */
export function socketOpener(
  options: SocketOpenerOptions,
): (key: ActorKey, request: Request, upgrade: ActorRequest, place?: Place) => Promise<Response> {
  const { sockets, route, relaying, keep } = options;
  const switchToSocket = options.upgrade ?? denoSocketUpgrade(options.clock);
  /** The answers that opened a socket (whatever their status says). */
  const opened = new WeakSet<Response>();
  /** The client's socket, its place given back when it ends. */
  const switched = (request: Request, place: Place) => {
    const { socket, response } = switchToSocket(request);
    opened.add(response);
    return { socket: endsWith(socket, place), response };
  };
  const here = (key: ActorKey, request: Request, upgrade: ActorRequest, place: Place) => {
    const { socket, response } = switched(request, place);
    sockets.accept(key, upgrade, socket);
    return response;
  };
  const there = (
    where: { node: string; address: string; remembered?: boolean },
    key: ActorKey,
    request: Request,
    upgrade: ActorRequest,
    place: Place,
  ) =>
    relaying
      ? relayTo(
        relaying,
        sockets.maxMessageBytes,
        where,
        key,
        upgrade,
        () => switched(request, place),
      )
      : Promise.resolve(refuse(503, `the actor is held by node ${where.node}; retry`));
  /** The route, or the answer to a record that could not be read, as a request gets it. */
  const routeOrAnswer = async (
    key: ActorKey,
    forwarded: boolean,
    fresh?: boolean,
  ): Promise<Route | Response> => {
    if (!route) return { kind: "local" };
    try {
      return await route(key, forwarded, fresh);
    } catch (error) {
      const { status, message } = lookupFailure(error);
      return refuse(status, message);
    }
  };
  const open = async (key: ActorKey, request: Request, upgrade: ActorRequest, place: Place) => {
    const refusal = sockets.refusal(key);
    if (refusal) return refuse(503, refusal);
    const forwarded = request.headers.has(FORWARDED_BY_HEADER);
    const where = await routeOrAnswer(key, forwarded);
    if (where instanceof Response) return where;
    switch (where.kind) {
      case "local":
        return here(key, request, upgrade, place);
      case "forward": {
        const sent = await there(where, key, request, upgrade, place);
        if (sent !== UNSENT) return sent;
        // A remembered holder that could not be reached read nothing (it may
        // have just stopped): routed again from the record, once.
        const fresh = await routeOrAnswer(key, forwarded, true);
        if (fresh instanceof Response) return fresh;
        if (fresh.kind === "local") return here(key, request, upgrade, place);
        if (fresh.kind === "forward" && fresh.node !== where.node) {
          const again = await there(fresh, key, request, upgrade, place);
          if (again !== UNSENT) return again;
        }
        return refuse(503, "the actor's node did not answer; retry");
      }
      case "not-held":
        return refuse(503, `the actor is held by node ${where.node}; retry`);
      case "unavailable": {
        if (!where.ownerDown || forwarded || !keep) return refuse(503, where.message);
        // Kept like a GET: answered 101 by whichever node took the actor.
        const kept = await keep<Response>(key, where.node, request.signal, {
          here: () => Promise.resolve(here(key, request, upgrade, place)),
          there: async (next) => {
            const sent = await there(next, key, request, upgrade, place);
            return sent === UNSENT ? refuse(503, "the actor's node did not answer; retry") : sent;
          },
          refused: (message) => refuse(503, message),
          notReachable: () => refuse(503, "the actor's node is not reachable; retry"),
        });
        // Undefined: the client left, nobody reads the answer.
        return kept ?? refuse(503, "the actor's node is not reachable; retry");
      }
    }
  };
  return async (key, request, upgrade, place = () => {}) => {
    let response: Response;
    try {
      response = await open(key, request, upgrade, place);
    } catch (error) {
      place();
      throw error;
    }
    // Refused: the place is free at once; opened, it is the socket's until it ends.
    if (!opened.has(response)) place();
    return response;
  };
}

/** `socket`, calling `ended` once when it closed. */
function endsWith(socket: SocketLike, ended: () => void): SocketLike {
  return {
    get open() {
      return socket.open;
    },
    get bufferedAmount() {
      return socket.bufferedAmount;
    },
    send: (message) => socket.send(message),
    close: (code, reason) => socket.close(code, reason),
    listen: (handlers) =>
      socket.listen({
        open: () => handlers.open(),
        message: (message) => handlers.message(message),
        close: (code, reason) => {
          ended();
          handlers.close(code, reason);
        },
      }),
  };
}

/** {@linkcode relayTo}'s answer when a remembered holder read nothing: route again. */
const UNSENT = Symbol("unsent to a remembered holder");

/**
 * Sends the upgrade on to the owner; once it switched, the client's 101 and
 * the relay. {@linkcode UNSENT} when the holder was only remembered and
 * could not be reached.
 */
async function relayTo(
  relaying: SocketRelaying,
  maxMessageBytes: number,
  where: { node: string; address: string; remembered?: boolean },
  key: ActorKey,
  upgrade: ActorRequest,
  switched: () => { socket: SocketLike; response: Response },
): Promise<Response | typeof UNSENT> {
  if (relaying.relays.full) return refuse(503, "this node relays its maximum of sockets; retry");
  const up = await relaying.upgrade(where.address, where.node, key, upgrade);
  if (up.kind === "failed" && up.unsent && where.remembered) return UNSENT;
  if (up.kind === "failed") return refuse(up.status, up.message);
  let client: ReturnType<typeof switched>;
  try {
    client = switched();
  } catch (error) {
    // The client is gone (it gave up while the upgrade was relayed): so is the owner's side.
    up.conn.close();
    throw error;
  }
  const owner = new WireSocket(up.conn, {
    role: "client",
    maxMessageBytes,
    clock: relaying.clock,
    random: relaying.random,
    leftover: up.leftover,
  });
  const { socket, response } = client;
  const relay = relaySockets(socket, owner, {
    clock: relaying.clock,
    maxBufferedBytes: bufferedBytesFor(maxMessageBytes),
  });
  relaying.relayed?.();
  // Over TLS, the certificate the relay trusts; sent plain, none (cut when the owner is not live).
  const fingerprint = where.address.startsWith("https:")
    ? relaying.fingerprintOf(where.node)
    : undefined;
  const peer = { node: where.node, fingerprint };
  if (!relaying.relays.hold(peer, relay.ended, (error) => relay.cut(error.message))) {
    relay.cut("this node relays its maximum of sockets");
  }
  return response;
}

/** What {@linkcode relayedSocketAcceptor} works with. */
export interface RelayedSocketOptions {
  sockets: ActorSockets;
  tenant: string;
  hasClass(name: string): boolean;
  /** Where a request another node sent for the actor goes (run here, or "not held"). */
  route(key: ActorKey, forwarded: boolean): Promise<Route>;
  clock: Clock;
  random: Random;
}

/**
 * The cluster listener's `upgrade` for a peer's relayed WebSocket: served
 * here over the switched connection (this node the server), or refused in
 * one line.
 *
 * @example
 * ```ts
 * import { relayedSocketAcceptor, type RelayedSocketOptions } from "./upgrade.ts";
 * import { ClusterListener, type ClusterListenerOptions } from "../http/cluster_listener.ts";
 * declare const o: RelayedSocketOptions;
 * declare const options: ClusterListenerOptions;
 * const { sockets, tenant, hasClass, route, clock, random } = o;
 * const upgrade = relayedSocketAcceptor({ sockets, tenant, hasClass, route, clock, random });
 * await ClusterListener.start({ ...options, upgrade: (request) => upgrade(request) });
 * ```
 */
export function relayedSocketAcceptor(
  options: RelayedSocketOptions,
): (request: Request) => Promise<UpgradeAnswer> {
  const { sockets, tenant, hasClass, route, clock, random } = options;
  return async (request) => {
    if (request.headers.get("upgrade")?.toLowerCase() !== "websocket") {
      return { kind: "refuse", response: refuse(501, "only WebSockets are upgraded here") };
    }
    const problem = handshakeProblem(request);
    if (problem) {
      return { kind: "refuse", response: refuse(400, `bad WebSocket upgrade: ${problem}`) };
    }
    const url = new URL(request.url);
    if (!url.pathname.startsWith("/actor/")) {
      return { kind: "refuse", response: refuse(404, "not found") };
    }
    const target = actorTarget(url.pathname, hasClass);
    if ("status" in target) return { kind: "refuse", response: refuse(target.status, target.line) };
    const key = { tenant, class: target.className, name: target.name };
    const refusal = sockets.refusal(key);
    if (refusal) return { kind: "refuse", response: refuse(503, refusal) };
    let where: Route;
    try {
      where = await route(key, true);
    } catch (error) {
      const { status, message } = lookupFailure(error);
      return { kind: "refuse", response: refuse(status, message) };
    }
    if (where.kind !== "local") {
      const line = where.kind === "unavailable"
        ? where.message
        : "this node does not hold the actor; retry";
      return { kind: "refuse", response: refuse(503, line) };
    }
    const accept = acceptKeyOf(request.headers.get("sec-websocket-key")!.trim());
    const upgrade: ActorRequest = {
      method: "GET",
      path: target.rest,
      query: url.search.slice(1),
      headers: [...request.headers],
      body: new Uint8Array(0),
    };
    return {
      kind: "accept",
      headers: [["sec-websocket-accept", accept]],
      join: (conn, leftover) => {
        const socket = new WireSocket(conn, {
          role: "server",
          maxMessageBytes: sockets.maxMessageBytes,
          clock,
          random,
          leftover,
        });
        sockets.accept(key, upgrade, socket);
      },
    };
  };
}

/** A refused upgrade's one line; the client may open the socket again a second later. */
function refuse(status: number, line: string): Response {
  return textResponse(status, line, { "retry-after": "1" });
}
