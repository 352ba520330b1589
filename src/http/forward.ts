/**
 * Forwarding a request to the node that holds its actor: a small HTTP/1.1
 * client over raw TCP with kept-alive connections per peer.
 *
 * `fetch` is not used because it cannot give the guarantee the cluster
 * promises its callers (running-a-cluster.md, "How it works"): a request
 * that may have been written is never sent again, since it may have run on
 * the peer. `fetch` may resend on a connection that failed, and does not say
 * whether the request was written. Here every outcome says so:
 *
 * - `response`: the peer's complete answer.
 * - `unreachable` with `written: false`: no byte of the request reached a
 *   socket (no connection could be opened within {@linkcode CONNECT_TIMEOUT_MS},
 *   or the first write failed on a new connection). It did not run there.
 * - `unreachable` with `written: true`: the connection failed, or the answer
 *   was not acceptable (malformed, over {@linkcode MAX_FORWARDED_BODY_BYTES}),
 *   after bytes of the request were handed to the socket. It may have run.
 * - `timeout`: no complete answer within {@linkcode ANSWER_TIMEOUT_MS} of the
 *   first byte being written. It may have run.
 *
 * The one resend: a kept-alive connection that the peer had already closed
 * costs nothing. An idle pooled connection keeps a read pending, so a close
 * (EOF), a reset or stray bytes from the peer mark it dead and it is dropped
 * from the pool; one found dead when taken is discarded before anything is
 * written. And when the first write on a reused connection fails at once
 * with a reset or a broken pipe (no byte accepted), the request goes on a
 * fresh connection, once. What cannot be told apart is a close the peer
 * sends while the request is being written (the race every kept-alive client
 * has): that request ends `unreachable` with `written: true`, never resent.
 *
 * Every wait is on the {@linkcode Clock}, so the simulator runs this module
 * on simulated time.
 *
 * @module
 */

import { concatBytes } from "../bytes.ts";
import { describeError } from "../describe_error.ts";
import { type Clock, systemClock, type Timer } from "../time/clock.ts";

/** Longest wait for a connection (a free slot included) before a request is unreachable. */
export const CONNECT_TIMEOUT_MS = 5_000;
/**
 * Longest wait for a complete answer, counted from the first byte of the
 * request written (one timer for all the exchanges waiting: the same wait
 * for each, so their deadlines come in the order they started).
 */
export const ANSWER_TIMEOUT_MS = 30_000;
/**
 * A kept-alive connection unused this long is closed (one timer for the
 * whole pool, armed for the least recently used idle connection).
 */
export const IDLE_TIMEOUT_MS = 30_000;
/** Most idle connections kept per peer; one more returned is closed. */
export const MAX_IDLE_PER_PEER = 64;
/** Default for {@linkcode ForwarderOptions.maxOpenConnections}. */
export const MAX_OPEN_CONNECTIONS = 1024;
/** Largest answer body accepted from a peer; a larger one is refused, never truncated. */
export const MAX_FORWARDED_BODY_BYTES = 32 * 1024 * 1024;
/** Largest status line plus headers (and, separately, trailers) accepted from a peer. */
export const MAX_ANSWER_HEAD_BYTES = 64 * 1024;
/** The header naming the node that forwarded a request, so its peer does not forward it again. */
export const FORWARDED_BY_HEADER = "x-wasmkeep-forwarded-by";

/** A request to forward. `path` includes the query (`/actor/c/n/x?y=1`). */
export interface ForwardRequest {
  method: string;
  path: string;
  headers: [string, string][];
  body: Uint8Array;
}

/** How a forwarded request ended. */
export type ForwardResult =
  | {
    kind: "response";
    status: number;
    /** Names in lower case, hop-by-hop headers removed (`content-length` kept). */
    headers: [string, string][];
    body: Uint8Array;
  }
  | {
    kind: "unreachable";
    /** Whether any byte of the request was handed to a socket: if so, it may have run. */
    written: boolean;
    reason: string;
    /**
     * The connection was a new one and the peer sent no byte on it before it
     * ended: over mutual TLS, what a peer refusing this node's certificate
     * does (the spec's "came back unsent on a new TLS connection").
     */
    unansweredNew?: boolean;
  }
  | { kind: "timeout" };

/** The byte stream the forwarder needs of a connection (a Deno.Conn is one). */
export interface ByteConn {
  /** Reads into `p`: the count, or null at the end of the stream. */
  read(p: Uint8Array): Promise<number | null>;
  /** Writes from `p`: the count accepted. */
  write(p: Uint8Array): Promise<number>;
  close(): void;
}

/** Opens a connection to a peer; aborting `signal` gives up. */
export type Connect = (host: string, port: number, signal: AbortSignal) => Promise<ByteConn>;

/** Settings of a {@linkcode Forwarder}. */
export interface ForwarderOptions {
  /** This node's id, sent as {@linkcode FORWARDED_BY_HEADER}. */
  nodeId: string;
  /** Defaults to the system clock. */
  clock?: Clock;
  /**
   * Opens connections; defaults to plain TCP with `Deno.connect`. An
   * `https:` peer needs one (the TLS seam).
   */
  connect?: Connect;
  /** Most connections open (or opening) at once, idle ones included; default 1024. */
  maxOpenConnections?: number;
  /** Default {@linkcode MAX_IDLE_PER_PEER}. */
  maxIdlePerPeer?: number;
  /** Default {@linkcode CONNECT_TIMEOUT_MS}. */
  connectTimeoutMs?: number;
  /** Default {@linkcode ANSWER_TIMEOUT_MS}. */
  answerTimeoutMs?: number;
  /** Default {@linkcode IDLE_TIMEOUT_MS}. */
  idleTimeoutMs?: number;
  /** Default {@linkcode MAX_FORWARDED_BODY_BYTES}. */
  maxBodyBytes?: number;
}

/** Counts for tests and metrics. */
export interface ForwarderStats {
  /** Connections open or being opened, idle ones included. */
  open: number;
  /** Kept-alive connections waiting for a request. */
  idle: number;
  /** Requests waiting for a free connection slot. */
  waiting: number;
}

const EMPTY = new Uint8Array(0);
const RESOLVED = Promise.resolve();
const ONCE = { once: true } as const;
/**
 * A connection's read buffer: heads, chunk lines and small bodies are read
 * into it; it grows for a longer head or line, and shrinks back once empty.
 * A body past what it holds is read straight into the body's own array.
 */
const BUFFER_BYTES = 16 * 1024;
/** Read size of a body delimited by the close. */
const READ_TO_END_BYTES = 64 * 1024;
/** Head and body are written with one call up to this size. */
const COALESCE_BYTES = 16 * 1024;
const MAX_CHUNK_LINE_BYTES = 4 * 1024;
/** Most parsed peer addresses remembered; the oldest is forgotten first. */
const MAX_CACHED_PEERS = 256;

const TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
/** An origin-form request target: printable ASCII, no spaces. */
const REQUEST_TARGET = /^\/[\x21-\x7e]*$/;
/** A header value: no CR, LF or NUL, and Latin-1 (a ByteString). */
const HEADER_VALUE = /^[\t\x20-\x7e\x80-\xff]*$/;
const STATUS_LINE = /^HTTP\/1\.([01]) ([1-9]\d\d)(?: [\t\x20-\x7e\x80-\xff]*)?$/;
const CHUNK_LINE = /^([0-9A-Fa-f]+)[ \t]*(?:;[\t\x20-\x7e\x80-\xff]*)?$/;

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

function isHopByHop(name: string): boolean {
  return HOP_BY_HOP.has(name) || name.startsWith("proxy-");
}

/** Request headers the forwarder sets itself. */
const REPLACED = new Set([
  "host",
  "content-length",
  FORWARDED_BY_HEADER,
  // The body is in hand and sent at once: the peer has nothing to confirm.
  "expect",
]);

/** A request that cannot be forwarded as given (never written). */
function invalid(message: string): TypeError {
  return new TypeError(`cannot forward: ${message}`);
}

/** A problem with the peer's answer; its message is the `reason`. */
class AnswerError extends Error {
  override name = "AnswerError";
}

class ConnectTimeout extends Error {
  override name = "ConnectTimeout";
}

const asciiDecoder = new TextDecoder();

/** `buf[start, end)` as Latin-1 text (what HTTP/1.1 heads are). */
function decodeLatin1(buf: Uint8Array, start: number, end: number): string {
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

/** The first CRLF in `buf[from, end)`, or -1. */
function indexOfCrlf(buf: Uint8Array, from: number, end: number): number {
  for (let i = from; i + 1 < end; i++) {
    if (buf[i] === 13 && buf[i + 1] === 10) return i;
  }
  return -1;
}

/** The first CRLF CRLF in `buf[from, end)`, or -1. */
function indexOfBlankLine(buf: Uint8Array, from: number, end: number): number {
  for (let i = from; i + 3 < end; i++) {
    if (buf[i + 3] === 10 && buf[i + 2] === 13 && buf[i + 1] === 10 && buf[i] === 13) return i;
  }
  return -1;
}

/** The lower-cased tokens of every `connection` header. */
function connectionTokens(headers: Iterable<[string, string]>): Set<string> {
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

interface Peer {
  /** Pool key: scheme, host and port. */
  key: string;
  host: string;
  port: number;
  /** For the `host` header when the request has none. */
  authority: string;
}

function parsePeer(peerUrl: string | URL, customConnect: boolean): Peer {
  const url = peerUrl instanceof URL ? peerUrl : new URL(peerUrl);
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw invalid(`the peer address ${url.href} is not http: or https:`);
  }
  if (url.protocol === "https:" && !customConnect) {
    throw invalid(`the peer ${url.origin} needs TLS, and no connect option opens TLS connections`);
  }
  const port = url.port ? Number(url.port) : url.protocol === "https:" ? 443 : 80;
  const host = url.hostname.replace(/^\[(.*)\]$/, "$1");
  return { key: `${url.protocol}//${url.hostname}:${port}`, host, port, authority: url.host };
}

/** Whether some header is named `connection`, in any case. */
function hasConnectionHeader(headers: [string, string][]): boolean {
  for (let i = 0; i < headers.length; i++) {
    const name = headers[i][0];
    if (name.length === 10 && name.toLowerCase() === "connection") return true;
  }
  return false;
}

/**
 * The request line and headers as bytes, followed by the body when it is
 * at most {@linkcode COALESCE_BYTES} (one write); throws a TypeError for
 * what cannot be sent. `forwardedBy` is this node's header line.
 */
function encodeRequest(
  request: ForwardRequest,
  authority: string,
  forwardedBy: string,
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
    if (REPLACED.has(lower) || isHopByHop(lower) || dropped?.has(lower)) continue;
    lines += name + ": " + value + "\r\n";
  }
  let text = method + " " + path + " HTTP/1.1\r\nhost: " + (host ?? authority) + "\r\n" + lines +
    forwardedBy;
  if (body.length > 0 || !NO_CONTENT_METHODS.has(method)) {
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

/**
 * One TCP connection to a peer, with the bytes read from it and not yet
 * used: `buf[start, end)`. At most one read is pending; one into the buffer
 * fills it from `end`, so the buffer is only moved or replaced when none is.
 */
class Connection {
  state: "busy" | "idle" | "closed" = "busy";
  /** Answers read on this connection: above 0, it is a reused one. */
  served = 0;
  /** The clock's monotonic time when it last went idle. */
  idleSince = 0;
  /** Whether the last answer left it fit for another request. */
  reusable = false;
  buf: Uint8Array = new Uint8Array(BUFFER_BYTES);
  start = 0;
  end = 0;
  /** Bytes the peer sent on it, ever. */
  bytesRead = 0;
  #reading: Promise<void> | undefined;
  #eof = false;
  #failed = false;
  #failure: unknown;
  readonly #onRead: (n: number | null) => void;
  readonly #onReadError: (error: unknown) => void;

  /** `onIdleDead` is called when a read shows an idle connection dead. */
  constructor(
    readonly peerKey: string,
    readonly conn: ByteConn,
    onIdleDead: (connection: Connection) => void,
  ) {
    this.#onRead = (n) => {
      this.#reading = undefined;
      if (n === null) this.#eof = true;
      else {
        this.end += n;
        this.bytesRead += n;
      }
      if (this.state === "idle" && this.dead) onIdleDead(this);
    };
    this.#onReadError = (error) => {
      this.#reading = undefined;
      this.#failed = true;
      this.#failure = error;
      if (this.state === "idle") onIdleDead(this);
    };
  }

  /** The peer closed or reset it, or sent bytes nobody asked for. */
  get dead(): boolean {
    return this.#eof || this.#failed || this.end > this.start;
  }

  /**
   * Starts a read into the buffer unless one is pending or the stream
   * ended; resolves once it settled, never rejects. On an idle connection
   * it is the read that sees a close, a reset or stray bytes.
   */
  read(): Promise<void> {
    if (this.#eof || this.#failed) return RESOLVED;
    return this.#reading ??= this.#readOnce();
  }

  #readOnce(): Promise<void> {
    const kept = this.end - this.start;
    if (kept === 0) {
      this.start = this.end = 0;
      if (this.buf.length > BUFFER_BYTES) this.buf = new Uint8Array(BUFFER_BYTES);
    } else if (this.end === this.buf.length) {
      if (kept * 2 <= this.buf.length) {
        this.buf.copyWithin(0, this.start, this.end);
      } else {
        const grown = new Uint8Array(this.buf.length * 2);
        grown.set(this.buf.subarray(this.start, this.end));
        this.buf = grown;
      }
      this.start = 0;
      this.end = kept;
    }
    let pending: Promise<number | null>;
    try {
      pending = this.conn.read(this.buf.subarray(this.end));
    } catch (error) {
      pending = Promise.reject(error);
    }
    return pending.then(this.#onRead, this.#onReadError);
  }

  /** Reads until more bytes are buffered: false at the end of the stream; throws a read error. */
  async fill(): Promise<boolean> {
    const before = this.end - this.start;
    while (this.end - this.start === before) {
      if (this.#failed) throw this.#failure;
      if (this.#eof) return false;
      await this.read();
    }
    return true;
  }

  /** Moves up to `target.length - offset` buffered bytes to `target` at `offset`; how many. */
  takeInto(target: Uint8Array, offset: number): number {
    const n = Math.min(target.length - offset, this.end - this.start);
    if (n > 0) {
      target.set(this.buf.subarray(this.start, this.start + n), offset);
      this.start += n;
    }
    return n;
  }

  /**
   * Bytes for `target`: buffered ones first, else read straight into it
   * (no copy). How many; null at the end of the stream; throws a read error.
   */
  async readInto(target: Uint8Array): Promise<number | null> {
    while (this.#reading) await this.#reading;
    if (this.end > this.start) return this.takeInto(target, 0);
    if (this.#failed) throw this.#failure;
    if (this.#eof) return null;
    let pending: Promise<number | null>;
    try {
      pending = this.conn.read(target);
    } catch (error) {
      pending = Promise.reject(error);
    }
    let n: number | null = null;
    await (this.#reading = pending.then((got) => {
      this.#reading = undefined;
      n = got;
      if (got === null) this.#eof = true;
    }, (error) => {
      this.#reading = undefined;
      this.#failed = true;
      this.#failure = error;
    }));
    if (this.#failed) throw this.#failure;
    return n;
  }

  /** Resolves once no read is pending (after `close`, the pending one fails soon). */
  settled(): Promise<void> {
    return this.#reading ?? RESOLVED;
  }

  close(): void {
    this.state = "closed";
    try {
      this.conn.close();
    } catch {
      // Already closed.
    }
  }
}

function closeQuietly(conn: ByteConn): void {
  try {
    conn.close();
  } catch {
    // Already closed.
  }
}

/** `promise`, or the signal's reason if it aborts first; a value that comes too late goes to `late`. */
function raceAbort<T>(promise: Promise<T>, signal: AbortSignal, late: (value: T) => void) {
  return new Promise<T>((resolve, reject) => {
    let done = false;
    const onAbort = () => {
      if (done) return;
      done = true;
      reject(signal.reason);
    };
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        if (done) return late(value);
        done = true;
        resolve(value);
      },
      (error) => {
        signal.removeEventListener("abort", onAbort);
        if (done) return;
        done = true;
        reject(error);
      },
    );
    if (signal.aborted) onAbort();
    else signal.addEventListener("abort", onAbort, { once: true });
  });
}

function unreachable(written: boolean, reason: string, unansweredNew = false): ForwardResult {
  return unansweredNew
    ? { kind: "unreachable", written, reason, unansweredNew }
    : { kind: "unreachable", written, reason };
}

interface Waiter {
  peerKey: string;
  mayReuse: boolean;
  grant(grant: Connection | "slot"): void;
}

/** An exchange waiting for its answer, in the forwarder's list of them, earliest deadline first. */
interface AnswerDeadline {
  /** The clock's monotonic time at which it times out. */
  due: number;
  timeout(): void;
  prev: AnswerDeadline | undefined;
  next: AnswerDeadline | undefined;
}

/** A first write that failed before a byte was accepted: nothing of the request was sent. */
class Unsent {
  constructor(readonly error: unknown) {}
}

/**
 * Forwards requests to peers over pooled HTTP/1.1 connections.
 *
 * @example Forwarding a GET to the node that holds the actor
 * ```ts ignore
 * import { Forwarder } from "./forward.ts";
 * const forwarder = new Forwarder({ nodeId: "node-a" });
 * const result = await forwarder.forward("http://10.0.0.2:8080", {
 *   method: "GET",
 *   path: "/actor/counter/alice?x=1",
 *   headers: [["accept", "text/plain"]],
 *   body: new Uint8Array(),
 * }, { signal: AbortSignal.timeout(60_000) });
 * if (result.kind !== "response") {
 *   // 503 "the actor's node did not answer; retry" (unreachable) or 504 (timeout).
 * }
 * await forwarder.close();
 * ```
 */
export class Forwarder {
  /** This node's {@linkcode FORWARDED_BY_HEADER} line. */
  readonly #forwardedBy: string;
  readonly #clock: Clock;
  readonly #connect: Connect;
  readonly #customConnect: boolean;
  readonly #maxOpen: number;
  readonly #maxIdlePerPeer: number;
  readonly #connectTimeoutMs: number;
  readonly #answerTimeoutMs: number;
  readonly #idleTimeoutMs: number;
  readonly #maxBodyBytes: number;

  /** Every connection not closed, busy or idle. */
  readonly #all = new Set<Connection>();
  /** Idle connections per peer, most recently used last. */
  readonly #idle = new Map<string, Connection[]>();
  /** Every idle connection, least recently used first. */
  readonly #idleOrder = new Set<Connection>();
  /** Closes idle connections past the idle timeout; armed while any is idle. */
  #idleSweep: Timer | undefined;
  /** Exchanges waiting for an answer, earliest deadline (first started) first. */
  #firstDeadline: AnswerDeadline | undefined;
  #lastDeadline: AnswerDeadline | undefined;
  /** Times out the exchanges past their deadline; armed for the first one's, or earlier. */
  #answerTimer: Timer | undefined;
  /** Parsed peer addresses by the string given (or the URL's href). */
  readonly #peers = new Map<string, Peer>();
  readonly #waiters: Waiter[] = [];
  readonly #closing = new AbortController();
  /** Connections open or being opened. */
  #open = 0;
  #pumping = false;

  constructor(options: ForwarderOptions) {
    if (!HEADER_VALUE.test(options.nodeId) || options.nodeId.trim() !== options.nodeId) {
      throw new TypeError(`the node id ${JSON.stringify(options.nodeId)} cannot go in a header`);
    }
    this.#forwardedBy = `${FORWARDED_BY_HEADER}: ${options.nodeId}\r\n`;
    this.#clock = options.clock ?? systemClock;
    this.#customConnect = options.connect !== undefined;
    this.#connect = options.connect ??
      ((hostname, port, signal) => Deno.connect({ hostname, port, signal }));
    this.#maxOpen = Math.max(1, options.maxOpenConnections ?? MAX_OPEN_CONNECTIONS);
    this.#maxIdlePerPeer = Math.max(0, options.maxIdlePerPeer ?? MAX_IDLE_PER_PEER);
    this.#connectTimeoutMs = options.connectTimeoutMs ?? CONNECT_TIMEOUT_MS;
    this.#answerTimeoutMs = options.answerTimeoutMs ?? ANSWER_TIMEOUT_MS;
    this.#idleTimeoutMs = options.idleTimeoutMs ?? IDLE_TIMEOUT_MS;
    this.#maxBodyBytes = options.maxBodyBytes ?? MAX_FORWARDED_BODY_BYTES;
  }

  /**
   * Sends `request` to the peer at `peerUrl` (only its scheme, host and port
   * are used) and reads its answer. Never sends it twice, except on a fresh
   * connection after a pooled one turned out closed before any byte was
   * accepted (see the module documentation).
   *
   * The request's `host` header is kept (the peer's authority otherwise);
   * hop-by-hop headers, `expect`, `content-length` and any
   * {@linkcode FORWARDED_BY_HEADER} are replaced by this forwarder's own.
   *
   * Rejects with the signal's reason when `signal` aborts (the connection in
   * use, if any, is closed), and with a TypeError for a request or peer
   * address that cannot be sent; everything the network does is a result.
   */
  async forward(
    peerUrl: string | URL,
    request: ForwardRequest,
    options: { signal?: AbortSignal } = {},
  ): Promise<ForwardResult> {
    const { signal } = options;
    const peer = this.#peer(peerUrl);
    const wire = encodeRequest(request, peer.authority, this.#forwardedBy);
    signal?.throwIfAborted();
    let acquired = (!this.#closing.signal.aborted && this.#takeIdle(peer.key)) ||
      await this.#acquire(peer, true, signal);
    let retried = false;
    while (true) {
      if (!(acquired instanceof Connection)) return acquired;
      const connection = acquired;
      const reused = connection.served > 0;
      const outcome = await this.#exchange(connection, wire, request, signal);
      if (!(outcome instanceof Unsent)) return outcome;
      this.#discard(connection);
      if (!reused || retried || !closedByPeer(outcome.error)) {
        return unreachable(
          false,
          `the connection to ${peer.key} failed before the request was written: ${
            describeError(outcome.error)
          }`,
          !reused || retried,
        );
      }
      // The peer had closed this kept-alive connection; nothing was written.
      retried = true;
      acquired = await this.#acquire(peer, false, signal);
    }
  }

  /** The parsed peer address, remembered (parsing a URL costs more than the map). */
  #peer(peerUrl: string | URL): Peer {
    const key = typeof peerUrl === "string" ? peerUrl : peerUrl.href;
    let peer = this.#peers.get(key);
    if (peer) return peer;
    peer = parsePeer(peerUrl, this.#customConnect); // Throws for one that cannot be used.
    if (this.#peers.size >= MAX_CACHED_PEERS) {
      this.#peers.delete(this.#peers.keys().next().value!);
    }
    this.#peers.set(key, peer);
    return peer;
  }

  /** Connections open, idle, and requests waiting for a slot. */
  stats(): ForwarderStats {
    return { open: this.#open, idle: this.#idleOrder.size, waiting: this.#waiters.length };
  }

  /**
   * Closes every connection, idle or in use, and refuses new requests (they
   * end unreachable, unwritten). Resolves once pending reads ended.
   */
  async close(): Promise<void> {
    this.#closing.abort(new Error("the forwarder is closed"));
    this.#idleSweep?.cancel();
    this.#idleSweep = undefined;
    this.#stopAnswerTimerIfUnneeded();
    const pending: Promise<void>[] = [];
    for (const connection of [...this.#all]) {
      pending.push(connection.settled());
      this.#discard(connection, false);
    }
    await Promise.allSettled(pending);
  }

  /** An idle connection to `peer`, or a new one; unreachable when none comes in time. */
  async #acquire(
    peer: Peer,
    mayReuse: boolean,
    signal: AbortSignal | undefined,
  ): Promise<Connection | ForwardResult> {
    if (this.#closing.signal.aborted) return unreachable(false, "the forwarder is closed");
    if (mayReuse) {
      const idle = this.#takeIdle(peer.key);
      if (idle) return idle;
    }
    // Aborted at the connect timeout, by the caller or by close(); its own
    // controller (not AbortSignal.any), with every listener removed once the
    // connection is open, so a connect seam that ties the signal to the
    // connection does not see a pooled connection closed by a later abort.
    const gaveUp = new AbortController();
    const timedOut = () => gaveUp.signal.reason instanceof ConnectTimeout;
    const timer = this.#clock.setTimer(
      this.#connectTimeoutMs,
      () => gaveUp.abort(new ConnectTimeout()),
    );
    const sources = signal ? [this.#closing.signal, signal] : [this.#closing.signal];
    const listeners = sources.map((source) => {
      const listener = () => gaveUp.abort(source.reason);
      if (source.aborted) listener();
      else source.addEventListener("abort", listener, { once: true });
      return () => source.removeEventListener("abort", listener);
    });
    try {
      if (this.#waiters.length > 0 || !this.#reserveSlot()) {
        let grant: Connection | "slot";
        try {
          grant = await this.#waitForSlot(peer.key, mayReuse, gaveUp.signal);
        } catch (error) {
          if (signal?.aborted) throw signal.reason;
          if (this.#closing.signal.aborted) return unreachable(false, "the forwarder is closed");
          if (timedOut()) {
            return unreachable(
              false,
              `no connection to ${peer.key} within ${this.#connectTimeoutMs} ms: ` +
                `${this.#maxOpen} connections open, the most allowed`,
            );
          }
          throw error;
        }
        if (grant !== "slot") return grant;
      }
      try {
        const conn = await raceAbort(
          this.#connect(peer.host, peer.port, gaveUp.signal),
          gaveUp.signal,
          closeQuietly,
        );
        try {
          (conn as Partial<Deno.TcpConn>).setNoDelay?.(true);
        } catch {
          // Not a TCP connection, or already closed: the write will tell.
        }
        const connection = new Connection(peer.key, conn, this.#discardIdle);
        this.#all.add(connection);
        return connection;
      } catch (error) {
        this.#open--;
        this.#pump();
        if (signal?.aborted) throw signal.reason;
        if (this.#closing.signal.aborted) return unreachable(false, "the forwarder is closed");
        if (timedOut()) {
          return unreachable(
            false,
            `no connection to ${peer.key} could be opened within ${this.#connectTimeoutMs} ms`,
          );
        }
        return unreachable(false, `could not connect to ${peer.key}: ${describeError(error)}`);
      }
    } finally {
      timer.cancel();
      for (const remove of listeners) remove();
    }
  }

  /**
   * Writes the request and reads the answer, bounded by the answer timeout
   * and the signal; the connection goes back to the pool or is closed,
   * except after an {@linkcode Unsent} (the caller closes it).
   */
  async #exchange(
    connection: Connection,
    wire: Uint8Array,
    request: ForwardRequest,
    signal: AbortSignal | undefined,
  ): Promise<ForwardResult | Unsent> {
    if (signal?.aborted) {
      this.#release(connection); // Nothing was written on it.
      throw signal.reason;
    }
    let settled: "work" | "timeout" | "abort" | undefined;
    let wake!: (outcome: ForwardResult | Unsent | undefined) => void;
    const outcome = new Promise<ForwardResult | Unsent | undefined>((resolve) => wake = resolve);
    const stop = (why: "timeout" | "abort") => {
      if (settled) return;
      settled = why;
      this.#discard(connection);
      wake(undefined);
    };
    const deadline: AnswerDeadline = {
      due: this.#clock.monotonic() + this.#answerTimeoutMs,
      timeout: () => stop("timeout"),
      prev: undefined,
      next: undefined,
    };
    this.#trackAnswer(deadline);
    const onAbort = () => stop("abort");
    signal?.addEventListener("abort", onAbort, ONCE);
    try {
      this.#converse(connection, wire, request).then((result) => {
        settled ??= "work";
        wake(result);
      });
      const result = await outcome;
      if (settled === "abort") throw signal!.reason;
      if (settled === "timeout" || result === undefined) return { kind: "timeout" };
      if (result instanceof Unsent) return result;
      if (connection.reusable) {
        connection.served++;
        this.#release(connection);
      } else this.#discard(connection);
      return result;
    } finally {
      this.#untrackAnswer(deadline);
      signal?.removeEventListener("abort", onAbort);
    }
  }

  /** Adds an exchange to the answer deadlines (last: it started last), arming the timer if need be. */
  #trackAnswer(deadline: AnswerDeadline): void {
    deadline.prev = this.#lastDeadline;
    if (this.#lastDeadline) this.#lastDeadline.next = deadline;
    else this.#firstDeadline = deadline;
    this.#lastDeadline = deadline;
    this.#armAnswerTimer();
  }

  /** Removes an exchange from the answer deadlines, if it is there. */
  #untrackAnswer(deadline: AnswerDeadline): void {
    if (deadline.prev) deadline.prev.next = deadline.next;
    else if (this.#firstDeadline === deadline) this.#firstDeadline = deadline.next;
    else return; // Not in the list (any more).
    if (deadline.next) deadline.next.prev = deadline.prev;
    else this.#lastDeadline = deadline.prev;
    deadline.prev = deadline.next = undefined;
    if (!this.#firstDeadline) this.#stopAnswerTimerIfUnneeded();
  }

  /**
   * Arms the answer timer for the first exchange's deadline, unless it is
   * armed: then for an earlier or the same one, as exchanges are added in
   * the order of their deadlines. One finished meanwhile leaves it armed;
   * it then finds nothing due and arms itself for the next: one timer per
   * answer timeout with steady traffic, not one per request.
   */
  #armAnswerTimer(): void {
    if (this.#answerTimer || !this.#firstDeadline) return;
    const wait = this.#firstDeadline.due - this.#clock.monotonic();
    this.#answerTimer = this.#clock.setTimer(Math.max(0, Math.ceil(wait)), this.#expireAnswers);
  }

  /** Times out the exchanges whose deadline passed, first started first. */
  readonly #expireAnswers = (): void => {
    this.#answerTimer = undefined;
    const now = this.#clock.monotonic();
    while (this.#firstDeadline && this.#firstDeadline.due <= now) {
      const due = this.#firstDeadline;
      this.#untrackAnswer(due);
      due.timeout();
    }
    this.#armAnswerTimer();
  };

  /**
   * Cancels the answer timer when no exchange waits and the forwarder is
   * closed or has no connection (a timer left armed only keeps the process
   * awake). While an exchange waits, it stays: the timeout ends a wait that
   * closing the connection might not.
   */
  #stopAnswerTimerIfUnneeded(): void {
    if (this.#firstDeadline || !this.#answerTimer) return;
    if (!this.#closing.signal.aborted && this.#all.size > 0) return;
    this.#answerTimer.cancel();
    this.#answerTimer = undefined;
  }

  /** The exchange itself; never rejects. Sets `connection.reusable`. */
  async #converse(
    connection: Connection,
    wire: Uint8Array,
    request: ForwardRequest,
  ): Promise<ForwardResult | Unsent> {
    connection.reusable = false;
    if (connection.dead && connection.served > 0) {
      // Seen closed between taking it from the pool and writing: nothing written.
      return new Unsent(
        new Deno.errors.ConnectionReset("the peer had closed the kept-alive connection"),
      );
    }
    let accepted = 0;
    try {
      const { conn } = connection;
      for (let offset = 0; offset < wire.length;) {
        const n = await conn.write(offset === 0 ? wire : wire.subarray(offset));
        offset += n;
        accepted += n;
      }
      const { body } = request;
      if (body.length > COALESCE_BYTES) {
        for (let offset = 0; offset < body.length;) {
          offset += await conn.write(offset === 0 ? body : body.subarray(offset));
        }
      }
    } catch (error) {
      if (accepted === 0) return new Unsent(error);
      return unreachable(
        true,
        `the connection to ${connection.peerKey} failed while the request was written: ${
          describeError(error)
        }`,
        connection.served === 0 && connection.bytesRead === 0,
      );
    }
    try {
      return await readAnswer(connection, request.method, this.#maxBodyBytes);
    } catch (error) {
      const reason = error instanceof AnswerError
        ? error.message
        : `the connection failed before a complete answer: ${describeError(error)}`;
      connection.reusable = false;
      return unreachable(
        true,
        `${connection.peerKey}: ${reason}`,
        connection.served === 0 && connection.bytesRead === 0,
      );
    }
  }

  /** Puts a connection whose exchange is over back in its peer's pool, or closes it. */
  #release(connection: Connection): void {
    if (connection.state !== "busy") return;
    const list = this.#idle.get(connection.peerKey) ?? [];
    if (
      this.#closing.signal.aborted || connection.dead || list.length >= this.#maxIdlePerPeer
    ) {
      this.#discard(connection);
      return;
    }
    connection.state = "idle";
    list.push(connection);
    this.#idle.set(connection.peerKey, list);
    this.#idleOrder.add(connection);
    connection.idleSince = this.#clock.monotonic();
    this.#armIdleSweep();
    // The pending read sees a close, a reset or stray bytes while the connection waits.
    connection.read();
    this.#pump();
  }

  /** Closes an idle connection whose pending read saw it closed, reset or sent stray bytes. */
  readonly #discardIdle = (connection: Connection): void => {
    if (connection.state === "idle") this.#discard(connection);
  };

  /** The most recently used live idle connection to the peer; dead ones found are closed. */
  #takeIdle(peerKey: string): Connection | undefined {
    const list = this.#idle.get(peerKey);
    while (list && list.length > 0) {
      const connection = list.pop()!;
      if (list.length === 0) this.#idle.delete(peerKey);
      this.#idleOrder.delete(connection);
      connection.state = "busy";
      if (!connection.dead) return connection;
      this.#discard(connection);
    }
    return undefined;
  }

  /**
   * Arms the sweep for the least recently used idle connection's deadline,
   * unless it is armed: for an earlier deadline, since connections go idle
   * in the order of their deadlines. A sweep that finds the connection it
   * was armed for taken meanwhile arms itself again for the next one: one
   * timer per idle timeout, not one per request.
   */
  #armIdleSweep(): void {
    if (this.#idleSweep || this.#closing.signal.aborted) return;
    const oldest: Connection | undefined = this.#idleOrder.values().next().value;
    if (!oldest) return;
    const wait = oldest.idleSince + this.#idleTimeoutMs - this.#clock.monotonic();
    this.#idleSweep = this.#clock.setTimer(Math.max(0, Math.ceil(wait)), this.#sweepIdle);
  }

  /** Closes the idle connections past the idle timeout, least recently used first. */
  readonly #sweepIdle = (): void => {
    this.#idleSweep = undefined;
    const now = this.#clock.monotonic();
    let closed = false;
    for (const connection of this.#idleOrder) {
      if (now - connection.idleSince < this.#idleTimeoutMs) break;
      this.#discard(connection, false);
      closed = true;
    }
    this.#armIdleSweep();
    if (closed) this.#pump();
  };

  /** Counts a connection about to be opened, closing the least recently used idle one if full. */
  #reserveSlot(): boolean {
    if (this.#closing.signal.aborted) return false;
    if (this.#open < this.#maxOpen) {
      this.#open++;
      return true;
    }
    const oldest = this.#idleOrder.values().next().value;
    if (!oldest) return false;
    this.#discard(oldest, false);
    this.#open++;
    return true;
  }

  #waitForSlot(
    peerKey: string,
    mayReuse: boolean,
    signal: AbortSignal,
  ): Promise<Connection | "slot"> {
    return new Promise((resolve, reject) => {
      if (signal.aborted) return reject(signal.reason);
      const onAbort = () => {
        const index = this.#waiters.indexOf(waiter);
        if (index >= 0) this.#waiters.splice(index, 1);
        reject(signal.reason);
      };
      const waiter: Waiter = {
        peerKey,
        mayReuse,
        grant: (grant) => {
          signal.removeEventListener("abort", onAbort);
          resolve(grant);
        },
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.#waiters.push(waiter);
    });
  }

  /** Hands freed connections and slots to waiting requests, first come first served. */
  #pump(): void {
    if (this.#pumping) return;
    this.#pumping = true;
    try {
      while (this.#waiters.length > 0) {
        const waiter = this.#waiters[0];
        let grant: Connection | "slot" | undefined = waiter.mayReuse
          ? this.#takeIdle(waiter.peerKey)
          : undefined;
        if (!grant && this.#reserveSlot()) grant = "slot";
        if (!grant) break;
        this.#waiters.shift();
        waiter.grant(grant);
      }
    } finally {
      this.#pumping = false;
    }
  }

  /** Closes a connection and frees its slot (once). */
  #discard(connection: Connection, pump = true): void {
    if (connection.state === "closed") return;
    if (connection.state === "idle") {
      this.#idleOrder.delete(connection);
      const list = this.#idle.get(connection.peerKey);
      const index = list?.indexOf(connection) ?? -1;
      if (list && index >= 0) list.splice(index, 1);
      if (list?.length === 0) this.#idle.delete(connection.peerKey);
    }
    connection.close();
    this.#all.delete(connection);
    this.#open--;
    if (this.#all.size === 0) {
      // Nothing left to sweep; a sweep armed for a connection taken since would only wake.
      this.#idleSweep?.cancel();
      this.#idleSweep = undefined;
      this.#stopAnswerTimerIfUnneeded();
    }
    if (pump) this.#pump();
  }
}

/** Whether a failed first write means the peer had closed the connection (reset, broken pipe). */
function closedByPeer(error: unknown): boolean {
  return error instanceof Deno.errors.BrokenPipe ||
    error instanceof Deno.errors.ConnectionReset ||
    error instanceof Deno.errors.ConnectionAborted ||
    error instanceof Deno.errors.NotConnected;
}

/** No connection header: no tokens. */
const NO_TOKENS: ReadonlySet<string> = new Set();

/** `headers` without the hop-by-hop ones and those `tokens` name (the same array when none). */
function endToEnd(headers: [string, string][], tokens: ReadonlySet<string>): [string, string][] {
  for (let i = 0; i < headers.length; i++) {
    const name = headers[i][0];
    if (isHopByHop(name) || tokens.has(name)) {
      return headers.filter(([name]) => !isHopByHop(name) && !tokens.has(name));
    }
  }
  return headers;
}

/**
 * Reads one answer (skipping interim 1xx ones) and sets
 * `connection.reusable`; throws an AnswerError or a read error.
 */
async function readAnswer(
  connection: Connection,
  method: string,
  maxBodyBytes: number,
): Promise<ForwardResult> {
  let first = true;
  while (true) {
    const { version, status, headers } = await readHead(connection, first);
    first = false;
    if (status === 101) throw new AnswerError("the peer switched protocols (101)");
    if (status < 200) continue;

    let transferEncoding: string[] | undefined;
    let contentLength: string[] | undefined;
    let tokens = NO_TOKENS;
    for (let i = 0; i < headers.length; i++) {
      const [name, value] = headers[i];
      if (name === "content-length") (contentLength ??= []).push(value);
      else if (name === "transfer-encoding") (transferEncoding ??= []).push(value);
      else if (name === "connection" && tokens === NO_TOKENS) tokens = connectionTokens(headers);
    }
    let reusable = version === 1 && !tokens.has("close");
    let body: Uint8Array;
    if (method === "HEAD" || status === 204 || status === 304) {
      body = EMPTY;
    } else if (transferEncoding) {
      const codings = transferEncoding.join(",").split(",").map((c) => c.trim().toLowerCase());
      if (codings.length !== 1 || codings[0] !== "chunked") {
        throw new AnswerError(
          `the answer's transfer-encoding ${JSON.stringify(transferEncoding.join(", "))} ` +
            "is not chunked alone",
        );
      }
      body = await readChunked(connection, maxBodyBytes);
      if (contentLength) reusable = false;
    } else if (contentLength) {
      const length = parseContentLength(contentLength);
      if (length > maxBodyBytes) throw tooLarge(maxBodyBytes);
      body = length === 0 ? EMPTY : new Uint8Array(length);
      const buffered = connection.takeInto(body, 0);
      if (buffered < length) await readExactInto(connection, body, buffered);
    } else {
      body = await readToEnd(connection, maxBodyBytes);
      reusable = false;
    }
    // Bytes after the answer were not asked for: the connection is not in a known state.
    connection.reusable = reusable && connection.end === connection.start;
    return { kind: "response", status, headers: endToEnd(headers, tokens), body };
  }
}

function tooLarge(maxBodyBytes: number): AnswerError {
  return new AnswerError(`the answer's body is larger than ${maxBodyBytes} bytes`);
}

function closedMidAnswer(): AnswerError {
  return new AnswerError("the connection closed before the answer was complete");
}

function headTooLarge(): AnswerError {
  return new AnswerError(`the answer's head is larger than ${MAX_ANSWER_HEAD_BYTES} bytes`);
}

interface Head {
  version: number;
  status: number;
  /** Names in lower case. */
  headers: [string, string][];
}

async function readHead(connection: Connection, first: boolean): Promise<Head> {
  let searched = 0;
  let end: number;
  while (
    (end = indexOfBlankLine(connection.buf, connection.start + searched, connection.end)) < 0
  ) {
    const buffered = connection.end - connection.start;
    if (buffered > MAX_ANSWER_HEAD_BYTES) throw headTooLarge();
    searched = Math.max(0, buffered - 3);
    if (!(await connection.fill())) {
      throw first && buffered === 0
        ? new AnswerError("the connection closed before an answer")
        : closedMidAnswer();
    }
  }
  if (end - connection.start > MAX_ANSWER_HEAD_BYTES) throw headTooLarge();
  const text = decodeLatin1(connection.buf, connection.start, end);
  connection.start = end + 4;
  return parseHead(text);
}

/** The status line and header lines (CRLF between them, none after). */
function parseHead(text: string): Head {
  let lineEnd = text.indexOf("\r\n");
  if (lineEnd < 0) lineEnd = text.length;
  const statusLine = text.slice(0, lineEnd);
  const match = STATUS_LINE.exec(statusLine);
  if (!match) {
    throw new AnswerError(
      `the answer is not HTTP/1.x: its status line is ${JSON.stringify(statusLine.slice(0, 80))}`,
    );
  }
  const headers: [string, string][] = [];
  for (let start = lineEnd + 2; start < text.length + 2; start = lineEnd + 2) {
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
    if (!TOKEN.test(name) || !HEADER_VALUE.test(value)) {
      const line = text.slice(start, lineEnd);
      throw new AnswerError(`the answer has a malformed header line ${JSON.stringify(line)}`);
    }
    headers.push([name.toLowerCase(), value]);
  }
  return { version: match[1] === "1" ? 1 : 0, status: Number(match[2]), headers };
}

/** Space or tab. */
function isBlank(code: number): boolean {
  return code === 32 || code === 9;
}

const DIGITS = /^\d+$/;

function parseContentLength(values: string[]): number {
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

/** A line without its CRLF; throws when it is longer than `limit` or the stream ends. */
async function readLine(connection: Connection, limit: number): Promise<string> {
  let searched = 0;
  let end: number;
  while ((end = indexOfCrlf(connection.buf, connection.start + searched, connection.end)) < 0) {
    const buffered = connection.end - connection.start;
    if (buffered > limit + 1) {
      throw new AnswerError(`the answer has a line longer than ${limit} bytes`);
    }
    searched = Math.max(0, buffered - 1);
    if (!(await connection.fill())) throw closedMidAnswer();
  }
  if (end - connection.start > limit) {
    throw new AnswerError(`the answer has a line longer than ${limit} bytes`);
  }
  const line = decodeLatin1(connection.buf, connection.start, end);
  connection.start = end + 2;
  return line;
}

/** Fills `target` from `filled` on: the buffered bytes, then reads straight into it. */
async function readExactInto(
  connection: Connection,
  target: Uint8Array,
  filled: number,
): Promise<void> {
  for (filled += connection.takeInto(target, filled); filled < target.length;) {
    const n = await connection.readInto(target.subarray(filled));
    if (n === null) throw closedMidAnswer();
    filled += n;
  }
}

/** The CRLF that ends a chunk's data. */
async function expectCrlf(connection: Connection): Promise<void> {
  while (connection.end - connection.start < 2) {
    if (!(await connection.fill())) throw closedMidAnswer();
  }
  const { buf, start } = connection;
  if (buf[start] !== 13 || buf[start + 1] !== 10) {
    throw new AnswerError("the answer has a chunk longer than its size");
  }
  connection.start += 2;
}

async function readChunked(connection: Connection, maxBodyBytes: number): Promise<Uint8Array> {
  const pieces: Uint8Array[] = [];
  let total = 0;
  while (true) {
    const line = await readLine(connection, MAX_CHUNK_LINE_BYTES);
    const match = CHUNK_LINE.exec(line);
    if (!match) {
      throw new AnswerError(`the answer has a malformed chunk size line ${JSON.stringify(line)}`);
    }
    const size = parseInt(match[1], 16);
    if (size === 0) break;
    if (size > maxBodyBytes - total) throw tooLarge(maxBodyBytes);
    const piece = new Uint8Array(size);
    await readExactInto(connection, piece, 0);
    pieces.push(piece);
    total += size;
    await expectCrlf(connection);
  }
  // Trailers are read and dropped.
  let trailerBytes = 0;
  while (true) {
    const line = await readLine(connection, MAX_ANSWER_HEAD_BYTES);
    if (line === "") break;
    trailerBytes += line.length + 2;
    if (trailerBytes > MAX_ANSWER_HEAD_BYTES) {
      throw new AnswerError(`the answer's trailers are larger than ${MAX_ANSWER_HEAD_BYTES} bytes`);
    }
  }
  return pieces.length === 1 ? pieces[0] : concatBytes(pieces, total);
}

async function readToEnd(connection: Connection, maxBodyBytes: number): Promise<Uint8Array> {
  const pieces: Uint8Array[] = [];
  let total = connection.end - connection.start;
  if (total > maxBodyBytes) throw tooLarge(maxBodyBytes);
  if (total > 0) {
    pieces.push(connection.buf.slice(connection.start, connection.end));
    connection.start = connection.end;
  }
  while (true) {
    const chunk = new Uint8Array(Math.min(READ_TO_END_BYTES, maxBodyBytes - total + 1));
    const n = await connection.readInto(chunk);
    if (n === null) return concatBytes(pieces, total);
    total += n;
    if (total > maxBodyBytes) throw tooLarge(maxBodyBytes);
    pieces.push(chunk.subarray(0, n));
  }
}
