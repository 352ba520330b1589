/**
 * The size rule of a WebSocket message, the one both ways use: a client's
 * message over the node's limit closes its socket with 1009, an actor's
 * `websockets.send` over it is the actor's error. A text counts its UTF-8
 * bytes, encoded only when its length could be over.
 *
 * @module
 */

import type { SocketMessage } from "../actors/protocol.ts";

const utf8 = new TextEncoder();

/**
 * The size of `message` in bytes when it is over `max`; undefined when it
 * is within.
 *
 * @example
 * ```ts
 * import { sizeOverLimit } from "./message_size.ts";
 * sizeOverLimit({ text: "héllo" }, 5); // 6
 * sizeOverLimit({ binary: new Uint8Array(5) }, 5); // undefined
 * ```
 */
export function sizeOverLimit(message: SocketMessage, max: number): number | undefined {
  if ("binary" in message) return message.binary.length > max ? message.binary.length : undefined;
  // UTF-8 takes at most three bytes per UTF-16 unit.
  if (message.text.length * 3 <= max) return undefined;
  const size = utf8.encode(message.text).length;
  return size > max ? size : undefined;
}
