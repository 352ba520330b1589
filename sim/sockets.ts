/**
 * WebSockets on a simulated node's client port, standing in for
 * `Deno.upgradeWebSocket`: the port's HTTP/1.1 server (`http_server.ts`)
 * hands an upgrade to the node's real handler; when the node switches it
 * (its `SocketUpgrade` seam, {@linkcode simSocketUpgrade}), the 101 goes out
 * and the connection becomes the real RFC 6455 socket the node speaks
 * between nodes (`src/websockets/wire_socket.ts`), in the server's role.
 * Until the 101 is written the socket is not open, as a `Deno.upgradeWebSocket`
 * socket is not before its handshake.
 *
 * @module
 */

import type { SocketMessage } from "../src/actors/protocol.ts";
import type { ByteConn } from "../src/net/h1/connection.ts";
import type { UpgradeAnswer } from "../src/net/h1/server.ts";
import type { Clock, Random } from "../src/time/clock.ts";
import { acceptKeyOf } from "../src/net/websocket_accept.ts";
import type { SocketHandlers, SocketLike } from "../src/websockets/socket_like.ts";
import type { SocketUpgrade } from "../src/websockets/upgrade.ts";
import { WireSocket } from "../src/websockets/wire_socket.ts";

/** The header of the sim's "switched" answer (a `Response` cannot be a 101). */
const SWITCHED = "x-sim-switched";

/** The server side of an upgrade the node switched, until its 101 is written. */
class LateSocket implements SocketLike {
  #wire: WireSocket | undefined;
  #handlers: SocketHandlers | undefined;
  #closing: { code: number; reason: string } | undefined;

  get open(): boolean {
    return this.#wire?.open ?? false;
  }

  get bufferedAmount(): number {
    return this.#wire?.bufferedAmount ?? 0;
  }

  send(message: SocketMessage): void {
    this.#wire?.send(message);
  }

  close(code: number, reason: string): void {
    if (this.#wire) this.#wire.close(code, reason);
    else this.#closing ??= { code, reason };
  }

  listen(handlers: SocketHandlers): void {
    this.#handlers = handlers;
    this.#wire?.listen(handlers);
  }

  /** The 101 went out: the socket is `wire` from now on. */
  attach(wire: WireSocket): void {
    this.#wire = wire;
    if (this.#handlers) wire.listen(this.#handlers);
    if (this.#closing) wire.close(this.#closing.code, this.#closing.reason);
  }
}

/** The sockets a node switched, by the request they were switched for. */
const switchedFor = new WeakMap<Request, LateSocket>();
/** Requests that came as upgrades through a simulated client port. */
const upgrades = new WeakSet<Request>();

/**
 * The node's `SocketUpgrade` seam: a socket for an upgrade that came
 * through a simulated client port (any other is a bug of the simulator).
 *
 * @example
 * ```ts ignore
 * const seams: NodeSeams = { ...others, upgradeSocket: simSocketUpgrade };
 * ```
 */
export const simSocketUpgrade: SocketUpgrade = (request) => {
  if (!upgrades.has(request)) {
    throw new Error("the simulator switched an upgrade that did not come through its client port");
  }
  const socket = new LateSocket();
  switchedFor.set(request, socket);
  return { socket, response: new Response(null, { status: 200, headers: { [SWITCHED]: "1" } }) };
};

/**
 * The client port's answer to an upgrade: `handler` (the node's) decides;
 * switched, the 101 and the socket over the connection.
 */
export async function answerUpgrade(
  request: Request,
  handler: (request: Request) => Promise<Response>,
  options: { clock: Clock; random: Random; maxMessageBytes: number },
): Promise<UpgradeAnswer> {
  upgrades.add(request);
  const response = await handler(request);
  const socket = switchedFor.get(request);
  if (!socket || !response.headers.has(SWITCHED)) return { kind: "refuse", response };
  const accept = acceptKeyOf(request.headers.get("sec-websocket-key")!.trim());
  return {
    kind: "accept",
    headers: [["sec-websocket-accept", accept]],
    join: (conn: ByteConn, leftover: Uint8Array) =>
      socket.attach(new WireSocket(conn, { role: "server", ...options, leftover })),
  };
}
