/**
 * What a port reads of a request before routing it: its URL (judged, since
 * Deno.serve makes it from the Host header as sent), its headers in one
 * pass, and its body when read whole.
 *
 * @module
 */

import { readStream } from "./unread_body.ts";
import { CALL_HEADERS } from "../security/call_signature.ts";

/** The answer to a Host header that {@linkcode isValidHost} refuses. */
const BAD_HOST = "bad request: the Host header is not a valid host[:port]";
/** The answer to an absolute-form target whose authority is not a host and port. */
const BAD_TARGET = "bad request: the request target's authority is not a valid host[:port]";

/**
 * A name (RFC 3986's unreserved characters) or a bracketed IPv6 address, and
 * an optional port: nothing that could move into the path, query or userinfo
 * of a URL made from it.
 */
const HOST_PORT = /^(?:[A-Za-z0-9._~-]+|\[[0-9A-Fa-f:.]+\])(?::([0-9]*))?$/;

/**
 * Whether `host` is a valid Host header: a name, an IPv4 address or an IPv6
 * address in brackets, and an optional port from 1 to 65535 (or empty, which
 * RFC 3986 allows for the scheme's default). Both listeners judge the header
 * by this, so that a host one serves the other serves too (a forwarded
 * request keeps its client's Host).
 *
 * @example
 * ```ts
 * import { isValidHost } from "./request_head.ts";
 * isValidHost("[::1]:8080"); // true
 * isValidHost("node:70000"); // false
 * ```
 */
export function isValidHost(host: string): boolean {
  const match = HOST_PORT.exec(host);
  if (match === null) return false;
  const port = match[1];
  if (port && !(Number(port) >= 1 && Number(port) <= 65535)) return false;
  // The parser judges what the pattern lets through: "999.1.1.1", "[:::]", bad punycode.
  return URL.canParse(`http://${host}/`);
}

/**
 * The request's URL, or why it is refused. Deno.serve makes the URL of an
 * origin-form request from its Host header as sent, where a space or a port
 * over 65535 makes `new URL` throw and a `/`, `?` or `@` moves into the path,
 * query or userinfo; an absolute-form target is the URL as sent.
 *
 * @example
 * ```ts
 * import { requestUrl } from "./request_head.ts";
 * requestUrl("http://a:8080/actor/c/n", "a:8080"); // URL
 * requestUrl("http://a b/", "a b"); // "bad request: the Host header is not a valid host[:port]"
 * ```
 */
export function requestUrl(target: string, host: string | undefined): URL | string {
  // Empty is what RFC 9112 asks a client to send for a target without an authority.
  if (host && !isValidHost(host)) return BAD_HOST;
  let url: URL;
  try {
    url = new URL(target);
  } catch {
    return BAD_TARGET;
  }
  // Only an absolute-form target gets here with these: a URL made from a
  // Host header that passed has neither.
  if (url.username !== "" || url.password !== "" || url.port === "0") return BAD_TARGET;
  return url;
}

/**
 * The request's body, at most `limit` bytes (its declared length checked
 * already); `declared` is its content-length header. A declared empty body
 * is answered without a promise; and before `request.body` is touched,
 * since even getting an empty body's stream costs a call into the runtime.
 *
 * @example
 * ```ts
 * import { readBody } from "./request_head.ts";
 * const body = await readBody(new Request("http://a/", { method: "POST", body: "hi" }), "2", 10);
 * console.log(body.length); // 2
 * ```
 */
export function readBody(
  request: Request,
  declared: string | undefined,
  limit: number,
): Uint8Array | Promise<Uint8Array> {
  if (declared === "0" || !request.body) return new Uint8Array();
  return readStream(request.body, limit);
}

/** The request's headers for the actor, and the three the port reads itself. */
export interface RequestHeaders {
  /** Every header but the call headers, as `[...headers]` gives them. */
  pairs: [string, string][];
  contentLength: string | undefined;
  upgrade: string | undefined;
  host: string | undefined;
  /** A call header came with it: the signature covers the body, which is read whole. */
  signed: boolean;
}

const CALL_HEADER_NAMES = new Set(CALL_HEADERS);

/** Headers only the node sets: a client's are dropped (a forged caller, a stray signature). */
function isCallHeader(name: string): boolean {
  return name.startsWith("x-wasmkeep-") && CALL_HEADER_NAMES.has(name);
}

/**
 * The request's headers as `[...headers]` gives them (lower-case names in
 * order, repeated ones joined), made with forEach: about a seventh of the
 * cost of the iterator (1.9 µs against 0.3 for two headers, measured). The
 * content-length, upgrade and host headers are picked up on the way (the
 * values `headers.get` gives), since each `get` is a call into the runtime.
 *
 * @example
 * ```ts
 * import { requestHeaders } from "./request_head.ts";
 * requestHeaders(new Headers({ host: "a", "x-wasmkeep-caller": "forged" })).signed; // true
 * ```
 */
export function requestHeaders(headers: Headers): RequestHeaders {
  const found: RequestHeaders = {
    pairs: [],
    contentLength: undefined,
    upgrade: undefined,
    host: undefined,
    signed: false,
  };
  headers.forEach((value, name) => {
    if (name === "content-length") found.contentLength = value;
    else if (name === "upgrade") found.upgrade = value;
    else if (name === "host") found.host = value;
    else if (isCallHeader(name)) {
      found.signed = true;
      return;
    }
    found.pairs.push([name, value]);
  });
  return found;
}
