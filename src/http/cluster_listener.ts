/**
 * The cluster listener: the port other nodes reach this one on, over mutual
 * TLS 1.3 (running-a-cluster.md, "Encryption between nodes"). A peer is let
 * in only if its client certificate's fingerprint is trusted, which the node
 * answers from the live heartbeats it listed (each heartbeat publishes its
 * node's fingerprint). Nothing else about the certificate matters: no CA,
 * names or dates are checked, since every node makes its own at start.
 *
 * A refused peer's connection is destroyed as soon as its handshake ends,
 * before the HTTP server ever sees the socket: no byte it sent is parsed.
 * Trust is asked again at each request on a connection and for every open
 * connection at {@linkcode ClusterListener.revoke}, which the node calls
 * after each listing of the heartbeats, so a peer whose heartbeat was
 * fenced, released, deleted, replaced by a new key or expired loses its
 * open connections too ("How fast a removed node loses access").
 *
 * An upgrade request of a trusted peer goes to the `upgrade` option, which
 * accepts it (the listener writes the 101 and hands the connection over:
 * it stays that peer's, so a revoke closes it too) or refuses it with an
 * answer; without the option, upgrades are answered 501.
 *
 * It is a `node:tls` server, because `Deno.listenTls` cannot ask for a
 * client certificate, and each trusted connection is served by the HTTP/1.1
 * server of `src/net/h1/server.ts` (not `node:http`, whose parser, request
 * and response objects cost a third of this port's CPU per request: see
 * docs/performance.md, "The pieces"). Bodies stream both ways: a request's
 * body is read as the handler reads it, the connection paused meanwhile,
 * and an answer's body is written a piece at a time as the peer takes it.
 * In Deno 2.9.6 `node:tls` reads a connection's TCP into memory even while
 * it is paused, so only a trusted peer can make it hold more.
 *
 * @module
 */

import type { Socket } from "node:net";
import tls from "node:tls";
import { isValidHost } from "./request_head.ts";
import { textResponse } from "./answers.ts";
import { IDLE_TIMEOUT_MS } from "./forward.ts";
import type { Logger } from "../log.ts";
import { assert } from "../assert.ts";
import { describeError } from "../describe_error.ts";
import type { NodeIdentity } from "../security/node_identity.ts";
import { type Clock, systemClock } from "../time/clock.ts";
import { DeadlineQueue } from "../net/deadlines.ts";
import { serveHttp1, type UpgradeAnswer } from "../net/h1/server.ts";
import { SocketConn } from "../net/socket_conn.ts";

export type { UpgradeAnswer } from "../net/h1/server.ts";

/** A connection whose TLS handshake has not ended this long after it was accepted is closed. */
export const HANDSHAKE_TIMEOUT_MS = 5_000;
/**
 * Most connections from one address in their TLS handshake at once; past it
 * a new one from that address is closed at once. Anyone who reaches the port
 * can open connections that never handshake, each held for
 * {@linkcode HANDSHAKE_TIMEOUT_MS}: without this, a few hundred a second from
 * one machine would fill the connection cap and lock the peers out.
 */
export const MAX_HANDSHAKES_PER_ADDRESS = 32;
/**
 * An idle kept-alive connection is closed after this long: longer than the
 * forwarder's own idle timeout, so that the client closes first. A close
 * from this side can cross a request the client is writing, which the
 * forwarder must then answer 503 (it cannot know whether it was read).
 */
export const KEEP_ALIVE_TIMEOUT_MS = 2 * IDLE_TIMEOUT_MS;
/** Largest request line plus headers; larger is answered 431 and the connection closed. */
export const MAX_REQUEST_HEAD_BYTES = 64 * 1024;
/** A refused fingerprint (or kind of refusal) is logged at most once in this long. */
export const REFUSAL_LOG_INTERVAL_MS = 60_000;
/**
 * Most fingerprints remembered for {@linkcode REFUSAL_LOG_INTERVAL_MS}; while
 * all are younger than that, a refusal of another one is not logged (it is
 * still counted and passed to `onRefused`).
 */
export const MAX_REFUSAL_LOG_ENTRIES = 256;

/**
 * Every reason a connection is closed without being served: the values of
 * the `reason` label of `wasmkeep_cluster_refused_connections_total`, each
 * exported at 0 from the listener's start.
 *
 * @example
 * ```ts
 * import { REFUSAL_REASONS } from "./cluster_listener.ts";
 * console.log(REFUSAL_REASONS.includes("untrusted certificate")); // true
 * ```
 */
export const REFUSAL_REASONS = [
  "no client certificate",
  "untrusted certificate",
  "no longer trusted",
  "over the connection cap",
  "too many handshakes from one address",
] as const;

/** Why a connection was closed without being served: one of {@linkcode REFUSAL_REASONS}. */
export type RefusalReason = (typeof REFUSAL_REASONS)[number];

/** The peer a request came from, as its handshake proved it. */
export interface ClusterPeer {
  /** The SHA-256 fingerprint of its leaf certificate (uppercase colon hex). */
  readonly fingerprint: string;
}

/** Settings of {@linkcode ClusterListener.start}. */
export interface ClusterListenerOptions {
  /** Address to bind, such as `0.0.0.0`. */
  hostname: string;
  /** Port to bind; 0 picks a free one (see {@linkcode ClusterListener.address}). */
  port: number;
  /** This node's key and certificate chain. */
  identity: NodeIdentity;
  /**
   * Whether a peer's certificate fingerprint is trusted now. Asked at each
   * handshake, each request and, per fingerprint, at each `revoke()`: it must
   * be cheap. One that throws counts as false.
   */
  trust: (fingerprint: string) => boolean;
  /** Answers a trusted peer's request. One that throws is answered 500. */
  handler: (request: Request, peer: ClusterPeer) => Promise<Response>;
  /**
   * Answers a trusted peer's upgrade request (`connection: upgrade`): accept
   * it (the listener writes the 101 and hands the connection over), or
   * refuse it with an answer. Unset: every upgrade is answered 501. One that
   * throws is answered 500. An accepted connection stays the peer's: it is
   * closed when trust in the peer is withdrawn, as the others are.
   */
  upgrade?: (request: Request, peer: ClusterPeer) => Promise<UpgradeAnswer>;
  /** Most connections open at once, those in their handshake included. */
  maxConnections: number;
  /** Default {@linkcode MAX_HANDSHAKES_PER_ADDRESS}. */
  maxHandshakesPerAddress?: number;
  /** Largest request body; a larger one is answered 413 and its connection closed. */
  maxBodyBytes: number;
  log: Logger;
  /** Told of every refused or revoked connection (for metrics); never throttled. */
  onRefused?: (fingerprint: string | undefined, reason: RefusalReason) => void;
  /** For the refusal log's throttle; default the system clock. */
  clock?: Clock;
}

/** Counts of {@linkcode ClusterListener.stats}. */
export interface ClusterListenerStats {
  /** Connections open, those in their handshake included. */
  open: number;
  /** Connections of trusted peers, past their handshake. */
  trusted: number;
  /** Connections closed after their handshake: no certificate, or one not trusted. */
  refusedHandshakes: number;
  /** Connections closed at once because {@linkcode ClusterListenerOptions.maxConnections} were open. */
  refusedOverCap: number;
  /** Connections closed at once because their address had as many handshakes under way as allowed. */
  refusedHandshakesPerAddress: number;
  /** Handshakes that failed or timed out (not TLS, a bad signature, too slow). */
  failedHandshakes: number;
  /** Connections of trusted peers closed later because trust was withdrawn. */
  revoked: number;
}

/**
 * A mutual-TLS HTTP/1.1 listener for requests from other nodes.
 *
 * @example
 * ```ts
 * import { ClusterListener } from "./cluster_listener.ts";
 * import { createNodeIdentity } from "../security/node_identity.ts";
 * import { createLogger } from "../log.ts";
 * const pins = new Set<string>(); // fingerprints from the live heartbeats
 * const listener = await ClusterListener.start({
 *   hostname: "127.0.0.1",
 *   port: 0, // 7443 in production
 *   identity: await createNodeIdentity({ nodeId: "a", hosts: ["127.0.0.1"] }),
 *   trust: (fingerprint) => pins.has(fingerprint),
 *   handler: (_request, peer) => Promise.resolve(new Response(`hello ${peer.fingerprint}`)),
 *   maxConnections: 1024,
 *   maxBodyBytes: 1024 * 1024,
 *   log: createLogger(),
 * });
 * // After each listing of the heartbeats:
 * listener.revoke();
 * await listener.close();
 * ```
 */
export class ClusterListener {
  readonly #server: tls.Server;
  readonly #options: ClusterListenerOptions;
  readonly #clock: Clock;
  /** The waits of every connection for its peer's next bytes, on one timer. */
  readonly #idle: DeadlineQueue;
  /** Every accepted TCP connection until it closes. */
  readonly #sockets = new Set<Socket>();
  /** Remote address -> its accepted connections whose handshake has not ended. */
  readonly #handshakes = new Map<string, number>();
  /** An accepted connection in its handshake -> its remote address. */
  readonly #inHandshake = new WeakMap<object, string>();
  /** Trusted connections past their handshake, by their peer's fingerprint. */
  readonly #byPeer = new Map<string, Set<tls.TLSSocket>>();
  readonly #peerOf = new WeakMap<Socket, ClusterPeer>();
  /** TCP connections closed at once over the cap (their TLS socket then reports an error). */
  readonly #refusedAtAccept = new WeakSet<object>();
  /** Fingerprint (or kind) -> when its refusal was last logged; oldest first. */
  readonly #lastLogged = new Map<string, number>();
  #trusted = 0;
  #refusedHandshakes = 0;
  #refusedOverCap = 0;
  #refusedHandshakesPerAddress = 0;
  #failedHandshakes = 0;
  #revoked = 0;
  #closed: Promise<void> | undefined;

  private constructor(options: ClusterListenerOptions) {
    this.#options = options;
    this.#clock = options.clock ?? systemClock;
    this.#idle = new DeadlineQueue(
      this.#clock,
      KEEP_ALIVE_TIMEOUT_MS,
      () => this.#closed === undefined,
    );
    this.#server = tls.createServer({
      key: options.identity.keyPem,
      cert: options.identity.chainPem,
      requestCert: true,
      // The certificate is judged by its fingerprint below, not by a CA.
      rejectUnauthorized: false,
      minVersion: "TLSv1.3",
      maxVersion: "TLSv1.3",
      handshakeTimeout: HANDSHAKE_TIMEOUT_MS,
    }, (socket: tls.TLSSocket) => this.#onSecureConnection(socket));
    this.#server.on("connection", (socket: Socket) => this.#onConnection(socket));
    this.#server.on("tlsClientError", (error: Error, socket: tls.TLSSocket) => {
      // node:tls reports a handshake timeout without closing the socket.
      socket.destroy();
      // A connection refused over the cap ends here too; it was counted then.
      const parent = (socket as { _parent?: object })._parent;
      if (parent !== undefined && this.#refusedAtAccept.has(parent)) return;
      this.#failedHandshakes++;
      this.#logThrottled(
        "(failed handshake)",
        "debug",
        "a cluster connection failed its handshake",
        {
          error: error.message,
        },
      );
    });
  }

  /**
   * Binds and starts accepting; rejects if the address cannot be bound.
   *
   * @example
   * ```ts
   * import { ClusterListener, type ClusterListenerOptions } from "./cluster_listener.ts";
   * declare const options: ClusterListenerOptions;
   * const listener = await ClusterListener.start(options);
   * listener.address.port; // the bound port, also when options.port was 0
   * ```
   */
  static async start(options: ClusterListenerOptions): Promise<ClusterListener> {
    if (!Number.isInteger(options.maxConnections) || options.maxConnections < 1) {
      throw new RangeError(
        `maxConnections must be a positive integer, not ${options.maxConnections}`,
      );
    }
    if (!Number.isInteger(options.maxBodyBytes) || options.maxBodyBytes < 0) {
      throw new RangeError(
        `maxBodyBytes must be a non-negative integer, not ${options.maxBodyBytes}`,
      );
    }
    const listener = new ClusterListener(options);
    await new Promise<void>((resolve, reject) => {
      listener.#server.once("error", reject);
      listener.#server.listen(options.port, options.hostname, () => {
        listener.#server.off("error", reject);
        resolve();
      });
    });
    listener.#server.on("error", (error: Error) => {
      options.log.error("the cluster listener failed", { error: error.message });
    });
    return listener;
  }

  /** The bound address (the actual port when 0 was asked for). */
  get address(): { hostname: string; port: number } {
    const bound = this.#server.address();
    assert(
      bound !== null && typeof bound !== "string",
      "the cluster listener is bound to a TCP address",
    );
    return { hostname: bound.address, port: bound.port };
  }

  /**
   * Asks `trust` again for every peer with open connections and closes the
   * connections of those no longer trusted. One call of `trust` per distinct
   * peer, however many connections it has. Returns how many were closed.
   *
   * @example
   * ```ts
   * import type { ClusterListener } from "./cluster_listener.ts";
   * declare const listener: ClusterListener;
   * declare const pins: Set<string>;
   * declare const fencedNodesFingerprint: string;
   * pins.delete(fencedNodesFingerprint);
   * listener.revoke(); // its connections are closed now
   * ```
   */
  revoke(): number {
    let closed = 0;
    for (const [fingerprint, sockets] of this.#byPeer) {
      if (this.#isTrusted(fingerprint)) continue;
      // Forget them first: their close events come later and find nothing.
      this.#byPeer.delete(fingerprint);
      this.#trusted -= sockets.size;
      for (const socket of sockets) {
        socket.destroy();
        closed++;
        this.#revoked++;
        this.#options.onRefused?.(fingerprint, "no longer trusted");
      }
      this.#logThrottled(
        fingerprint,
        "warn",
        "closed the connections of a peer no longer trusted",
        {
          fingerprint,
          connections: sockets.size,
        },
      );
    }
    return closed;
  }

  /**
   * Counts for tests and metrics.
   *
   * @example
   * ```ts
   * import type { ClusterListener } from "./cluster_listener.ts";
   * declare const listener: ClusterListener;
   * listener.stats(); // { open: 3, trusted: 2, refusedHandshakes: 1, … }
   * ```
   */
  stats(): ClusterListenerStats {
    return {
      open: this.#sockets.size,
      trusted: this.#trusted,
      refusedHandshakes: this.#refusedHandshakes,
      refusedOverCap: this.#refusedOverCap,
      refusedHandshakesPerAddress: this.#refusedHandshakesPerAddress,
      failedHandshakes: this.#failedHandshakes,
      revoked: this.#revoked,
    };
  }

  /**
   * Stops accepting and closes every connection, requests under way
   * included; resolves once the listener is closed.
   *
   * @example
   * ```ts
   * import type { ClusterListener } from "./cluster_listener.ts";
   * declare const listener: ClusterListener;
   * await listener.close();
   * ```
   */
  close(): Promise<void> {
    this.#closed ??= new Promise<void>((resolve) => {
      this.#server.close(() => resolve());
      for (const sockets of this.#byPeer.values()) {
        for (const socket of sockets) socket.destroy();
      }
      for (const socket of this.#sockets) socket.destroy();
    });
    // Kept armed while the listener serves; not past its close.
    this.#idle.stopIfIdle();
    return this.#closed;
  }

  #onConnection(socket: Socket): void {
    const address = socket.remoteAddress ?? "";
    const handshakes = this.#handshakes.get(address) ?? 0;
    const perAddress = this.#options.maxHandshakesPerAddress ?? MAX_HANDSHAKES_PER_ADDRESS;
    const reason: RefusalReason | undefined = this.#sockets.size >= this.#options.maxConnections
      ? "over the connection cap"
      : handshakes >= perAddress
      ? "too many handshakes from one address"
      : undefined;
    if (reason !== undefined) {
      this.#refusedAtAccept.add(socket);
      socket.destroy();
      if (reason === "over the connection cap") this.#refusedOverCap++;
      else this.#refusedHandshakesPerAddress++;
      this.#options.onRefused?.(undefined, reason);
      this.#logThrottled(`(${reason})`, "warn", "refused a cluster connection", {
        reason,
        remote: address,
        max: reason === "over the connection cap" ? this.#options.maxConnections : perAddress,
      });
      return;
    }
    this.#sockets.add(socket);
    this.#handshakes.set(address, handshakes + 1);
    this.#inHandshake.set(socket, address);
    socket.once("close", () => {
      this.#sockets.delete(socket);
      this.#handshakeEnded(socket);
    });
  }

  /** `socket` (the accepted TCP connection) is past its handshake, or closed. */
  #handshakeEnded(socket: object): void {
    const address = this.#inHandshake.get(socket);
    if (address === undefined) return;
    this.#inHandshake.delete(socket);
    const left = (this.#handshakes.get(address) ?? 1) - 1;
    if (left > 0) this.#handshakes.set(address, left);
    else this.#handshakes.delete(address);
  }

  #onSecureConnection(socket: tls.TLSSocket): void {
    // The TLS socket wraps the accepted one, whose handshake is over.
    this.#handshakeEnded((socket as { _parent?: object })._parent ?? socket);
    const fingerprint = socket.getPeerCertificate()?.fingerprint256 || undefined;
    const reason: RefusalReason | undefined = fingerprint === undefined
      ? "no client certificate"
      : this.#isTrusted(fingerprint)
      ? undefined
      : "untrusted certificate";
    if (reason !== undefined) {
      socket.destroy();
      this.#refusedHandshakes++;
      this.#options.onRefused?.(fingerprint, reason);
      this.#logThrottled(
        fingerprint ?? "(no certificate)",
        "warn",
        "refused a cluster connection",
        {
          fingerprint,
          reason,
          remote: socket.remoteAddress,
        },
      );
      return;
    }
    const peer: ClusterPeer = Object.freeze({ fingerprint: fingerprint! });
    let sockets = this.#byPeer.get(peer.fingerprint);
    if (!sockets) this.#byPeer.set(peer.fingerprint, sockets = new Set());
    sockets.add(socket);
    this.#trusted++;
    this.#peerOf.set(socket, peer);
    socket.once("close", () => {
      // Absent when revoke() already forgot it.
      if (this.#byPeer.get(peer.fingerprint)?.delete(socket)) {
        this.#trusted--;
        if (this.#byPeer.get(peer.fingerprint)!.size === 0) this.#byPeer.delete(peer.fingerprint);
      }
    });
    socket.setNoDelay(true);
    void serveHttp1(new SocketConn(socket), this.#serveOptions(socket, peer));
  }

  /** How the HTTP/1.1 server serves `socket`, a connection of `peer`. */
  #serveOptions(socket: tls.TLSSocket, peer: ClusterPeer): Parameters<typeof serveHttp1>[1] {
    const { handler, upgrade, log, maxBodyBytes } = this.#options;
    return {
      handler: (request) => handler(request, peer),
      upgrade: upgrade
        ? (request) => upgrade(request, peer)
        : () => Promise.resolve({ kind: "refuse", response: UPGRADES_NOT_SERVED() }),
      url: requestUrl,
      // Trust is asked again at each request: a peer fenced since the last revoke() is not served.
      admit: () => this.#trustedPeer(socket) !== undefined,
      maxHeadBytes: MAX_REQUEST_HEAD_BYTES,
      maxBodyBytes,
      idle: this.#idle,
      onHandlerError: (error, request) => {
        const upgrading = request.headers.has("upgrade");
        log.error(upgrading ? "the cluster upgrade handler failed" : "the cluster handler failed", {
          method: request.method,
          path: new URL(request.url).pathname,
          error: describeError(error),
        });
      },
    };
  }

  #isTrusted(fingerprint: string): boolean {
    try {
      return this.#options.trust(fingerprint) === true;
    } catch (error) {
      this.#logThrottled("(trust failed)", "error", "asking whether a peer is trusted failed", {
        fingerprint,
        error: describeError(error),
      });
      return false;
    }
  }

  /**
   * The trusted peer whose connection `socket` is, or undefined: the
   * connection is then destroyed (and, if trust ended since the last
   * revoke(), every connection of that peer with it).
   */
  #trustedPeer(socket: Socket): ClusterPeer | undefined {
    const peer = this.#peerOf.get(socket);
    if (peer !== undefined && this.#isTrusted(peer.fingerprint)) return peer;
    if (peer !== undefined) this.revoke();
    socket.destroy();
    return undefined;
  }

  #logThrottled(
    key: string,
    level: "debug" | "warn" | "error",
    message: string,
    fields: Record<string, string | number | undefined>,
  ): void {
    const now = this.#clock.monotonic();
    const last = this.#lastLogged.get(key);
    if (last !== undefined && now - last < REFUSAL_LOG_INTERVAL_MS) return;
    // Entries are in the order they were logged: drop the ones past the interval.
    for (const [oldKey, at] of this.#lastLogged) {
      if (now - at < REFUSAL_LOG_INTERVAL_MS) break;
      this.#lastLogged.delete(oldKey);
    }
    if (last === undefined && this.#lastLogged.size >= MAX_REFUSAL_LOG_ENTRIES) return;
    this.#lastLogged.delete(key);
    this.#lastLogged.set(key, now);
    this.#options.log[level](message, fields);
  }
}

/**
 * `https://<host><target>`, with `cluster` for a missing host header or one
 * that is not a valid host[:port] ({@linkcode isValidHost}), so that no
 * character of it can move into the path and no port can make `new URL`
 * throw; undefined when the target makes no URL. The handler still sees the
 * header as sent: the node's (`createClientHandler`) answers a malformed one
 * 400, as on the client port.
 */
function requestUrl(host: string | undefined, target: string): string | undefined {
  const authority = host !== undefined && isValidHost(host) ? host : "cluster";
  try {
    return new URL(`https://${authority}${target}`).href;
  } catch {
    return undefined;
  }
}

/** The answer to an upgrade when the node serves none on this port. */
const UPGRADES_NOT_SERVED = () => textResponse(501, "upgrades are not served on the cluster port");
