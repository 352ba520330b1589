/**
 * A WebSocket as the node uses one: a client's, made by
 * `Deno.upgradeWebSocket` ({@linkcode webSocketOf}), or one the node speaks
 * over a connection of its own (`wire_socket.ts`: a socket relayed between
 * nodes). Open from the moment it is made; what happens on it is told to
 * the handlers given to `listen`, once.
 *
 * @module
 */

import type { SocketMessage } from "../actors/protocol.ts";
import { CLOSE_ANSWER_MS } from "../limits.ts";
import type { Clock } from "../time/clock.ts";

/** What a socket tells its user. */
export interface SocketHandlers {
  /** The socket opened (the 101 went out); messages come after it. */
  open(): void;
  message(message: SocketMessage): void;
  /** The socket closed: the peer's code and reason, 1006 when it went away without one. */
  close(code: number, reason: string): void;
}

/** A WebSocket, of either kind. */
export interface SocketLike {
  /** Whether messages can still be sent. */
  readonly open: boolean;
  /** Bytes sent and not yet written to the connection. */
  readonly bufferedAmount: number;
  send(message: SocketMessage): void;
  /** Starts the closing handshake with `code` and `reason`. */
  close(code: number, reason: string): void;
  /** Tells `handlers` what happens from now on. */
  listen(handlers: SocketHandlers): void;
}

/**
 * A socket made by `Deno.upgradeWebSocket`, as a {@linkcode SocketLike}.
 * One the node closes whose client does not answer within
 * {@linkcode CLOSE_ANSWER_MS} is dropped (its connection closed), which
 * `Deno.upgradeWebSocket`'s socket never does by itself.
 *
 * @example
 * ```ts
 * import { webSocketOf } from "./socket_like.ts";
 * import type { ActorRequest } from "../actors/protocol.ts";
 * import type { ActorKey } from "../actors/key.ts";
 * import { systemClock as clock } from "../time/clock.ts";
 * // The node's ActorSockets (actor_sockets.ts) takes the socket so made.
 * declare const sockets: {
 *   accept(key: ActorKey, upgrade: ActorRequest, socket: ReturnType<typeof webSocketOf>): void;
 * };
 * declare const request: Request;
 * declare const upgrade: ActorRequest;
 * const key = { tenant: "default", class: "chat", name: "lobby" };
 * const { socket, response } = Deno.upgradeWebSocket(request);
 * sockets.accept(key, upgrade, webSocketOf(socket, clock));
 * ```
 */
export function webSocketOf(socket: WebSocket, clock: Clock): SocketLike {
  socket.binaryType = "arraybuffer";
  let dropping = false;
  return {
    get open() {
      return socket.readyState === WebSocket.OPEN;
    },
    get bufferedAmount() {
      return socket.bufferedAmount;
    },
    send(message) {
      socket.send("text" in message ? message.text : message.binary as Uint8Array<ArrayBuffer>);
    },
    close(code, reason) {
      try {
        socket.close(code, reason);
      } catch {
        // Already closing.
      }
      if (dropping || socket.readyState === WebSocket.CLOSED) return;
      dropping = true;
      const timer = clock.setTimer(CLOSE_ANSWER_MS, () => dropConnection(socket));
      socket.addEventListener("close", () => timer.cancel(), { once: true });
    },
    listen(handlers) {
      socket.onopen = () => handlers.open();
      socket.onmessage = (event: MessageEvent) => {
        const data = event.data;
        handlers.message(
          typeof data === "string"
            ? { text: data }
            : { binary: new Uint8Array(data as ArrayBuffer) },
        );
      };
      socket.onclose = (event: CloseEvent) => handlers.close(event.code, event.reason);
      // An error is followed by its close event, which ends the socket.
      socket.onerror = () => {};
    },
  };
}

/**
 * Closes the connection under `socket`, whose close the client did not
 * answer: the socket then ends (its `close` event, code 1005). Deno's
 * WebSocket has no public way to do so; its resource is closed through the
 * runtime's internals (checked with the Deno this repository pins, by
 * test/node/websocket_test.ts), and left to end with its connection where
 * they are missing.
 */
function dropConnection(socket: WebSocket): void {
  if (socket.readyState === WebSocket.CLOSED) return;
  const internals =
    (Deno as unknown as Record<symbol, { core?: { tryClose?(rid: number): void } }>)[
      (Deno as unknown as { internal: symbol }).internal
    ];
  const ridSymbol = Object.getOwnPropertySymbols(socket).find((s) => s.description === "[[rid]]");
  const rid = ridSymbol && (socket as unknown as Record<symbol, unknown>)[ridSymbol];
  if (typeof rid === "number") internals?.core?.tryClose?.(rid);
}
