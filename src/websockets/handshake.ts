/**
 * Whether a request is a WebSocket opening handshake this node accepts
 * (RFC 6455, section 4.2.1): a GET with `upgrade: websocket`, `connection`
 * naming `upgrade`, `sec-websocket-version: 13` and a key of 16 bytes in
 * base64. Anything else that asks for a WebSocket is answered 400 with the
 * one line {@linkcode handshakeProblem} gives. The answer's key is
 * src/net/websocket_accept.ts's, which cluster/ needs too.
 *
 * @module
 */

/** A `sec-websocket-key`: 16 bytes in base64, 24 characters with its padding. */
const KEY = /^[A-Za-z0-9+/]{22}==$/;

/**
 * Why `request` is not a valid WebSocket opening handshake, or undefined
 * when it is one.
 *
 * @example
 * ```ts
 * import { handshakeProblem } from "./handshake.ts";
 * const request = new Request("http://a/actor/room/x", {
 *   headers: { upgrade: "websocket", connection: "Upgrade", "sec-websocket-version": "13",
 *     "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==" },
 * });
 * console.log(handshakeProblem(request)); // undefined
 * ```
 */
export function handshakeProblem(request: Request): string | undefined {
  const headers = request.headers;
  if (request.method !== "GET") return `a WebSocket is opened with GET, not ${request.method}`;
  const tokens = (headers.get("connection") ?? "").split(",").map((t) => t.trim().toLowerCase());
  if (!tokens.includes("upgrade")) {
    return "a WebSocket upgrade needs 'connection: upgrade'";
  }
  const version = headers.get("sec-websocket-version");
  if (version !== "13") {
    return `this node speaks WebSocket version 13, not ${
      version ?? "none"
    } (sec-websocket-version)`;
  }
  const key = headers.get("sec-websocket-key")?.trim();
  if (!key || !KEY.test(key)) {
    return "the sec-websocket-key is not 16 bytes in base64";
  }
  return undefined;
}
