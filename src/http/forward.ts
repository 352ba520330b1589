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
import { type Clock, systemClock, type Timer } from "../time/clock.ts";

/** Longest wait for a connection (a free slot included) before a request is unreachable. */
export const CONNECT_TIMEOUT_MS = 5_000;
/** Longest wait for a complete answer, counted from the first byte of the request written. */
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
  }
  | { kind: "timeout" };

/** Opens a connection to a peer; aborting `signal` gives up. */
export type Connect = (host: string, port: number, signal: AbortSignal) => Promise<Deno.Conn>;

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
/** Read size while an answer is expected. */
const READ_SIZE = 64 * 1024;
/** Read size of the pending read on an idle connection (it only has to see a close). */
const WATCH_READ_SIZE = 4 * 1024;
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

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

function encodeLatin1(text: string): Uint8Array {
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
  return bytes;
}

function decodeLatin1(bytes: Uint8Array): string {
  let text = "";
  for (let i = 0; i < bytes.length; i += 8192) {
    text += String.fromCharCode(...bytes.subarray(i, i + 8192));
  }
  return text;
}

function indexOfCrlf(bytes: Uint8Array, from: number): number {
  for (let i = Math.max(0, from); i + 1 < bytes.length; i++) {
    if (bytes[i] === 13 && bytes[i + 1] === 10) return i;
  }
  return -1;
}

function indexOfBlankLine(bytes: Uint8Array, from: number): number {
  for (let i = Math.max(0, from); i + 3 < bytes.length; i++) {
    if (bytes[i] === 13 && bytes[i + 1] === 10 && bytes[i + 2] === 13 && bytes[i + 3] === 10) {
      return i;
    }
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

/** The request line and headers, as bytes; throws a TypeError for what cannot be sent. */
function encodeHead(request: ForwardRequest, authority: string, nodeId: string): Uint8Array {
  const { method, path, headers, body } = request;
  if (!TOKEN.test(method)) throw invalid(`the method ${JSON.stringify(method)} is not a token`);
  if (!REQUEST_TARGET.test(path)) {
    throw invalid(`the path ${JSON.stringify(path)} is not an origin-form request target`);
  }
  const dropped = connectionTokens(headers);
  const lines = [`${method} ${path} HTTP/1.1`, ""];
  let host: string | undefined;
  for (const [name, value] of headers) {
    if (!TOKEN.test(name)) throw invalid(`the header name ${JSON.stringify(name)} is not a token`);
    if (!HEADER_VALUE.test(value)) throw invalid(`the value of the header ${name} is not valid`);
    const lower = name.toLowerCase();
    if (lower === "host") {
      host ??= value;
      continue;
    }
    if (REPLACED.has(lower) || isHopByHop(lower) || dropped.has(lower)) continue;
    lines.push(`${name}: ${value}`);
  }
  lines[1] = `host: ${host ?? authority}`;
  lines.push(`${FORWARDED_BY_HEADER}: ${nodeId}`);
  if (body.length > 0 || !NO_CONTENT_METHODS.has(method)) {
    lines.push(`content-length: ${body.length}`);
  }
  return encodeLatin1(lines.join("\r\n") + "\r\n\r\n");
}

/** One TCP connection to a peer, with the bytes read from it and not yet used. */
class Connection {
  state: "busy" | "idle" | "closed" = "busy";
  /** Answers read on this connection: above 0, it is a reused one. */
  served = 0;
  /** The clock's monotonic time when it last went idle. */
  idleSince = 0;
  #buffer: Uint8Array = EMPTY;
  #reading: Promise<void> | undefined;
  #eof = false;
  #failed = false;
  #failure: unknown;

  constructor(readonly peerKey: string, readonly conn: Deno.Conn) {}

  /** The peer closed or reset it, or sent bytes nobody asked for. */
  get dead(): boolean {
    return this.#eof || this.#failed || this.#buffer.length > 0;
  }

  get buffered(): Uint8Array {
    return this.#buffer;
  }

  /** Drops the first `n` buffered bytes. */
  consume(n: number): void {
    this.#buffer = this.#buffer.subarray(n);
  }

  /** Up to `n` buffered bytes, consumed. */
  take(n: number): Uint8Array {
    const piece = this.#buffer.subarray(0, Math.min(n, this.#buffer.length));
    this.#buffer = this.#buffer.subarray(piece.length);
    return piece;
  }

  /** Starts a read unless one is pending or the stream ended; resolves once it settled. */
  read(size: number): Promise<void> {
    if (this.#eof || this.#failed) return Promise.resolve();
    return this.#reading ??= this.#readOnce(size);
  }

  #readOnce(size: number): Promise<void> {
    const chunk = new Uint8Array(size);
    let pending: Promise<number | null>;
    try {
      pending = this.conn.read(chunk);
    } catch (error) {
      pending = Promise.reject(error);
    }
    return pending.then(
      (n) => {
        this.#reading = undefined;
        if (n === null) this.#eof = true;
        else if (n > 0) {
          const bytes = chunk.subarray(0, n);
          this.#buffer = this.#buffer.length === 0
            ? bytes
            : concatBytes([this.#buffer, bytes], this.#buffer.length + n);
        }
      },
      (error) => {
        this.#reading = undefined;
        this.#failed = true;
        this.#failure = error;
      },
    );
  }

  /** Reads until more bytes are buffered: false at the end of the stream; throws a read error. */
  async fill(): Promise<boolean> {
    const before = this.#buffer.length;
    while (this.#buffer.length === before) {
      if (this.#failed) throw this.#failure;
      if (this.#eof) return false;
      await this.read(READ_SIZE);
    }
    return true;
  }

  /** Resolves once no read is pending (after `close`, the pending one fails soon). */
  settled(): Promise<void> {
    return this.#reading ?? Promise.resolve();
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

function closeQuietly(conn: Deno.Conn): void {
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

function unreachable(written: boolean, reason: string): ForwardResult {
  return { kind: "unreachable", written, reason };
}

interface Waiter {
  peerKey: string;
  mayReuse: boolean;
  grant(grant: Connection | "slot"): void;
}

/** What one exchange on a connection came to. */
type Exchange =
  | { kind: "unsent"; error: unknown }
  | { kind: "done"; result: ForwardResult; reusable: boolean };

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
  readonly #nodeId: string;
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
    this.#nodeId = options.nodeId;
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
    const head = encodeHead(request, peer.authority, this.#nodeId);
    signal?.throwIfAborted();
    let acquired = await this.#acquire(peer, true, signal);
    let retried = false;
    while (true) {
      if (!(acquired instanceof Connection)) return acquired;
      const connection = acquired;
      const reused = connection.served > 0;
      const exchange = await this.#exchange(connection, head, request, signal);
      if (exchange.kind === "done") return exchange.result;
      this.#discard(connection);
      if (!reused || retried || !closedByPeer(exchange.error)) {
        return unreachable(
          false,
          `the connection to ${peer.key} failed before the request was written: ${
            describe(exchange.error)
          }`,
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
        const connection = new Connection(peer.key, conn);
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
        return unreachable(false, `could not connect to ${peer.key}: ${describe(error)}`);
      }
    } finally {
      timer.cancel();
      for (const remove of listeners) remove();
    }
  }

  /** Writes the request and reads the answer, bounded by the answer timeout and the signal. */
  async #exchange(
    connection: Connection,
    head: Uint8Array,
    request: ForwardRequest,
    signal: AbortSignal | undefined,
  ): Promise<Exchange> {
    if (signal?.aborted) {
      this.#release(connection); // Nothing was written on it.
      throw signal.reason;
    }
    let settled: "work" | "timeout" | "abort" | undefined;
    let wake!: () => void;
    const stopped = new Promise<undefined>((resolve) => wake = () => resolve(undefined));
    const stop = (why: "timeout" | "abort") => {
      if (settled) return;
      settled = why;
      this.#discard(connection);
      wake();
    };
    const timer = this.#clock.setTimer(this.#answerTimeoutMs, () => stop("timeout"));
    const onAbort = () => stop("abort");
    signal?.addEventListener("abort", onAbort, { once: true });
    try {
      const work = this.#converse(connection, head, request).then((exchange) => {
        settled ??= "work";
        return exchange;
      });
      const exchange = await Promise.race([work, stopped]);
      if (settled === "abort") throw signal!.reason;
      if (settled === "timeout" || !exchange) {
        return { kind: "done", result: { kind: "timeout" }, reusable: false };
      }
      if (exchange.kind === "done") {
        if (exchange.reusable) {
          connection.served++;
          this.#release(connection);
        } else this.#discard(connection);
      }
      return exchange;
    } finally {
      timer.cancel();
      signal?.removeEventListener("abort", onAbort);
    }
  }

  /** The exchange itself; never rejects. */
  async #converse(
    connection: Connection,
    head: Uint8Array,
    request: ForwardRequest,
  ): Promise<Exchange> {
    if (connection.dead && connection.served > 0) {
      // Seen closed between taking it from the pool and writing: nothing written.
      return {
        kind: "unsent",
        error: new Deno.errors.ConnectionReset("the peer had closed the kept-alive connection"),
      };
    }
    let accepted = 0;
    try {
      const { body } = request;
      const parts = body.length <= COALESCE_BYTES
        ? [concatBytes([head, body], head.length + body.length)]
        : [head, body];
      for (const part of parts) {
        for (let offset = 0; offset < part.length;) {
          const n = await connection.conn.write(part.subarray(offset));
          offset += n;
          accepted += n;
        }
      }
    } catch (error) {
      if (accepted === 0) return { kind: "unsent", error };
      return {
        kind: "done",
        result: unreachable(
          true,
          `the connection to ${connection.peerKey} failed while the request was written: ${
            describe(error)
          }`,
        ),
        reusable: false,
      };
    }
    try {
      const answer = await readAnswer(connection, request.method, this.#maxBodyBytes);
      return {
        kind: "done",
        result: { kind: "response", ...answer.response },
        reusable: answer.reusable,
      };
    } catch (error) {
      const reason = error instanceof AnswerError
        ? error.message
        : `the connection failed before a complete answer: ${describe(error)}`;
      return {
        kind: "done",
        result: unreachable(true, `${connection.peerKey}: ${reason}`),
        reusable: false,
      };
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
    connection.read(WATCH_READ_SIZE).then(() => {
      if (connection.state === "idle" && connection.dead) this.#discard(connection);
    });
    this.#pump();
  }

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
    if (this.#all.size === 0 && this.#idleSweep) {
      // Nothing left to sweep; a sweep armed for a connection taken since would only wake.
      this.#idleSweep.cancel();
      this.#idleSweep = undefined;
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

interface Answer {
  response: { status: number; headers: [string, string][]; body: Uint8Array };
  reusable: boolean;
}

/** Reads one answer (skipping interim 1xx ones); throws an AnswerError or a read error. */
async function readAnswer(
  connection: Connection,
  method: string,
  maxBodyBytes: number,
): Promise<Answer> {
  let first = true;
  while (true) {
    const { version, status, headers } = await readHead(connection, first);
    first = false;
    if (status === 101) throw new AnswerError("the peer switched protocols (101)");
    if (status < 200) continue;

    const tokens = connectionTokens(headers);
    let reusable = version === 1 && !tokens.has("close");
    const values = (name: string) => headers.filter(([n]) => n === name).map(([, v]) => v);
    const transferEncoding = values("transfer-encoding");
    const contentLength = values("content-length");
    let body: Uint8Array;
    if (method === "HEAD" || status === 204 || status === 304) {
      body = EMPTY;
    } else if (transferEncoding.length > 0) {
      const codings = transferEncoding.join(",").split(",").map((c) => c.trim().toLowerCase());
      if (codings.length !== 1 || codings[0] !== "chunked") {
        throw new AnswerError(
          `the answer's transfer-encoding ${JSON.stringify(transferEncoding.join(", "))} ` +
            "is not chunked alone",
        );
      }
      body = await readChunked(connection, maxBodyBytes);
      if (contentLength.length > 0) reusable = false;
    } else if (contentLength.length > 0) {
      const length = parseContentLength(contentLength);
      if (length > maxBodyBytes) throw tooLarge(maxBodyBytes);
      body = concatBytes(await readExact(connection, length), length);
    } else {
      body = await readToEnd(connection, maxBodyBytes);
      reusable = false;
    }
    // Bytes after the answer were not asked for: the connection is not in a known state.
    if (connection.buffered.length > 0) reusable = false;
    const kept = headers.filter(([name]) => !isHopByHop(name) && !tokens.has(name));
    return { response: { status, headers: kept, body }, reusable };
  }
}

function tooLarge(maxBodyBytes: number): AnswerError {
  return new AnswerError(`the answer's body is larger than ${maxBodyBytes} bytes`);
}

function closedMidAnswer(): AnswerError {
  return new AnswerError("the connection closed before the answer was complete");
}

async function readHead(
  connection: Connection,
  first: boolean,
): Promise<{ version: number; status: number; headers: [string, string][] }> {
  let searched = 0;
  let end: number;
  while ((end = indexOfBlankLine(connection.buffered, searched)) < 0) {
    if (connection.buffered.length > MAX_ANSWER_HEAD_BYTES) {
      throw new AnswerError(`the answer's head is larger than ${MAX_ANSWER_HEAD_BYTES} bytes`);
    }
    searched = Math.max(0, connection.buffered.length - 3);
    const empty = connection.buffered.length === 0;
    if (!(await connection.fill())) {
      throw first && empty
        ? new AnswerError("the connection closed before an answer")
        : closedMidAnswer();
    }
  }
  if (end > MAX_ANSWER_HEAD_BYTES) {
    throw new AnswerError(`the answer's head is larger than ${MAX_ANSWER_HEAD_BYTES} bytes`);
  }
  const text = decodeLatin1(connection.buffered.subarray(0, end));
  connection.consume(end + 4);
  const [statusLine, ...lines] = text.split("\r\n");
  const match = STATUS_LINE.exec(statusLine);
  if (!match) {
    throw new AnswerError(
      `the answer is not HTTP/1.x: its status line is ${JSON.stringify(statusLine.slice(0, 80))}`,
    );
  }
  const headers: [string, string][] = [];
  for (const line of lines) {
    const colon = line.indexOf(":");
    const name = colon > 0 ? line.slice(0, colon) : "";
    const value = line.slice(colon + 1).replace(/^[ \t]+|[ \t]+$/g, "");
    if (!TOKEN.test(name) || !HEADER_VALUE.test(value)) {
      throw new AnswerError(`the answer has a malformed header line ${JSON.stringify(line)}`);
    }
    headers.push([name.toLowerCase(), value]);
  }
  return { version: Number(match[1]), status: Number(match[2]), headers };
}

function parseContentLength(values: string[]): number {
  let length: number | undefined;
  for (const value of values.join(",").split(",")) {
    const trimmed = value.trim();
    if (!/^\d+$/.test(trimmed)) {
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
  while ((end = indexOfCrlf(connection.buffered, searched)) < 0) {
    if (connection.buffered.length > limit + 1) {
      throw new AnswerError(`the answer has a line longer than ${limit} bytes`);
    }
    searched = Math.max(0, connection.buffered.length - 1);
    if (!(await connection.fill())) throw closedMidAnswer();
  }
  if (end > limit) throw new AnswerError(`the answer has a line longer than ${limit} bytes`);
  const line = decodeLatin1(connection.buffered.subarray(0, end));
  connection.consume(end + 2);
  return line;
}

async function readExact(connection: Connection, length: number): Promise<Uint8Array[]> {
  const pieces: Uint8Array[] = [];
  for (let remaining = length; remaining > 0;) {
    if (connection.buffered.length === 0 && !(await connection.fill())) throw closedMidAnswer();
    const piece = connection.take(remaining);
    pieces.push(piece);
    remaining -= piece.length;
  }
  return pieces;
}

/** The CRLF that ends a chunk's data. */
async function expectCrlf(connection: Connection): Promise<void> {
  while (connection.buffered.length < 2) {
    if (!(await connection.fill())) throw closedMidAnswer();
  }
  const [cr, lf] = connection.buffered;
  if (cr !== 13 || lf !== 10) throw new AnswerError("the answer has a chunk longer than its size");
  connection.consume(2);
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
    pieces.push(...await readExact(connection, size));
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
  return concatBytes(pieces, total);
}

async function readToEnd(connection: Connection, maxBodyBytes: number): Promise<Uint8Array> {
  const pieces: Uint8Array[] = [];
  let total = 0;
  while (true) {
    const piece = connection.take(Infinity);
    total += piece.length;
    if (total > maxBodyBytes) throw tooLarge(maxBodyBytes);
    if (piece.length > 0) pieces.push(piece);
    if (!(await connection.fill())) return concatBytes(pieces, total);
  }
}
