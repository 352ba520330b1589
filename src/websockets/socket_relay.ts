/**
 * A WebSocket relayed to its actor's owner, message by message: the
 * client's socket on this node (made by `Deno.upgradeWebSocket`, which
 * hides the connection's bytes) joined to the socket this node speaks to
 * the owner over the upgraded connection between them (`wire_socket.ts`).
 * What one side sends the other sends on, in order; a close of either side
 * closes the other with its code (a connection that ended without one, 1006,
 * closes the other with 1012: reconnect, the actor is elsewhere or coming
 * back); a side that does not read past `maxBufferedBytes` closes both with
 * 1013.
 *
 * @module
 */

import type { SocketMessage } from "../actors/protocol.ts";
import type { Clock, Timer } from "../time/clock.ts";
import { CLOSE_ANSWER_MS } from "../limits.ts";
import { CLOSE } from "./actor_sockets.ts";
import type { SocketLike } from "./socket_like.ts";

/**
 * A relay under way: `ended` resolves once both sides closed (after a cut,
 * 5 s at most); `cut` closes both with 1012.
 */
export interface SocketRelay {
  ended: Promise<void>;
  cut(reason: string): void;
}

/**
 * Joins `client` and `owner` until either closes.
 *
 * @example
 * ```ts
 * import { relaySockets } from "./socket_relay.ts";
 * import { webSocketOf } from "./socket_like.ts";
 * import { WireSocket, type WireSocketOptions } from "./wire_socket.ts";
 * import { bufferedBytesFor } from "./actor_sockets.ts";
 * import type { Relays } from "../cluster/relays.ts";
 * import type { UpgradeResult } from "../http/forward.ts";
 * import { systemClock as clock } from "../time/clock.ts";
 * declare const socket: WebSocket;
 * declare const up: Extract<UpgradeResult, { kind: "switched" }>;
 * declare const options: WireSocketOptions;
 * declare const relays: Relays;
 * declare const fingerprint: string;
 * const node = "b";
 * const relay = relaySockets(webSocketOf(socket, clock), new WireSocket(up.conn, options), {
 *   clock,
 *   maxBufferedBytes: bufferedBytesFor(options.maxMessageBytes),
 * });
 * relays.hold({ node, fingerprint }, relay.ended, (error) => relay.cut(error.message));
 * ```
 */
export function relaySockets(
  client: SocketLike,
  owner: SocketLike,
  options: { clock: Clock; maxBufferedBytes: number },
): SocketRelay {
  const { clock, maxBufferedBytes } = options;
  const { promise: ended, resolve } = Promise.withResolvers<void>();
  let open = 2;
  let late: Timer | undefined;
  const closedOne = () => {
    if (--open > 0) return;
    late?.cancel();
    resolve();
  };
  const closeBoth = (code: number, reason: string) => {
    client.close(code, reason);
    owner.close(code, reason);
    // A side that does not answer its close is not waited for past the spec's 5 s.
    late ??= clock.setTimer(CLOSE_ANSWER_MS, resolve);
  };
  const pass = (to: SocketLike) => (message: SocketMessage) => {
    if (!to.open) return;
    if (to.bufferedAmount > maxBufferedBytes) {
      closeBoth(CLOSE.tryAgainLater, "a side of the relay does not read its messages");
      return;
    }
    to.send(message);
  };
  const closeOther = (other: SocketLike) => (code: number, reason: string) => {
    closedOne();
    other.close(sendable(code), reason);
  };
  client.listen({ open() {}, message: pass(owner), close: closeOther(owner) });
  owner.listen({ open() {}, message: pass(client), close: closeOther(client) });
  return { ended, cut: (reason) => closeBoth(CLOSE.serviceRestart, reason.slice(0, 120)) };
}

/** A close code as it may be sent on: 1005 (none given) is 1000, 1006 (no close) is 1012. */
function sendable(code: number): number {
  if (code === 1005) return 1000;
  if (code === 1006 || code === 1015 || code < 1000) return CLOSE.serviceRestart;
  return code;
}
