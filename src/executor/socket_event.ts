/**
 * A WebSocket event as an actor's export call: `open` with the upgrade's
 * request, `message` with its text or bytes, `close` with its code and
 * reason. The node needs no answer of it but that it ran.
 *
 * @module
 */

import type { ActorRequest, ActorResponse, SocketEvent } from "../actors/protocol.ts";
import type { ActorExportCalls } from "../actors/abi/direct.ts";

/** What a WebSocket event answers the node: nothing but that it ran. */
const SOCKET_EVENT_DONE: ActorResponse = { status: 200, headers: [], body: new Uint8Array(0) };

/**
 * Runs the export of `socket`'s event.
 *
 * @example
 * ```ts
 * import { runSocketEvent } from "./socket_event.ts";
 * import type { ActorExportCalls } from "../actors/abi/direct.ts";
 * import type { ActorRequest } from "../actors/protocol.ts";
 * declare const exports: ActorExportCalls;
 * declare const request: ActorRequest;
 * await runSocketEvent(exports, { kind: "message", connection: 1, message: { text: "hi" } }, request);
 * ```
 */
export async function runSocketEvent(
  exports: ActorExportCalls,
  socket: SocketEvent,
  request: ActorRequest,
): Promise<ActorResponse> {
  const connection = BigInt(socket.connection);
  switch (socket.kind) {
    case "open":
      await exports.onWebsocketOpen(connection, request);
      break;
    case "message":
      await exports.onWebsocketMessage(
        connection,
        "text" in socket.message
          ? { tag: "text", val: socket.message.text }
          : { tag: "binary", val: socket.message.binary },
      );
      break;
    case "close":
      await exports.onWebsocketClose(connection, socket.code, socket.reason);
      break;
  }
  return SOCKET_EVENT_DONE;
}
