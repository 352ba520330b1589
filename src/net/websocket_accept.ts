/**
 * The key of a WebSocket opening handshake's answer (RFC 6455): what a node
 * answers to a client's upgrade, and what it checks in a peer's answer to an
 * upgrade it relayed.
 *
 * @module
 */

import { createHash } from "node:crypto";

/**
 * The `sec-websocket-accept` that answers `key` (RFC 6455, section 4.2.2).
 * Computed at once, not by `crypto.subtle`, whose answer comes from another
 * thread: the simulator's runs must not depend on when it arrives.
 *
 * @example
 * ```ts
 * import { acceptKeyOf } from "./websocket_accept.ts";
 * acceptKeyOf("dGhlIHNhbXBsZSBub25jZQ=="); // "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
 * ```
 */
export function acceptKeyOf(key: string): string {
  return createHash("sha1").update(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest("base64");
}
