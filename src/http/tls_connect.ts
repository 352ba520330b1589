/**
 * The client side of mutual TLS between nodes: opens a connection to a
 * peer's cluster listener, presenting this node's certificate, and accepts
 * the peer only if its certificate's fingerprint is the one its live
 * heartbeat publishes (the pin). No CA, name or date is checked: each node
 * makes its own certificate at start (running-a-cluster.md, "Encryption
 * between nodes"). The handshake still proves that the peer holds the key
 * of the certificate it shows.
 *
 * Nothing is written before the pin matched. A peer that refuses this
 * node's certificate does so after the handshake ends on this side (TLS 1.3
 * lets the client finish first), so the connection opens and then ends:
 * the first read sees the end or an error, and a request written into it
 * was never read ("A caller its peer briefly stopped trusting").
 *
 * The connection is a {@linkcode ByteConn}, the shape the forwarder reads
 * and writes (a `Deno.Conn` is one too).
 *
 * @module
 */

import tls from "node:tls";
import { SocketConn } from "../net/socket_conn.ts";
import type { NodeIdentity } from "../security/node_identity.ts";

/** A byte stream the forwarder talks HTTP/1.1 over; `Deno.Conn` satisfies it. */
export interface ByteConn {
  /**
   * Copies the next bytes into `p`: how many, or null at the end of the
   * stream; rejects on an error.
   */
  read(p: Uint8Array): Promise<number | null>;
  /** Writes bytes from `p`: how many were taken; rejects if the connection failed. */
  write(p: Uint8Array): Promise<number>;
  /** Closes the connection; a read pending then rejects. */
  close(): void;
}

/** Opens a connection to `host:port`; aborting `signal` gives up. */
export type ConnectByteConn = (
  host: string,
  port: number,
  signal: AbortSignal,
) => Promise<ByteConn>;

/** The peer at an address has no pin: no live heartbeat names a certificate for it. */
export class NoPeerPin extends Error {
  /**
   * @example
   * ```ts
   * import { NoPeerPin } from "./tls_connect.ts";
   * new NoPeerPin("10.0.0.12", 7443).message;
   * ```
   */
  constructor(readonly host: string, readonly port: number) {
    super(`no certificate fingerprint is known for the peer at ${host}:${port}; nothing was sent`);
    this.name = "NoPeerPin";
  }
}

/** The peer's certificate is not the one its heartbeat publishes. */
export class PeerPinMismatch extends Error {
  /**
   * @example
   * ```ts
   * import { PeerPinMismatch } from "./tls_connect.ts";
   * new PeerPinMismatch("10.0.0.12", 7443, "AA:…", "BB:…").message;
   * ```
   */
  constructor(
    readonly host: string,
    readonly port: number,
    readonly expected: string,
    readonly actual: string | undefined,
  ) {
    super(
      `the peer at ${host}:${port} presented certificate ${actual ?? "(none)"}, ` +
        `not ${expected} that its heartbeat publishes; nothing was sent`,
    );
    this.name = "PeerPinMismatch";
  }
}

/** Options of {@linkcode tlsConnector}. */
export interface TlsConnectorOptions {
  /** This node's key and chain, presented as its client certificate. */
  identity: NodeIdentity;
  /**
   * The fingerprint the peer at `host:port` must present (uppercase colon
   * hex), or undefined if none is known. Asked once the handshake ended, so
   * the answer is as fresh as the connection.
   */
  pinFor: (host: string, port: number) => string | undefined;
}

const ONCE = { once: true } as const;

/**
 * A connect function for the forwarder that opens mutual TLS 1.3
 * connections to peers and checks their pin. It rejects with
 * {@linkcode NoPeerPin} or {@linkcode PeerPinMismatch} (the connection then
 * closed, nothing written), with the signal's reason when aborted, or with
 * the connection's error.
 *
 * @example
 * ```ts
 * import { tlsConnector } from "./tls_connect.ts";
 * import { createNodeIdentity } from "../security/node_identity.ts";
 * const pins = new Map<string, string>(); // "host:port" -> fingerprint, from heartbeats
 * const connect = tlsConnector({
 *   identity: await createNodeIdentity({ nodeId: "a", hosts: ["10.0.0.11"] }),
 *   pinFor: (host, port) => pins.get(`${host}:${port}`),
 * });
 * // const conn = await connect("10.0.0.12", 7443, AbortSignal.timeout(5000));
 * ```
 */
export function tlsConnector(options: TlsConnectorOptions): ConnectByteConn {
  const { identity, pinFor } = options;
  return (host, port, signal) =>
    new Promise<ByteConn>((resolve, reject) => {
      if (signal.aborted) return reject(signal.reason);
      const bare = host.startsWith("[") && host.endsWith("]") ? host.slice(1, -1) : host;
      const socket = tls.connect({
        host: bare,
        port,
        // SNI carries names only (RFC 6066); the server ignores it anyway.
        servername: isIpAddress(bare) ? undefined : bare,
        cert: identity.chainPem,
        key: identity.keyPem,
        // The peer is judged by its pin below, not by a CA.
        rejectUnauthorized: false,
        minVersion: "TLSv1.3",
        maxVersion: "TLSv1.3",
      });
      const settle = () => {
        signal.removeEventListener("abort", onAbort);
        socket.off("error", onError);
        socket.off("secureConnect", onSecure);
      };
      const fail = (error: unknown) => {
        settle();
        // A late error of the destroyed socket must not go unheard (it would throw).
        socket.on("error", () => {});
        socket.destroy();
        reject(error);
      };
      const onAbort = () => fail(signal.reason);
      const onError = (error: Error) => fail(error);
      const onSecure = () => {
        const actual = socket.getPeerCertificate()?.fingerprint256 || undefined;
        let expected: string | undefined;
        try {
          expected = pinFor(host, port);
        } catch (error) {
          return fail(error);
        }
        if (!expected) return fail(new NoPeerPin(host, port));
        if (actual === undefined || expected.toUpperCase() !== actual.toUpperCase()) {
          return fail(new PeerPinMismatch(host, port, expected, actual));
        }
        settle();
        socket.setNoDelay(true);
        resolve(new SocketConn(socket));
      };
      signal.addEventListener("abort", onAbort, ONCE);
      socket.once("error", onError);
      socket.once("secureConnect", onSecure);
    });
}

function isIpAddress(host: string): boolean {
  return /^[0-9.]+$/.test(host) || host.includes(":");
}
