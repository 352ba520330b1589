/**
 * An HTTP/1.1 server over one {@linkcode ByteConn}: the cluster listener's,
 * once a peer's TLS handshake is over, and the simulator's stand-in for
 * `Deno.serve` (the same code in both). Requests are read one after another,
 * each handed to the handler as a web `Request` whose body streams as the
 * handler reads it, and its `Response` written back with its length, or
 * chunked when the body comes in more than one piece, as the peer takes it.
 *
 * Every part is bounded:
 *
 * - a head by `maxHeadBytes` (431, the connection closed);
 * - a body by `maxBodyBytes` (413, the connection closed once the peer
 *   stopped sending or a wait ran out, so the answer is not lost to a reset);
 * - every wait for the peer's bytes (a head, a piece of a body, a chunk
 *   line) by the length of the `idle` waits: past it the connection is closed
 *   (one timer for all the connections sharing that queue, not one each);
 * - what is held of a body: one piece of at most {@linkcode STREAM_CHUNK_BYTES}
 *   on its way to the handler, beside the connection's buffer; a request
 *   sent before its predecessor's answer (pipelined) waits in that buffer,
 *   and nothing more is read until the answer is written.
 *
 * What the peer did wrong is answered in one line of text: 400 for a request
 * line that is not HTTP/1.x, a target that is not a path, a header line that
 * is not valid, a body framed both by length and chunked, by a coding other
 * than chunked, or by lengths that disagree, and a GET or HEAD with a body;
 * the connection is closed after each of those but the target's, whose
 * framing is still known. A handler that throws is answered 500.
 *
 * An upgrade (`connection: upgrade` and an `upgrade` header) goes to the
 * `upgrade` option: accepted, the 101 is written and the connection handed
 * over with the bytes read past the request's head; refused, its answer is
 * written and the connection closed.
 *
 * The request's `signal` aborts when the connection ends before the answer
 * is written (the peer went away), once its body was read: a handler that
 * keeps a request (a failover wait) lets it go then.
 *
 * @module
 */

import { STATUS_CODES } from "node:http";
import type { Deadline, DeadlineQueue } from "../deadlines.ts";
import { AnswerBody, BodyTooLarge, STREAM_CHUNK_BYTES } from "./answer.ts";
import { type ByteConn, Connection, writeAll } from "./connection.ts";
import {
  COALESCE_BYTES,
  connectionTokens,
  decodeLatin1,
  indexOfBlankLine,
  isHopByHop,
  NO_TOKENS,
  parseContentLength,
  parseHeaderLines,
} from "./wire.ts";

/** What an {@linkcode H1ServerOptions.upgrade} decided. */
export type UpgradeAnswer =
  | {
    kind: "accept";
    /** Headers of the 101 beside `connection` and `upgrade`, which the server writes. */
    headers: [string, string][];
    /** Takes the switched connection, with the bytes the peer sent after its request's head. */
    join(conn: ByteConn, leftover: Uint8Array): void;
  }
  | { kind: "refuse"; response: Response };

/** Settings of {@linkcode serveHttp1}. */
export interface H1ServerOptions {
  /** Answers a request. One that throws is answered 500 (and told to `onHandlerError`). */
  handler: (request: Request) => Promise<Response>;
  /** Answers an upgrade request; unset, every upgrade is answered 501. */
  upgrade?: (request: Request) => Promise<UpgradeAnswer>;
  /**
   * The URL of a request from its `host` header (undefined when it has
   * none) and its target (a path); undefined answers it 400.
   */
  url: (host: string | undefined, target: string) => string | undefined;
  /** Asked before each request is served: false closes the connection, unanswered. */
  admit?: () => boolean;
  /** Largest request line plus headers; larger is answered 431. */
  maxHeadBytes: number;
  /** Largest request body; larger is answered 413. */
  maxBodyBytes: number;
  /**
   * The waits for the peer's next bytes while a head or a body is due, each
   * as long as the longest allowed; shared by a listener's connections.
   */
  idle: DeadlineQueue;
  /** Told of a handler or upgrade that threw. */
  onHandlerError?: (error: unknown, request: Request) => void;
}

const REQUEST_LINE = /^([!#$%&'*+\-.^_`|~0-9A-Za-z]+) (\S+) HTTP\/1\.([01])$/;
const EMPTY = new Uint8Array(0);
/** A piece of a chunked answer up to this size goes in one write with its framing. */
const COALESCE_CHUNK_BYTES = 4 * STREAM_CHUNK_BYTES;
const encoder = new TextEncoder();

/**
 * Serves `conn` until it ends, is closed after an answer, or is handed over
 * by an upgrade; never rejects (a broken connection is closed).
 *
 * @example
 * ```ts
 * import type { Server } from "node:tls";
 * import { serveHttp1 } from "./server.ts";
 * import { SocketConn } from "../socket_conn.ts";
 * import { DeadlineQueue } from "../deadlines.ts";
 * import { systemClock } from "../../time/clock.ts";
 * declare const socketServer: Server;
 * socketServer.on("secureConnection", (socket) =>
 *   void serveHttp1(new SocketConn(socket), {
 *     handler: (request) => Promise.resolve(new Response("hello")),
 *     url: (host, target) => `https://${host ?? "cluster"}${target}`,
 *     maxHeadBytes: 64 * 1024,
 *     maxBodyBytes: 1024 * 1024,
 *     idle: new DeadlineQueue(systemClock, 60_000, () => true),
 *   }));
 * ```
 */
export async function serveHttp1(conn: ByteConn, options: H1ServerOptions): Promise<void> {
  const connection = new Connection("", conn, () => {});
  const waits = new Waits(connection, options);
  let outcome: Served = "closed";
  try {
    do outcome = await serveOne(connection, waits, options); while (outcome === "next");
  } catch {
    // The connection failed, or the peer sent what cannot be framed: closed below.
  } finally {
    waits.stop();
  }
  if (outcome !== "switched") connection.close();
}

/** How a request ended for its connection. */
type Served = "next" | "closed" | "switched";

/** The idle wait: running while the peer's bytes are due, the connection closed when it ends. */
class Waits {
  readonly #connection: Connection;
  readonly #queue: DeadlineQueue;
  #deadline: Deadline | undefined;
  #depth = 0;

  constructor(connection: Connection, options: H1ServerOptions) {
    this.#connection = connection;
    this.#queue = options.idle;
  }

  /** `read` with the peer's bytes due: the connection is closed if none come in time. */
  async due<T>(read: () => Promise<T>): Promise<T> {
    if (this.#depth++ === 0) this.#deadline = this.#queue.add(() => this.#connection.close());
    try {
      return await read();
    } finally {
      if (--this.#depth === 0) this.stop();
    }
  }

  stop(): void {
    if (this.#deadline) this.#queue.remove(this.#deadline);
    this.#deadline = undefined;
  }
}

/** A request's head as read: line, headers, and what they say of the body and the connection. */
interface RequestHead {
  method: string;
  target: string;
  version: 0 | 1;
  headers: [string, string][];
  tokens: ReadonlySet<string>;
}

async function serveOne(
  connection: Connection,
  waits: Waits,
  options: H1ServerOptions,
): Promise<Served> {
  const text = await waits.due(() => readRequestHead(connection, options.maxHeadBytes));
  if (text === null) return "closed";
  if (text === undefined) {
    return await answerLine(connection, 431, "the request head is too large", false);
  }
  const lineEnd = text.indexOf("\r\n");
  const match = REQUEST_LINE.exec(lineEnd < 0 ? text : text.slice(0, lineEnd));
  if (!match) return await answerLine(connection, 400, "the request line is not HTTP/1.x", false);
  if (options.admit && !options.admit()) return "closed";
  const headers = lineEnd < 0 ? [] : parseHeaderLines(text, lineEnd + 2);
  if (typeof headers === "string") {
    return await answerLine(connection, 400, "a request header is not valid", false);
  }
  const head: RequestHead = {
    method: match[1],
    target: match[2],
    version: match[3] === "1" ? 1 : 0,
    headers,
    tokens: hasHeader(headers, "connection") ? connectionTokens(headers) : NO_TOKENS,
  };
  const keepAlive = head.version === 1 ? !head.tokens.has("close") : head.tokens.has("keep-alive");

  const framing = bodyFraming(headers, options.maxBodyBytes);
  if (framing === TOO_LARGE) return await refuseTooLarge(connection, waits, options);
  if (typeof framing === "string") return await answerLine(connection, 400, framing, false);
  const hasBody = framing.kind !== "none";
  if (hasBody && (head.method === "GET" || head.method === "HEAD")) {
    return await answerLine(connection, 400, `a ${head.method} request cannot have a body`, false);
  }
  if (!head.target.startsWith("/")) {
    return await answerLine(connection, 400, "the request target must be a path", keepAlive);
  }
  const url = options.url(headerValue(headers, "host"), head.target);
  if (url === undefined) {
    return await answerLine(connection, 400, "the request target is not a valid path", keepAlive);
  }

  if (head.tokens.has("upgrade") && hasHeader(headers, "upgrade")) {
    if (hasBody) {
      return await answerLine(connection, 400, "an upgrade request cannot have a body", false);
    }
    return await serveUpgrade(connection, head, url, options);
  }
  if (hasBody && headerValue(headers, "expect")?.toLowerCase() === "100-continue") {
    await connection.conn.write(encoder.encode("HTTP/1.1 100 Continue\r\n\r\n"));
  }

  const closed = new AbortController();
  const watchClose = () => {
    // One read while the handler works: its end (or failure) is the peer gone.
    void connection.read().then(() => {
      if (connection.dead && connection.end === connection.start) {
        closed.abort(new Error("the peer closed the connection"));
      }
    });
  };
  const body = hasBody
    ? new RequestBody(connection, waits, framing, options.maxBodyBytes, watchClose)
    : undefined;
  if (!body) watchClose();
  const request = new Request(url, {
    method: head.method,
    headers,
    body: body?.stream,
    signal: closed.signal,
    duplex: body ? "half" : undefined,
  } as RequestInit);

  let response: Response | undefined;
  try {
    response = await options.handler(request);
  } catch (error) {
    options.onHandlerError?.(error, request);
  }
  // A body the handler left unread is read to its end as the answer goes,
  // so the connection stays in step (and a peer that waits for its body to
  // be taken before it reads the answer is not stuck).
  const drained = body?.drain() ?? Promise.resolve(true);
  if (body?.tooLarge) {
    response?.body?.cancel().catch(() => {});
    await drained;
    return await refuseTooLarge(connection, waits, options);
  }
  const written = response
    ? writeAnswer(connection.conn, response, head.method === "HEAD", keepAlive)
    : answerLine(connection, 500, "the node failed to answer this request; see its log", keepAlive);
  const [wrote, inStep] = await Promise.all([written, drained]);
  if (body?.tooLarge) return "closed";
  return wrote === "next" && inStep && keepAlive ? "next" : "closed";
}

/**
 * The request head's text up to its blank line (consumed from the
 * connection); null when the connection ended before any byte of it,
 * undefined when it is over `max` bytes.
 */
async function readRequestHead(
  connection: Connection,
  max: number,
): Promise<string | null | undefined> {
  let searched = 0;
  let end: number;
  while (
    (end = indexOfBlankLine(connection.buf, connection.start + searched, connection.end)) < 0
  ) {
    const buffered = connection.end - connection.start;
    if (buffered > max) return undefined;
    searched = Math.max(0, buffered - 3);
    if (!await connection.fill()) {
      if (connection.end === connection.start) return null;
      throw new Error("the connection ended inside a request head");
    }
  }
  if (end - connection.start > max) return undefined;
  const text = decodeLatin1(connection.buf, connection.start, end);
  connection.start = end + 4;
  return text;
}

/** {@linkcode bodyFraming}'s answer for a declared length past the limit. */
const TOO_LARGE = Symbol("too large");

/** How a request's body is framed, {@linkcode TOO_LARGE} past `max`, or the line of its 400. */
function bodyFraming(
  headers: [string, string][],
  max: number,
):
  | { kind: "none" }
  | { kind: "length"; length: number }
  | { kind: "chunked" }
  | typeof TOO_LARGE
  | string {
  let transferEncoding: string[] | undefined;
  let contentLength: string[] | undefined;
  for (const [name, value] of headers) {
    if (name === "content-length") (contentLength ??= []).push(value);
    else if (name === "transfer-encoding") (transferEncoding ??= []).push(value);
  }
  if (transferEncoding) {
    if (contentLength) return "a request cannot have both content-length and transfer-encoding";
    const codings = transferEncoding.join(",").split(",").map((c) => c.trim().toLowerCase());
    if (codings.length !== 1 || codings[0] !== "chunked") {
      return "the request's transfer-encoding is not chunked alone";
    }
    return { kind: "chunked" };
  }
  if (!contentLength) return { kind: "none" };
  let length: number;
  try {
    length = parseContentLength(contentLength);
  } catch {
    return "the request's content-length is not valid";
  }
  if (length > max) return TOO_LARGE;
  return length === 0 ? { kind: "none" } : { kind: "length", length };
}

/**
 * A request's body as a stream the handler pulls, a piece at a time, each
 * read from the connection only when asked for.
 */
class RequestBody {
  readonly stream: ReadableStream<Uint8Array>;
  /** Set once the body went past the limit. */
  tooLarge = false;
  readonly #body: AnswerBody;
  readonly #waits: Waits;
  readonly #ended: () => void;
  /** The read under way, so that a drain never reads beside it. */
  #reading: Promise<Uint8Array | null> | undefined;
  #failed = false;

  constructor(
    connection: Connection,
    waits: Waits,
    framing: { kind: "length"; length: number } | { kind: "chunked" },
    max: number,
    ended: () => void,
  ) {
    this.#body = new AnswerBody(
      connection,
      { status: 0, headers: [], framing, reusable: true },
      max,
    );
    this.#waits = waits;
    this.#ended = ended;
    this.stream = new ReadableStream<Uint8Array>({
      pull: async (controller) => {
        try {
          const piece = await this.#next();
          if (piece === null) controller.close();
          else controller.enqueue(piece);
        } catch (error) {
          controller.error(
            this.tooLarge ? new Error(`the request body is over ${max} bytes`) : error,
          );
        }
      },
      // What the handler no longer wants is still read, by the drain, to keep the connection in step.
      cancel: () => {},
    }, { highWaterMark: 0 });
  }

  /** Reads the rest, dropping it; false when the connection is out of step (it must close). */
  async drain(): Promise<boolean> {
    try {
      while (await this.#next() !== null);
      return true;
    } catch {
      return false;
    }
  }

  async #next(): Promise<Uint8Array | null> {
    while (this.#reading) await this.#reading.catch(() => {});
    if (this.#failed) throw new Error("the request body could not be read");
    if (this.#body.done) return null;
    const reading = this.#waits.due(() => this.#body.next());
    this.#reading = reading;
    try {
      const piece = await reading;
      if (piece === null) this.#ended();
      return piece;
    } catch (error) {
      this.#failed = true;
      if (error instanceof BodyTooLarge) this.tooLarge = true;
      throw error;
    } finally {
      this.#reading = undefined;
    }
  }
}

/**
 * Answers 413 and closes the connection once the peer stopped sending (or
 * a wait ran out, or the limit's worth more was dropped): closing with its
 * bytes unread would reset the connection, and a reset can destroy the 413.
 */
async function refuseTooLarge(
  connection: Connection,
  waits: Waits,
  options: H1ServerOptions,
): Promise<Served> {
  await answerLine(
    connection,
    413,
    `the request body is over ${options.maxBodyBytes} bytes`,
    false,
  );
  const sink = new Uint8Array(STREAM_CHUNK_BYTES);
  try {
    for (let dropped = 0; dropped <= options.maxBodyBytes;) {
      const n = await waits.due(() => connection.readInto(sink));
      if (n === null) break;
      dropped += n;
    }
  } catch {
    // Closed by the peer or by the wait: what was wanted.
  }
  return "closed";
}

async function serveUpgrade(
  connection: Connection,
  head: RequestHead,
  url: string,
  options: H1ServerOptions,
): Promise<Served> {
  if (!options.upgrade) {
    return await answerLine(connection, 501, "upgrades are not served here", false);
  }
  const request = new Request(url, { method: head.method, headers: head.headers });
  let answer: UpgradeAnswer;
  try {
    answer = await options.upgrade(request);
  } catch (error) {
    options.onHandlerError?.(error, request);
    return await answerLine(
      connection,
      500,
      "the node failed to answer this upgrade; see its log",
      false,
    );
  }
  if (answer.kind === "refuse") {
    await writeAnswer(connection.conn, answer.response, false, false);
    return "closed";
  }
  let lines = "HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: " +
    headerValue(head.headers, "upgrade") + "\r\n";
  for (const [name, value] of answer.headers) lines += `${name}: ${value}\r\n`;
  await connection.conn.write(latin1(lines + "\r\n"));
  // A read may be under way into the buffer: what it brings belongs to the switched protocol.
  await connection.settled();
  answer.join(connection.conn, connection.buf.slice(connection.start, connection.end));
  return "switched";
}

/** A plain-text answer of one line; `keepAlive` false closes the connection after it. */
async function answerLine(
  connection: Connection,
  status: number,
  line: string,
  keepAlive: boolean,
): Promise<Served> {
  const response = new Response(line + "\n", {
    status,
    headers: { "content-type": "text/plain; charset=utf-8" },
  });
  return await writeAnswer(connection.conn, response, false, keepAlive);
}

/**
 * Writes `response`: a body that ends with its first piece goes with its
 * length (head and body in one write when small), a longer one chunked, each
 * piece written once the one before was taken (backpressure from the peer to
 * whoever makes the body). A HEAD answer states the length of the body it
 * leaves out, counted. A body that fails part way cuts the connection.
 */
async function writeAnswer(
  conn: ByteConn,
  response: Response,
  head: boolean,
  keepAlive: boolean,
): Promise<Served> {
  const { status } = response;
  let lines = `HTTP/1.1 ${status} ${response.statusText || STATUS_CODES[status] || ""}\r\n`;
  let declared: string | undefined;
  for (const [name, value] of response.headers) {
    if (name === "content-length") declared = value;
    else if (!isHopByHop(name)) lines += name + ": " + value + "\r\n";
  }
  if (!keepAlive) lines += "connection: close\r\n";
  const bodyless = status < 200 || status === 204 || status === 304;
  const reader = response.body?.getReader();
  const after: Served = keepAlive ? "next" : "closed";
  if (head || bodyless || !reader) {
    let length = 0;
    if (head && reader && !bodyless && declared === undefined) {
      try {
        for (let next; !(next = await reader.read()).done;) length += next.value.length;
      } catch {
        length = 0;
      }
    } else reader?.cancel().catch(() => {});
    if (head && declared !== undefined) lines += `content-length: ${declared}\r\n`;
    else if (!bodyless && (length > 0 || !head)) lines += `content-length: ${length}\r\n`;
    await conn.write(latin1(lines + "\r\n"));
    return after;
  }
  let piece: Uint8Array;
  let next: ReadableStreamReadResult<Uint8Array>;
  try {
    const first = await reader.read();
    piece = first.done ? EMPTY : first.value;
    next = first.done ? first : await reader.read();
  } catch {
    reader.cancel().catch(() => {});
    return "closed";
  }
  if (next.done) {
    await writeWithHead(conn, latin1(lines + `content-length: ${piece.length}\r\n\r\n`), piece);
    return after;
  }
  let out: Uint8Array | undefined = latin1(lines + "transfer-encoding: chunked\r\n\r\n");
  try {
    for (;;) {
      const last = next.done;
      // An empty piece is no chunk (a zero size would end the body): only the end, if last.
      if (piece.length > 0) {
        await writeWithHead(
          conn,
          concat(out, latin1(piece.length.toString(16) + "\r\n")),
          piece,
          last,
        );
        out = undefined;
      } else if (last || out) {
        await writeAll(conn, concat(out, last ? LAST_CHUNK : EMPTY));
        out = undefined;
      }
      if (last) break;
      piece = next.value;
      next = await reader.read();
    }
  } catch {
    reader.cancel().catch(() => {});
    return "closed";
  }
  return after;
}

/** `head` then `body` (then, for a chunk, its CRLF and, if `last`, the end), in one write when small. */
async function writeWithHead(
  conn: ByteConn,
  head: Uint8Array,
  body: Uint8Array,
  chunk?: boolean,
): Promise<void> {
  const tail = chunk === undefined ? EMPTY : chunk ? LAST_CHUNK_AFTER : CRLF;
  const limit = chunk === undefined ? COALESCE_BYTES : COALESCE_CHUNK_BYTES;
  if (body.length <= limit) {
    const wire = new Uint8Array(head.length + body.length + tail.length);
    wire.set(head);
    wire.set(body, head.length);
    wire.set(tail, head.length + body.length);
    await writeAll(conn, wire);
    return;
  }
  await writeAll(conn, head);
  await writeAll(conn, body);
  if (tail.length > 0) await writeAll(conn, tail);
}

const CRLF = latin1("\r\n");
/** The last chunk and the end of a body without trailers. */
const LAST_CHUNK = latin1("0\r\n\r\n");
/** A chunk's CRLF, then {@linkcode LAST_CHUNK}. */
const LAST_CHUNK_AFTER = latin1("\r\n0\r\n\r\n");

/** `first` (when there is one) then `second`. */
function concat(first: Uint8Array | undefined, second: Uint8Array): Uint8Array {
  if (!first) return second;
  const out = new Uint8Array(first.length + second.length);
  out.set(first);
  out.set(second, first.length);
  return out;
}

/** Latin-1 bytes of `text`, whose characters are all below 256 (checked header text). */
function latin1(text: string): Uint8Array {
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
  return bytes;
}

function hasHeader(headers: [string, string][], name: string): boolean {
  for (let i = 0; i < headers.length; i++) if (headers[i][0] === name) return true;
  return false;
}

function headerValue(headers: [string, string][], name: string): string | undefined {
  for (let i = 0; i < headers.length; i++) if (headers[i][0] === name) return headers[i][1];
  return undefined;
}
