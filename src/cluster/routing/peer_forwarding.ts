/**
 * Carrying out a route to another node: which of its addresses a request
 * goes to (its cluster listener over mutual TLS, or plain HTTP when both
 * sides allow it), over which {@linkcode Forwarder}, and what the answer or
 * the failure means for the caller and for what this node remembers.
 *
 * The guarantee is the forwarder's (`src/http/forward.ts`): a request that
 * may have been written is never sent again. What is decided here on top:
 *
 * - the owner's "not held" answer (421 with `x-wasmkeep-node-not-held`,
 *   which only the cluster path sends) proves the request did not run
 *   there: the caller may route it again from a fresh record, and the
 *   remembered holder is forgotten;
 * - a failure forgets the remembered holder too, so the next request reads
 *   the record again;
 * - a live peer no connection could be opened to is suspected (its actors'
 *   GETs are then kept, not forwarded) until a lease write of it dated after
 *   the failure shows it alive, except when it refused this node's
 *   certificate: that proves it up;
 * - an actors.call that came back unsent on a new TLS connection (the peer
 *   refused this node's certificate at the handshake, having seen its
 *   heartbeat expire) is sent once more after this node's next heartbeat
 *   landed and two periods passed (the spec's "A caller its peer briefly
 *   stopped trusting").
 *
 * @module
 */

import { type ActorKey, actorKeyString } from "../../actors/key.ts";
import type { ActorRequest, ActorResponse } from "../../actors/protocol.ts";
import { AssertionError } from "../../assert.ts";
import { NODE_HEADER, NOT_HELD_HEADER, NOT_HELD_STATUS } from "../../net/headers.ts";
import {
  type ByteConn,
  type Connect,
  Forwarder,
  type StreamedBody,
  type StreamedForwardResult,
} from "../../http/forward.ts";
import type { Logger } from "../../log.ts";
import { CALLER_HEADER, type CallSigner, CHAIN_HEADER } from "../../security/call_signature.ts";
import type { Clock } from "../../time/clock.ts";
import { type Heartbeat, isLive } from "../heartbeat.ts";
import type { LeaseTiming } from "../lease_timing.ts";
import type { Membership } from "../membership.ts";
import type { NodeLease } from "../node_lease.ts";
import type { HolderMemory } from "./holders.ts";
import { acceptKeyOf } from "../../net/websocket_accept.ts";

/** Peers skipped for having no cluster listener are logged at most this often. */
export const SKIPPED_PEERS_LOG_MS = 60_000;

/** A node cleared of suspicion is not suspected again for this long. */
export const SUSPECT_AGAIN_AFTER_MS = 10_000;

/** Suspected nodes remembered at once; the oldest is forgotten first. */
export const MAX_SUSPECTED_NODES = 1024;

/** How a forwarded request ended, as an event outcome with the node that answered. */
export type ForwardOutcome =
  | {
    kind: "response";
    response: ActorResponse;
    node: string;
    /** A long body, streamed from the peer (`response.body` is then empty). */
    stream?: ReadableStream<Uint8Array>;
  }
  | {
    kind: "failed";
    status: number;
    message: string;
    /** No byte of the request reached the peer (no connection could be opened): it did not run. */
    unsent?: boolean;
  }
  /**
   * The peer does not hold the actor and did not run the request (its
   * answer said so, in the way only the cluster path answers): `holder` is
   * the node its record named.
   */
  | { kind: "not-held"; node: string; holder: string };

/** What {@linkcode PeerForwarding} works with. */
export interface PeerForwardingOptions {
  nodeId: string;
  clock: Clock;
  log: Logger;
  timing: LeaseTiming;
  /** The live peers, their addresses and pins. */
  membership: Membership;
  /** This node's lease: a call refused at the handshake waits for its next write. */
  lease: NodeLease;
  /** Forgotten on every failure and "not held". */
  holders: HolderMemory;
  /** `--cluster-plaintext`: whether plain HTTP to peers without a listener is used. */
  plaintext: "accept" | "refuse";
  /** Opens plain connections to peers; default TCP (`Deno.connect`). */
  connect?: Connect;
  /** Opens mutual TLS connections pinned to a peer's fingerprint; unset without a listener. */
  tlsConnect?: (pinFor: (host: string, port: number) => string | undefined) => Connect;
  /** How long a forwarded request waits for the peer's answer; default the spec's 30 s. */
  answerTimeoutMs?: number;
  /** Signs an actors.call between nodes; unset or throwing: calls between nodes are stopped. */
  signCall?: CallSigner;
  /** Told of each forward of a request, as it begins and ends (the simulator's bounds). */
  observer?: ForwardObserver;
  /**
   * The simulator's planted `forward-resends` (sim/variants.ts): a request
   * whose forward failed is sent once more, although it may have been
   * written. Absent in `serve`.
   */
  resendFailed?: boolean;
}

/**
 * The requests this node forwards, for whoever watches them (the
 * simulator's invariants). Called synchronously, as it happens.
 *
 * @example
 * ```ts
 * import type { ForwardObserver } from "./peer_forwarding.ts";
 * const observer: ForwardObserver = {
 *   forwarding: (node, actor) => (outcome) => console.log(node, actor.name, outcome.kind),
 * };
 * ```
 */
export interface ForwardObserver {
  /** A request for `actor` is forwarded to `node`; what it returns is told its outcome. */
  forwarding?(node: string, actor: ActorKey): ((outcome: ForwardOutcome) => void) | void;
}

const EMPTY = new Uint8Array(0);

/**
 * Requests and calls sent to the nodes holding their actors.
 *
 * @example
 * ```ts
 * import { PeerForwarding, type PeerForwardingOptions } from "./peer_forwarding.ts";
 * import type { ActorRequest } from "../../actors/protocol.ts";
 * import { systemClock as clock } from "../../time/clock.ts";
 * import { createLogger } from "../../log.ts";
 * declare const o: PeerForwardingOptions;
 * declare const request: ActorRequest;
 * const { timing, membership, lease, holders } = o;
 * const actor = { tenant: "default", class: "counter", name: "a" };
 * const log = createLogger();
 * const peers = new PeerForwarding({ nodeId: "a", clock, log, timing, membership, lease,
 *   holders, plaintext: "accept" });
 * const address = peers.addressOf(membership.peer("b")?.heartbeat);
 * const outcome = await peers.forward(address!, "b", actor, request);
 * await peers.close();
 * ```
 */
export class PeerForwarding {
  /** Plain HTTP to peers. */
  readonly forwarder: Forwarder;
  /** Requests to peers' cluster listeners, over mutual TLS; unset without a listener. */
  readonly tlsForwarder: Forwarder | undefined;
  readonly #o: PeerForwardingOptions;
  /** Live nodes this node could not connect to, by id: since when (wall clock). */
  readonly #suspected = new Map<string, { since: number; clearedAt: number | undefined }>();
  /** When peers skipped for having no cluster listener were last logged (monotonic). */
  #skippedLoggedAt = -Infinity;

  /** Forwarders to peers, with no connection open yet. */
  constructor(options: PeerForwardingOptions) {
    this.#o = options;
    const { nodeId, clock, timing, membership, answerTimeoutMs } = options;
    this.forwarder = new Forwarder({ nodeId, clock, connect: options.connect, answerTimeoutMs });
    this.tlsForwarder = options.tlsConnect && new Forwarder({
      nodeId,
      clock,
      connect: options.tlsConnect((host, port) => pinOf(membership, clock, timing, host, port)),
      answerTimeoutMs,
    });
  }

  /**
   * Where requests for a live peer's actors go: its cluster listener when
   * both have one; its client address when this node has none (it accepts
   * plain HTTP) or the peer has none and this node accepts plain HTTP;
   * nowhere when this node refuses plain HTTP and the peer has no listener.
   * A peer with a listener is never reached in plain text by a node with one.
   */
  addressOf(heartbeat: Heartbeat | undefined): string | undefined {
    if (!heartbeat) return undefined;
    if (!this.tlsForwarder) return heartbeat.address;
    if (heartbeat.clusterAddress && heartbeat.fingerprint) return heartbeat.clusterAddress;
    return this.#o.plaintext === "accept" ? heartbeat.address : undefined;
  }

  /** Why a live peer cannot be reached from here, when that is so (logged once a minute). */
  whyNoAddress(node: string, heartbeat: Heartbeat | undefined): string | undefined {
    if (!heartbeat || this.addressOf(heartbeat) !== undefined) return undefined;
    const now = this.#o.clock.monotonic();
    if (now - this.#skippedLoggedAt >= SKIPPED_PEERS_LOG_MS) {
      this.#skippedLoggedAt = now;
      this.#o.log.warn(
        "skipping peers without a cluster listener: this node refuses plain HTTP between nodes",
        { node },
      );
    }
    return `the actor's node ${node} has no cluster listener and this node refuses plain HTTP ` +
      `between nodes (--cluster-plaintext refuse); retry`;
  }

  /**
   * A live node this node could not open a connection to is suspected until
   * a lease write of it dated more than twice the allowed skew after the
   * failure shows it alive; then not again for {@linkcode SUSPECT_AGAIN_AFTER_MS}.
   */
  isSuspected(node: string, heartbeat: Heartbeat | undefined): boolean {
    const suspicion = this.#suspected.get(node);
    if (!suspicion || suspicion.clearedAt !== undefined) return false;
    if (heartbeat && heartbeat.at > suspicion.since + 2 * this.#o.timing.skewMs) {
      suspicion.clearedAt = this.#o.clock.monotonic();
      this.#o.log.info("a suspected node wrote its lease again", { node });
      return false;
    }
    return true;
  }

  /**
   * Sends a request on to the node that holds its actor, once. A failure
   * after the request may have been written is never resent: the spec's
   * 503 "the actor's node did not answer; retry", or 504 after 30 s.
   * A long answer's body streams back; `stream` sends a body that is not
   * in hand as it is read (the request's own `body` is then empty).
   */
  async forward(
    address: string,
    node: string,
    actor: ActorKey,
    request: ActorRequest,
    signal?: AbortSignal,
    stream?: StreamedBody,
  ): Promise<ForwardOutcome> {
    const ended = this.#o.observer?.forwarding?.(node, actor);
    let outcome = await this.#forward(address, node, actor, request, signal, stream);
    if (this.#o.resendFailed && outcome.kind === "failed") {
      outcome = await this.#forward(address, node, actor, request, signal, stream);
    }
    ended?.(outcome);
    return outcome;
  }

  async #forward(
    address: string,
    node: string,
    actor: ActorKey,
    request: ActorRequest,
    signal: AbortSignal | undefined,
    stream: StreamedBody | undefined,
  ): Promise<ForwardOutcome> {
    const result = await this.#forwarderFor(address).forwardStreamed(address, {
      method: request.method,
      path: actorPath(actor, request),
      headers: request.headers,
      body: request.body,
      stream,
    }, { signal }).catch((error) => {
      // The client left: nobody reads the answer.
      if (signal?.aborted) {
        const left: StreamedForwardResult = {
          kind: "unreachable",
          written: true,
          reason: "the client left",
        };
        return left;
      }
      throw error;
    });
    if (result.kind === "response") return this.#answered(result, actor, node);
    // The client's own body was refused on the way: nothing ran, the holder is as it was.
    if (result.kind === "body-refused") {
      return { kind: "failed", status: result.status, message: `bad request: ${result.reason}` };
    }
    const failure = this.#failed(result, actor, node, address, "forwarding failed");
    if (failure === "timeout") {
      return {
        kind: "failed",
        status: 504,
        message: `the actor's node ${node} did not answer within 30 s`,
      };
    }
    return {
      kind: "failed",
      status: 503,
      message: "the actor's node did not answer; retry",
      unsent: failure === "unsent",
    };
  }

  /**
   * Sends a node's own signed `POST` to a peer (not an actor's event: the
   * alarms of a clean stop's hand-over), once: the peer's status, or
   * `undefined` when it did not answer. `caller` is an actor the message
   * is about, as a call's signature names one.
   */
  async postSigned(
    address: string,
    node: string,
    path: string,
    body: Uint8Array,
    caller: string,
  ): Promise<number | undefined> {
    if (!this.#o.signCall) return undefined;
    const signature = this.#o.signCall({
      targetNode: node,
      method: "POST",
      path,
      body,
      caller,
      chain: [],
    });
    const result = await this.#forwarderFor(address).forward(address, {
      method: "POST",
      path,
      headers: signature,
      body,
    }).catch(() => undefined);
    if (result?.kind !== "response") return undefined;
    return result.status;
  }

  /**
   * Sends an actors.call's event to the node holding its actor, signed,
   * once: the callee's answer, or the error its caller gets. A call that may
   * have been written is never sent again.
   */
  async forwardCall(
    address: string,
    node: string,
    actor: ActorKey,
    request: ActorRequest,
    call: { caller: string; chain: readonly string[] },
  ): Promise<ForwardOutcome | { kind: "not-run"; error: string }> {
    // Sent and signed as the peer's URL parser will read it.
    const url = new URL(actorPath(actor, request), "http://peer");
    const path = url.pathname + url.search;
    let signature: [string, string][];
    try {
      if (!this.#o.signCall) throw new Error("this node cannot sign calls");
      signature = this.#o.signCall({
        targetNode: node,
        method: request.method,
        path,
        body: request.body,
        caller: call.caller,
        chain: call.chain,
      });
    } catch (error) {
      return {
        kind: "not-run",
        error: `calls between nodes are stopped: ${(error as Error).message}`,
      };
    }
    const send = () =>
      this.#forwarderFor(address).forward(address, {
        method: request.method,
        path,
        // The signature carries the caller and chain, believed only with it.
        headers: [
          ...request.headers.filter(([name]) => name !== CALLER_HEADER && name !== CHAIN_HEADER),
          ...signature,
        ],
        body: request.body,
      });
    const result = await this.#onceMoreIfUnread(address, node, "call", send);
    if (result.kind === "refused") return { kind: "not-run", error: result.message };
    if (result.kind === "response") return this.#answered(result, actor, node);
    // A call's body is in hand: only a stream could be refused on the way.
    if (result.kind === "body-refused") return { kind: "not-run", error: result.reason };
    const failure = this.#failed(result, actor, node, address, "a call to another node failed");
    if (failure === "timeout") {
      return { kind: "not-run", error: `the actor's node ${node} did not answer within 30 s` };
    }
    return { kind: "not-run", error: `the actor's node ${node} did not answer; retry` };
  }

  /**
   * Sends a WebSocket upgrade of `actor` on to `node`, which holds it, as
   * this node's own handshake (its key, version 13, no extensions; the
   * client's other headers as they came): the owner's connection once it
   * switched, checked against the key, or the failure the client gets (the
   * owner's refusal as it answered, 503 when it did not answer).
   */
  async upgrade(
    address: string,
    node: string,
    actor: ActorKey,
    request: ActorRequest,
  ): Promise<
    | { kind: "switched"; conn: ByteConn; leftover: Uint8Array }
    | Extract<ForwardOutcome, { kind: "failed" }>
  > {
    const key = btoa(String.fromCharCode(...crypto.getRandomValues(new Uint8Array(16))));
    const headers: [string, string][] = request.headers.filter(([name]) =>
      !name.startsWith("sec-websocket-")
    );
    headers.push(["sec-websocket-key", key], ["sec-websocket-version", "13"]);
    const result = await this.#onceMoreIfUnread(
      address,
      node,
      "WebSocket upgrade",
      () =>
        this.#forwarderFor(address).upgrade(address, {
          path: actorPath(actor, request),
          headers,
          protocol: "websocket",
        }),
    );
    if (result.kind === "refused") {
      return { kind: "failed", status: 503, message: `${result.message}; retry` };
    }
    if (result.kind === "switched") {
      const accept = result.headers.find(([name]) => name === "sec-websocket-accept")?.[1];
      if (accept !== acceptKeyOf(key)) {
        result.conn.close();
        return {
          kind: "failed",
          status: 502,
          message: `node ${node} switched protocols without accepting this WebSocket`,
        };
      }
      return { kind: "switched", conn: result.conn, leftover: result.leftover };
    }
    if (result.kind === "response") {
      const answer = this.#answered(result, actor, node);
      if (answer.kind === "response") {
        const line = new TextDecoder().decode(answer.response.body).trim();
        return { kind: "failed", status: answer.response.status, message: line };
      }
      return { kind: "failed", status: 503, message: "the actor's node changed; retry" };
    }
    if (result.kind === "body-refused") {
      return { kind: "failed", status: 400, message: result.reason };
    }
    const failure = this.#failed(result, actor, node, address, "relaying a WebSocket failed");
    // The spec's answer to an upgrade its owner did not answer, in time or at all: 503.
    return {
      kind: "failed",
      status: 503,
      message: "the actor's node did not answer; retry",
      unsent: failure === "unsent",
    };
  }

  /**
   * `send`, and once more when the peer provably read nothing over TLS (it
   * refused this node's certificate at the handshake, having seen this
   * node's heartbeat expire, or a new TLS connection came back unsent):
   * after this node's next heartbeat landed and two more periods passed,
   * when the peer has seen it live again (the spec's "A caller its peer
   * briefly stopped trusting"). `refused` when it was refused again, or the
   * heartbeat did not land within two periods.
   */
  async #onceMoreIfUnread<R extends { kind: string }>(
    address: string,
    node: string,
    what: string,
    send: () => Promise<R>,
  ): Promise<R | { kind: "refused"; message: string }> {
    const first = await send();
    if (!isTls(address) || !unreadNew(first)) return first;
    const { periodMs } = this.#o.timing;
    this.#o.log.info(`a peer refused this node's certificate; the ${what} waits to retry`, {
      node,
    });
    const landed = await this.#o.lease.writeLanded(this.#o.clock.monotonic(), 2 * periodMs);
    if (!landed) {
      return {
        kind: "refused",
        message:
          `node ${node} refused this node's certificate (this node's heartbeat did not land)`,
      };
    }
    await this.#o.clock.sleep(2 * periodMs);
    const second = await send();
    if (unreadNew(second)) {
      return { kind: "refused", message: `node ${node} refused this node's certificate` };
    }
    return second;
  }

  /** Closes every connection to peers. */
  async close(): Promise<void> {
    await this.forwarder.close();
    await this.tlsForwarder?.close();
  }

  #forwarderFor(address: string): Forwarder {
    if (!isTls(address)) return this.forwarder;
    // Only a node with a listener picks a peer's https address.
    if (!this.tlsForwarder) {
      throw new AssertionError(`a node that picks ${address} has a TLS forwarder`);
    }
    return this.tlsForwarder;
  }

  /**
   * A request or call that got no answer: the holder is forgotten, and a
   * peer no connection could be opened to is suspected (not one that refused
   * this node's certificate: that proves it up). Whether it timed out, was
   * never sent, or may have run.
   */
  #failed(
    result: { kind: "timeout" } | {
      kind: "unreachable";
      written: boolean;
      reason: string;
      unansweredNew?: boolean;
    },
    actor: ActorKey,
    node: string,
    address: string,
    message: string,
  ): "timeout" | "unsent" | "written" {
    this.#o.holders.forget(actorKeyString(actor), node);
    if (result.kind === "timeout") return "timeout";
    this.#o.log.warn(message, { node, address, reason: result.reason });
    if (!result.written && !(result.unansweredNew && isTls(address))) this.#suspect(node);
    return result.written ? "written" : "unsent";
  }

  #suspect(node: string) {
    const earlier = this.#suspected.get(node);
    const now = this.#o.clock.monotonic();
    if (earlier && earlier.clearedAt === undefined) return;
    if (earlier?.clearedAt !== undefined && now - earlier.clearedAt < SUSPECT_AGAIN_AFTER_MS) {
      return;
    }
    this.#suspected.delete(node);
    if (this.#suspected.size >= MAX_SUSPECTED_NODES) {
      this.#suspected.delete(this.#suspected.keys().next().value!);
    }
    this.#suspected.set(node, { since: this.#o.clock.now(), clearedAt: undefined });
    this.#o.log.warn("could not open a connection to a live node: its actors' GETs are kept", {
      node,
    });
  }

  /**
   * The peer's answer, or "not held" when it is the cluster path's own 421
   * (the holder is then forgotten, and a streamed body cancelled).
   */
  #answered(
    result: { status: number; headers: [string, string][]; body: Uint8Array | ReadableStream },
    actor: ActorKey,
    node: string,
  ): ForwardOutcome {
    const holder = notHeldBy(result);
    if (holder !== undefined) {
      if (!(result.body instanceof Uint8Array)) result.body.cancel().catch(() => {});
      this.#o.holders.forget(actorKeyString(actor), node);
      return { kind: "not-held", node, holder };
    }
    const answered = result.headers.find(([name]) => name === NODE_HEADER)?.[1] ?? node;
    const headers = result.headers.filter(([name]) =>
      name !== NODE_HEADER && name !== "content-length"
    );
    const { status, body } = result;
    if (body instanceof Uint8Array) {
      return { kind: "response", node: answered, response: { status, headers, body } };
    }
    return {
      kind: "response",
      node: answered,
      response: { status, headers, body: EMPTY },
      stream: body,
    };
  }
}

/** The request target of an actor's request on another node: path and query. */
function actorPath(actor: ActorKey, request: ActorRequest): string {
  return `/actor/${encodeURIComponent(actor.class)}/${encodeURIComponent(actor.name)}${
    request.path === "/" ? "" : request.path
  }${request.query ? `?${request.query}` : ""}`;
}

/**
 * The holder a peer's "not held" answer names, or `undefined` for any other
 * answer. Only the cluster path answers so (the owner strips the header
 * from actors' own answers): it proves the request did not run there.
 */
function notHeldBy(result: { status: number; headers: [string, string][] }): string | undefined {
  if (result.status !== NOT_HELD_STATUS) return undefined;
  return result.headers.find(([name]) => name === NOT_HELD_HEADER)?.[1];
}

function isTls(address: string): boolean {
  return address.startsWith("https:");
}

/**
 * The fingerprint a live peer publishes for the cluster listener at
 * `host:port`, if any: what a TLS connection there must present.
 */
function pinOf(
  membership: Membership,
  clock: Clock,
  timing: LeaseTiming,
  host: string,
  port: number,
): string | undefined {
  for (const peer of membership.liveNodes()) {
    const heartbeat = peer.heartbeat;
    if (!heartbeat?.clusterAddress || !heartbeat.fingerprint) continue;
    let url: URL;
    try {
      url = new URL(heartbeat.clusterAddress);
    } catch {
      continue;
    }
    const peerHost = url.hostname.replace(/^\[(.*)\]$/, "$1");
    if (peerHost === host && Number(url.port || 443) === port) {
      if (isLive(heartbeat, clock.now(), timing.ttlMs)) return heartbeat.fingerprint;
    }
  }
  return undefined;
}

/** An answer that says the peer read nothing: unreachable on a new connection, unanswered. */
function unreadNew(result: { kind: string }): boolean {
  return result.kind === "unreachable" &&
    (result as { unansweredNew?: boolean }).unansweredNew === true;
}
