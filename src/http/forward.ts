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

import { describeError } from "../describe_error.ts";
import { type Clock, systemClock, type Timer } from "../time/clock.ts";
import { DeadlineQueue } from "../net/deadlines.ts";
import { FORWARDED_BY_HEADER } from "../net/headers.ts";
import { type ByteConn, Connection } from "../net/h1/connection.ts";
import { AnswerBody } from "../net/h1/answer.ts";
import { converse, type Conversed, Switched, unreachable, Unsent } from "../net/h1/exchange.ts";
import {
  AnswerError,
  encodeRequest,
  HEADER_VALUE,
  invalid,
  type RequestHead,
} from "../net/h1/wire.ts";

export type { ByteConn } from "../net/h1/connection.ts";
export type { ForwardResult, StreamedForwardResult, UpgradeResult } from "../net/h1/results.ts";
import type { ForwardResult, StreamedForwardResult, UpgradeResult } from "../net/h1/results.ts";
export type { StreamedBody } from "../net/h1/request_body.ts";
export { MAX_ANSWER_HEAD_BYTES } from "../net/h1/answer.ts";

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

/** A request to forward. `path` includes the query (`/actor/c/n/x?y=1`). */
export type ForwardRequest = RequestHead;

const EMPTY_BODY = new Uint8Array(0);

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

/** Request headers the forwarder sets itself. */
const REPLACED: ReadonlySet<string> = new Set([
  "host",
  "content-length",
  FORWARDED_BY_HEADER,
  // The body is in hand and sent at once: the peer has nothing to confirm.
  "expect",
]);

/** Most parsed peer addresses remembered; the oldest is forgotten first. */
const MAX_CACHED_PEERS = 256;
const ONCE = { once: true } as const;

class ConnectTimeout extends Error {
  override name = "ConnectTimeout";
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

interface Waiter {
  peerKey: string;
  mayReuse: boolean;
  grant(grant: Connection | "slot"): void;
}

/**
 * Forwards requests to peers over pooled HTTP/1.1 connections.
 *
 * @example Forwarding a GET to the node that holds the actor
 * ```ts
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
  /** Exchanges (and streamed answers' reads) waiting on the peer, each for the answer timeout. */
  readonly #answerWaits: DeadlineQueue;
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
    // While a connection is open a timer left armed costs nothing; it ends a
    // wait that closing the connection might not.
    this.#answerWaits = new DeadlineQueue(
      this.#clock,
      this.#answerTimeoutMs,
      () => !this.#closing.signal.aborted && this.#all.size > 0,
    );
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
  forward(
    peerUrl: string | URL,
    request: ForwardRequest,
    options: { signal?: AbortSignal } = {},
  ): Promise<ForwardResult> {
    return this.#forward(peerUrl, request, options.signal, false) as Promise<ForwardResult>;
  }

  /**
   * As {@linkcode Forwarder.forward}, with the answer's body streamed: the
   * answer timeout covers the exchange up to the answer's head, then each
   * wait for a piece of the body (the reader's own pace is not counted).
   * The connection goes back to the pool once the body was read to its end.
   * A request with a `stream` body sends it as it is read, with the answer
   * read meanwhile: an answer that comes first stops the body (and the
   * connection is not reused).
   */
  forwardStreamed(
    peerUrl: string | URL,
    request: ForwardRequest,
    options: { signal?: AbortSignal } = {},
  ): Promise<StreamedForwardResult> {
    return this.#forward(peerUrl, request, options.signal, true) as Promise<StreamedForwardResult>;
  }

  /**
   * Sends an upgrade request (`GET`, `connection: upgrade`, `upgrade:
   * <protocol>`) on a new connection, once. A 101 hands the connection over
   * as it is (`switched`: the bytes the peer sent after its head in
   * `leftover`), out of the pool and counted among the open ones until its
   * holder closes it; any other answer is read whole, as by
   * {@linkcode Forwarder.forward}. `unansweredNew` on an unreachable result
   * says the peer read nothing (a refused certificate): the spec's one
   * upgrade sent again.
   *
   * @example
   * ```ts
   * import type { ByteConn, Forwarder } from "./forward.ts";
   * import { relay } from "../net/relay.ts";
   * declare const forwarder: Forwarder;
   * declare const peer: string;
   * declare const headers: [string, string][];
   * declare const clientConn: ByteConn;
   * const up = await forwarder.upgrade(peer, { path: "/actor/room/x", headers, protocol: "websocket" });
   * if (up.kind === "switched") relay(clientConn, up.conn, { fromB: up.leftover });
   * ```
   */
  upgrade(
    peerUrl: string | URL,
    request: { path: string; headers: [string, string][]; protocol: string },
    options: { signal?: AbortSignal } = {},
  ): Promise<UpgradeResult> {
    return this.#forward(
      peerUrl,
      {
        method: "GET",
        path: request.path,
        headers: request.headers,
        body: EMPTY_BODY,
        upgrade: request.protocol,
      },
      options.signal,
      false,
    ) as Promise<UpgradeResult>;
  }

  async #forward(
    peerUrl: string | URL,
    request: ForwardRequest,
    signal: AbortSignal | undefined,
    streamed: boolean,
  ): Promise<ForwardResult | StreamedForwardResult | UpgradeResult> {
    const peer = this.#peer(peerUrl);
    const wire = encodeRequest(request, peer.authority, this.#forwardedBy, REPLACED);
    signal?.throwIfAborted();
    // An upgrade goes on a new connection: it leaves the pool if switched.
    const reuse = request.upgrade === undefined;
    let acquired = (reuse && !this.#closing.signal.aborted && this.#takeIdle(peer.key)) ||
      await this.#acquire(peer, reuse, signal);
    let retried = false;
    while (true) {
      if (!(acquired instanceof Connection)) return acquired;
      const connection = acquired;
      const reused = connection.served > 0;
      const outcome = await this.#exchange(connection, wire, request, signal, streamed);
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
    this.#answerWaits.stopIfIdle();
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
    streamed: boolean,
  ): Promise<ForwardResult | StreamedForwardResult | UpgradeResult | Unsent> {
    if (signal?.aborted) {
      this.#release(connection); // Nothing was written on it.
      throw signal.reason;
    }
    let settled: "work" | "timeout" | "abort" | undefined;
    let wake!: (outcome: Conversed | undefined) => void;
    const outcome = new Promise<Conversed | undefined>((resolve) => wake = resolve);
    const stop = (why: "timeout" | "abort") => {
      if (settled) return;
      settled = why;
      this.#discard(connection);
      wake(undefined);
    };
    const deadline = this.#answerWaits.add(() => stop("timeout"));
    const onAbort = () => stop("abort");
    signal?.addEventListener("abort", onAbort, ONCE);
    try {
      converse(connection, wire, request, this.#maxBodyBytes, streamed).then((result) => {
        settled ??= "work";
        wake(result);
      });
      const result = await outcome;
      if (settled === "abort") throw signal!.reason;
      if (settled === "timeout" || result === undefined) return { kind: "timeout" };
      if (result instanceof Unsent) return result;
      if (result instanceof AnswerBody) return this.#streamAnswer(connection, result);
      if (result instanceof Switched) return this.#switched(connection, result);
      this.#finish(connection);
      return result;
    } finally {
      this.#answerWaits.remove(deadline);
      signal?.removeEventListener("abort", onAbort);
    }
  }

  /**
   * A connection the peer switched to another protocol: out of the pool,
   * its slot counted until it is closed (by its holder, or by `close()`).
   */
  #switched(connection: Connection, switched: Switched): UpgradeResult {
    const leftover = connection.buf.slice(connection.start, connection.end);
    connection.start = connection.end;
    const { conn } = connection;
    return {
      kind: "switched",
      headers: switched.head.headers,
      leftover,
      conn: {
        read: (p) => connection.readInto(p),
        write: (p) => conn.write(p),
        close: () => this.#discard(connection),
      },
    };
  }

  /** An exchange whose answer was read: back to the pool, or closed. */
  #finish(connection: Connection): void {
    if (connection.reusable) {
      connection.served++;
      this.#release(connection);
    } else this.#discard(connection);
  }

  /**
   * The answer's head with its body as a stream read from the connection
   * (see {@linkcode StreamedForwardResult}), each wait for a piece bounded
   * by the answer timeout.
   */
  #streamAnswer(connection: Connection, body: AnswerBody): StreamedForwardResult {
    const stream = new ReadableStream<Uint8Array>({
      pull: async (controller) => {
        const wait = this.#answerWaits.add(() => this.#discard(connection));
        try {
          const piece = await body.next();
          if (piece === null) {
            controller.close();
            this.#finish(connection);
          } else {
            controller.enqueue(piece);
            if (body.done) {
              controller.close();
              this.#finish(connection);
            }
          }
        } catch (error) {
          this.#discard(connection);
          controller.error(
            error instanceof AnswerError ? error : new AnswerError(
              `${connection.peerKey}: the answer's body was cut: ${describeError(error)}`,
            ),
          );
        } finally {
          this.#answerWaits.remove(wait);
        }
      },
      cancel: () => this.#discard(connection),
    }, { highWaterMark: 0 });
    const { status, headers } = body.head;
    return { kind: "response", status, headers, length: body.length, body: stream };
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
      this.#answerWaits.stopIfIdle();
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
