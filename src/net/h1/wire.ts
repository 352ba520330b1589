/**
 * HTTP/1.1 as the path between nodes writes and reads it: request heads
 * (origin-form targets, header names and values checked, hop-by-hop headers
 * dropped), answer heads, content lengths. Pure functions over bytes and
 * strings; the connection and its reads are connection.ts and answer.ts.
 *
 * @module
 */

import type { StreamedBody } from "./request_body.ts";

/** Head and body are written with one call up to this size. */
export const COALESCE_BYTES = 16 * 1024;

/** An HTTP token (a method, a header name). */
export const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** An origin-form request target: printable ASCII, no spaces. */
const REQUEST_TARGET = /^\/[\x21-\x7e]*$/;
/** A header value: no CR, LF or NUL, and Latin-1 (a ByteString). */
export const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
const STATUS_LINE = /^HTTP\/1\.([01]) ([1-9]\d\d)(?: [\t\x20-\x7e\x80-\xff]*)?$/;
/** A chunk size line, extensions allowed. */
export const CHUNK_LINE = /^([0-9A-Fa-f]+)[ \t]*(?:;[\t\x20-\x7e\x80-\xff]*)?$/;

/** Methods whose empty body goes without a `content-length`. */
const NO_CONTENT_METHODS = new Set(["GET", "HEAD", "DELETE", "OPTIONS", "TRACE"]);

/** Headers that belong to one connection and are not forwarded (RFC 9110 §7.6.1). */
const HOP_BY_HOP = new Set([
  "connection",
  "keep-alive",
  "transfer-encoding",
  "te",
  "trailer",
  "upgrade",
]);

/**
 * Whether a header belongs to one connection (never forwarded).
 *
 * @example
 * ```ts
 * import { isHopByHop } from "./wire.ts";
 * isHopByHop("keep-alive"); // true
 * ```
 */
export function isHopByHop(name: string): boolean {
  return HOP_BY_HOP.has(name) || name.startsWith("proxy-");
}

/** A problem with the peer's answer; its message is the `reason`. */
export class AnswerError extends Error {
  override name = "AnswerError";
}

/**
 * A request that cannot be sent as given (never written).
 *
 * @example
 * ```ts
 * import { invalid } from "./wire.ts";
 * invalid("the method is not a token").message; // "cannot forward: the method is not a token"
 * ```
 */
export function invalid(message: string): TypeError {
  return new TypeError(`cannot forward: ${message}`);
}

const asciiDecoder = new TextDecoder();

/**
 * `buf[start, end)` as Latin-1 text (what HTTP/1.1 heads are).
 *
 * @example
 * ```ts
 * import { decodeLatin1 } from "./wire.ts";
 * decodeLatin1(new Uint8Array([104, 105]), 0, 2); // "hi"
 * ```
 */
export function decodeLatin1(buf: Uint8Array, start: number, end: number): string {
  let ascii = true;
  for (let i = start; i < end; i++) {
    if (buf[i] > 0x7f) {
      ascii = false;
      break;
    }
  }
  // ASCII is the same in UTF-8, which the platform decodes natively.
  if (ascii) return asciiDecoder.decode(buf.subarray(start, end));
  let text = "";
  for (let i = start; i < end; i += 8192) {
    text += String.fromCharCode(...buf.subarray(i, Math.min(end, i + 8192)));
  }
  return text;
}

/**
 * The first CRLF in `buf[from, end)`, or -1.
 *
 * @example
 * ```ts
 * import { indexOfCrlf } from "./wire.ts";
 * indexOfCrlf(new Uint8Array([65, 13, 10]), 0, 3); // 1
 * ```
 */
export function indexOfCrlf(buf: Uint8Array, from: number, end: number): number {
  for (let i = from; i + 1 < end; i++) {
    if (buf[i] === 13 && buf[i + 1] === 10) return i;
  }
  return -1;
}

/**
 * The first CRLF CRLF in `buf[from, end)`, or -1.
 *
 * @example
 * ```ts
 * import { indexOfBlankLine } from "./wire.ts";
 * indexOfBlankLine(new Uint8Array([65, 13, 10, 13, 10]), 0, 5); // 1
 * ```
 */
export function indexOfBlankLine(buf: Uint8Array, from: number, end: number): number {
  for (let i = from; i + 3 < end; i++) {
    if (buf[i + 3] === 10 && buf[i + 2] === 13 && buf[i + 1] === 10 && buf[i] === 13) return i;
  }
  return -1;
}

/**
 * The lower-cased tokens of every `connection` header.
 *
 * @example
 * ```ts
 * import { connectionTokens } from "./wire.ts";
 * connectionTokens([["Connection", "close, X-A"]]); // Set { "close", "x-a" }
 * ```
 */
export function connectionTokens(headers: Iterable<[string, string]>): Set<string> {
  const tokens = new Set<string>();
  for (const [name, value] of headers) {
    if (name.toLowerCase() !== "connection") continue;
    for (const token of value.split(",")) {
      const trimmed = token.trim().toLowerCase();
      if (trimmed) tokens.add(trimmed);
    }
  }
  return tokens;
}

/** Whether some header is named `connection`, in any case. */
function hasConnectionHeader(headers: [string, string][]): boolean {
  for (let i = 0; i < headers.length; i++) {
    const name = headers[i][0];
    if (name.length === 10 && name.toLowerCase() === "connection") return true;
  }
  return false;
}

/** A request to write: `path` includes the query (`/actor/c/n/x?y=1`). */
export interface RequestHead {
  method: string;
  path: string;
  headers: [string, string][];
  /** The body in hand; empty when `stream` carries it. */
  body: Uint8Array;
  /** A body sent as it is read (request_body.ts), instead of `body`. */
  stream?: StreamedBody;
  /** The protocol asked for (`upgrade: ...`, with `connection: upgrade`): an upgrade request. */
  upgrade?: string;
}

/**
 * The request line and headers as bytes, followed by the body when it is
 * at most {@linkcode COALESCE_BYTES} (one write); throws a TypeError for
 * what cannot be sent. The request's own headers named in `replaced` are
 * dropped (the writer sets them: `ownLines`, whole header lines); `host`
 * is kept, or `authority` when it has none.
 *
 * @example
 * ```ts
 * import { encodeRequest } from "./wire.ts";
 * const bytes = encodeRequest(
 *   { method: "GET", path: "/", headers: [], body: new Uint8Array() },
 *   "a:8080",
 *   "",
 *   new Set(["host", "content-length"]),
 * );
 * new TextDecoder().decode(bytes); // "GET / HTTP/1.1\r\nhost: a:8080\r\n\r\n"
 * ```
 */
export function encodeRequest(
  request: RequestHead,
  authority: string,
  ownLines: string,
  replaced: ReadonlySet<string>,
): Uint8Array {
  const { method, path, headers, body } = request;
  if (!TOKEN.test(method)) throw invalid(`the method ${JSON.stringify(method)} is not a token`);
  if (!REQUEST_TARGET.test(path)) {
    throw invalid(`the path ${JSON.stringify(path)} is not an origin-form request target`);
  }
  const dropped = hasConnectionHeader(headers) ? connectionTokens(headers) : undefined;
  let lines = "";
  let host: string | undefined;
  for (let i = 0; i < headers.length; i++) {
    const [name, value] = headers[i];
    if (!TOKEN.test(name)) throw invalid(`the header name ${JSON.stringify(name)} is not a token`);
    if (!HEADER_VALUE.test(value)) throw invalid(`the value of the header ${name} is not valid`);
    const lower = name.toLowerCase();
    if (lower === "host") {
      host ??= value;
      continue;
    }
    if (replaced.has(lower) || isHopByHop(lower) || dropped?.has(lower)) continue;
    lines += name + ": " + value + "\r\n";
  }
  let text = method + " " + path + " HTTP/1.1\r\nhost: " + (host ?? authority) + "\r\n" + lines +
    ownLines;
  const { stream, upgrade } = request;
  if (upgrade !== undefined) {
    if (!TOKEN.test(upgrade)) {
      throw invalid(`the protocol ${JSON.stringify(upgrade)} to upgrade to is not a token`);
    }
    text += "connection: upgrade\r\nupgrade: " + upgrade + "\r\n";
  }
  if (stream) {
    text += stream.length === undefined
      ? "transfer-encoding: chunked\r\n"
      : "content-length: " + stream.length + "\r\n";
  } else if (body.length > 0 || !NO_CONTENT_METHODS.has(method)) {
    text += "content-length: " + body.length + "\r\n";
  }
  text += "\r\n";
  const coalesced = body.length <= COALESCE_BYTES ? body.length : 0;
  const wire = new Uint8Array(text.length + coalesced);
  // Latin-1: every character checked is below 256.
  for (let i = 0; i < text.length; i++) wire[i] = text.charCodeAt(i);
  if (coalesced > 0) wire.set(body, text.length);
  return wire;
}

/** No connection header: no tokens. */
export const NO_TOKENS: ReadonlySet<string> = new Set();

/**
 * `headers` without the hop-by-hop ones and those `tokens` name (the same
 * array when none).
 *
 * @example
 * ```ts
 * import { endToEnd, NO_TOKENS } from "./wire.ts";
 * endToEnd([["keep-alive", "5"], ["a", "b"]], NO_TOKENS); // [["a", "b"]]
 * ```
 */
export function endToEnd(
  headers: [string, string][],
  tokens: ReadonlySet<string>,
): [string, string][] {
  for (let i = 0; i < headers.length; i++) {
    const name = headers[i][0];
    if (isHopByHop(name) || tokens.has(name)) {
      return headers.filter(([name]) => !isHopByHop(name) && !tokens.has(name));
    }
  }
  return headers;
}

/** An answer's head: its version (1.0 or 1.1), status and headers (names in lower case). */
export interface Head {
  version: number;
  status: number;
  headers: [string, string][];
}

/**
 * The status line and header lines (CRLF between them, none after); throws
 * an {@linkcode AnswerError} for what is not HTTP/1.x.
 *
 * @example
 * ```ts
 * import { parseHead } from "./wire.ts";
 * parseHead("HTTP/1.1 200 OK\r\nContent-Length: 2"); // { version: 1, status: 200, headers: [["content-length", "2"]] }
 * ```
 */
export function parseHead(text: string): Head {
  let lineEnd = text.indexOf("\r\n");
  if (lineEnd < 0) lineEnd = text.length;
  const statusLine = text.slice(0, lineEnd);
  const match = STATUS_LINE.exec(statusLine);
  if (!match) {
    throw new AnswerError(
      `the answer is not HTTP/1.x: its status line is ${JSON.stringify(statusLine.slice(0, 80))}`,
    );
  }
  const headers = parseHeaderLines(text, lineEnd + 2);
  if (typeof headers === "string") {
    throw new AnswerError(`the answer has a malformed header line ${JSON.stringify(headers)}`);
  }
  return { version: match[1] === "1" ? 1 : 0, status: Number(match[2]), headers };
}

/**
 * The header lines of a head from `start` (CRLF between them, none after),
 * names in lower case and values without the blanks around them; or the
 * first line that is not a valid header, for the caller's error.
 *
 * @example
 * ```ts
 * import { parseHeaderLines } from "./wire.ts";
 * parseHeaderLines("GET / HTTP/1.1\r\nHost: a", 16); // [["host", "a"]]
 * ```
 */
export function parseHeaderLines(text: string, start: number): [string, string][] | string {
  const headers: [string, string][] = [];
  for (let lineEnd: number; start < text.length + 2; start = lineEnd + 2) {
    lineEnd = text.indexOf("\r\n", start);
    if (lineEnd < 0) lineEnd = text.length;
    let colon = text.indexOf(":", start);
    if (colon < 0 || colon > lineEnd) colon = start - 1;
    const name = colon > start ? text.slice(start, colon) : "";
    let from = colon + 1;
    let to = lineEnd;
    while (from < to && isBlank(text.charCodeAt(from))) from++;
    while (to > from && isBlank(text.charCodeAt(to - 1))) to--;
    const value = text.slice(from, to);
    if (!TOKEN.test(name) || !HEADER_VALUE.test(value)) return text.slice(start, lineEnd);
    headers.push([name.toLowerCase(), value]);
  }
  return headers;
}

/** Space or tab. */
function isBlank(code: number): boolean {
  return code === 32 || code === 9;
}

const DIGITS = /^\d+$/;

/**
 * The one length the `content-length` values say; throws an
 * {@linkcode AnswerError} for values that are not numbers or disagree.
 *
 * @example
 * ```ts
 * import { parseContentLength } from "./wire.ts";
 * parseContentLength(["3, 3"]); // 3
 * ```
 */
export function parseContentLength(values: string[]): number {
  // The usual case: one value, digits only.
  if (values.length === 1 && DIGITS.test(values[0])) return Number(values[0]);
  let length: number | undefined;
  for (const value of values.join(",").split(",")) {
    const trimmed = value.trim();
    if (!DIGITS.test(trimmed)) {
      throw new AnswerError(`the answer's content-length ${JSON.stringify(value)} is not a number`);
    }
    const parsed = Number(trimmed);
    if (length !== undefined && parsed !== length) {
      throw new AnswerError("the answer has conflicting content-length values");
    }
    length = parsed;
  }
  return length!;
}
