/**
 * A socket for tests of the node's socket bookkeeping: it records what is
 * sent and how it was closed, tells its handlers of the close, and lets the
 * test play the client (open, message, close).
 *
 * @module
 */

import type { SocketMessage } from "../../src/actors/protocol.ts";
import type { SocketHandlers, SocketLike } from "../../src/websockets/socket_like.ts";

/** A recording socket and the client's side of it. */
export interface RecordingSocket {
  socket: SocketLike;
  /** The closes the node made, in order. */
  closes: [number, string][];
  sent: SocketMessage[];
  /** The client: its socket opened, sent `message`, or closed. */
  client: {
    open(): void;
    message(message: SocketMessage): void;
    close(code: number, reason: string): void;
  };
}

/** A socket that records its sends and closes. */
export function recordingSocket(): RecordingSocket {
  let handlers: SocketHandlers | undefined;
  const closes: [number, string][] = [];
  const sent: SocketMessage[] = [];
  let open = true;
  const socket: SocketLike = {
    get open() {
      return open;
    },
    bufferedAmount: 0,
    send(message) {
      sent.push(message);
    },
    close(code, reason) {
      if (!open) return;
      open = false;
      closes.push([code, reason]);
      queueMicrotask(() => handlers?.close(code, reason));
    },
    listen(given) {
      handlers = given;
    },
  };
  return {
    socket,
    closes,
    sent,
    client: {
      open: () => handlers?.open(),
      message: (message) => handlers?.message(message),
      close: (code, reason) => {
        open = false;
        handlers?.close(code, reason);
      },
    },
  };
}
