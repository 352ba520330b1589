/**
 * A node's part in a cluster: its lease (after the node id check), its view
 * of the other nodes with the fencing duty, where requests for actors go,
 * and the forwarding of those another live node holds.
 *
 * @module
 */

import type { Bucket } from "../bucket/bucket.ts";
import { CALLER_HEADER, type CallToSign, CHAIN_HEADER } from "../security/call_signature.ts";
import { type ActorKey, actorKeyString } from "../actors/key.ts";
import { HolderMemory } from "./holders.ts";
import { NODE_HEADER, NOT_HELD_HEADER, NOT_HELD_STATUS } from "../http/client_handler.ts";
import type { Clock } from "../time/clock.ts";
import type { Logger } from "../log.ts";
import { AssertionError } from "../assert.ts";
import type { ActorRequest, ActorResponse } from "../actors/protocol.ts";
import { checkNodeId } from "./node_id_check.ts";
import { NodeLease } from "./node_lease.ts";
import { Membership } from "./membership.ts";
import type { LeaseTiming } from "./lease_timing.ts";
import { decodeHeartbeat, type Heartbeat, isLive } from "./heartbeat.ts";
import { nodeKey } from "../bucket/keys.ts";
import type { OwnerRecord, OwnershipRecords } from "./ownership.ts";
import { type Route, routeRequest } from "./router.ts";
import {
  type Connect,
  Forwarder,
  type StreamedBody,
  type StreamedForwardResult,
} from "../http/forward.ts";

/** Options of {@linkcode ClusterPlane}. */
export interface ClusterPlaneOptions {
  bucket: Bucket;
  clock: Clock;
  log: Logger;
  nodeId: string;
  processToken: string;
  timing: LeaseTiming;
  /**
   * The cluster listener, when this node has one: its `https://` address and
   * certificate fingerprint (published in the heartbeat), and how to open a
   * mutual TLS connection pinned to a peer's published fingerprint.
   */
  tls?: {
    clusterAddress: string;
    fingerprint: string;
    connect: (pinFor: (host: string, port: number) => string | undefined) => Connect;
  };
  /**
   * Opens plain connections to peers; default TCP (`Deno.connect`). The
   * simulator's network between nodes (`sim/network.ts`).
   */
  connect?: Connect;
  /** How long a forwarded request waits for the peer's answer; default the spec's 30 s. */
  answerTimeoutMs?: number;
  /** `--cluster-plaintext`: whether plain HTTP to peers without a listener is used. */
  plaintext: "accept" | "refuse";
  /** The WasmKeep version, published in the heartbeat. */
  version: string;
  ownership: OwnershipRecords;
  /** Where the holders this node forwarded to are remembered; by default a {@linkcode HolderMemory}. */
  holders?: HolderMemory;
  /** Abandons the start (the node id check waits up to ttl + grace). */
  signal?: AbortSignal;
  /**
   * The signature headers of an actors.call sent to `targetNode`; throws
   * (with the reason) when calls between nodes are stopped.
   */
  signCall?: CallSigner;
}

/** Signs a call between nodes (src/security/call_signature.ts with the cluster secret). */
export type CallSigner = (call: CallToSign) => [string, string][];

/** The request target of an actor's request on another node: path and query. */
function actorPath(actor: ActorKey, request: ActorRequest): string {
  return `/actor/${encodeURIComponent(actor.class)}/${encodeURIComponent(actor.name)}${
    request.path === "/" ? "" : request.path
  }${request.query ? `?${request.query}` : ""}`;
}

/**
 * Whether `heartbeat` frees `record` at `now`: released, or fenced at least
 * `fenceAfterMs` after its date, as the process the record names. A fence
 * keeps the date of the node's last write, and a node whose write landed may
 * run its actors until that write's lease ends: a fence written early (by
 * `wasmkeep cluster fence`, which any node obeys at its next write) frees
 * them only when a peer's own fence would have. A view a period old may still
 * show the release or fence of a process the node has since replaced, whose
 * new process took the actor back. A gone heartbeat of another process frees
 * the record too when that process was alive after the record was written
 * (the record's process had been replaced by then: one process per id at a
 * time).
 *
 * @example
 * ```ts
 * import { heartbeatFrees } from "./cluster_plane.ts";
 * heartbeatFrees(undefined, { version: 1, node: "b", process: "p", generation: 1n,
 *   state: "held", at: 0 }, 0, 15_000); // false
 * ```
 */
export function heartbeatFrees(
  heartbeat: Heartbeat | undefined,
  record: OwnerRecord,
  now: number,
  fenceAfterMs: number,
): boolean {
  if (heartbeat === undefined) return false;
  const ended = heartbeat.lease === "released" ||
    (heartbeat.lease === "fenced" && now - heartbeat.at >= fenceAfterMs);
  return ended && (heartbeat.process === record.process || heartbeat.at >= record.at);
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

/** Peers skipped for having no cluster listener are logged at most this often. */
export const SKIPPED_PEERS_LOG_MS = 60_000;

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

const EMPTY = new Uint8Array(0);

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

/**
 * The cluster side of a node.
 *
 * @example
 * ```ts ignore
 * const plane = new ClusterPlane({ ...options });
 * await plane.start("http://10.0.0.1:8080");
 * const route = await plane.route(actor, false, (actor) => host.holds(actor));
 * await plane.stop();
 * ```
 */
export class ClusterPlane {
  /** Live nodes this node could not connect to, by id: since when (wall clock). */
  readonly #suspected = new Map<string, { since: number; clearedAt: number | undefined }>();

  /** When peers skipped for having no cluster listener were last logged (monotonic). */
  #skippedLoggedAt = -Infinity;

  /** The URL peers forward requests to, published in the heartbeat from the start. */
  #address = "";

  /** The holders of actors this node forwarded for (holders.ts). */
  readonly holders: HolderMemory;

  readonly lease: NodeLease;
  readonly membership: Membership;
  readonly forwarder: Forwarder;
  /** Requests to peers' cluster listeners, over mutual TLS; unset without a listener. */
  readonly tlsForwarder: Forwarder | undefined;
  readonly options: ClusterPlaneOptions;

  /**
   * The cluster side of a node, not started: its lease is not valid and
   * nothing is written until {@linkcode ClusterPlane.start}. Whoever follows
   * the lease subscribes to {@linkcode ClusterPlane.lease} meanwhile.
   */
  constructor(options: ClusterPlaneOptions) {
    const { bucket, clock, log, nodeId, processToken, timing } = options;
    this.options = options;
    this.holders = options.holders ?? new HolderMemory();
    this.lease = new NodeLease({
      bucket,
      clock,
      log,
      nodeId,
      processToken,
      timing,
      describe: () => ({
        address: this.#address,
        clusterAddress: options.tls?.clusterAddress,
        fingerprint: options.tls?.fingerprint,
        readsSecrets: false,
        takesMoved: false,
        version: options.version,
        state: "serving",
      }),
    });
    const membership = new Membership({
      bucket,
      clock,
      log,
      nodeId,
      timing,
      ownLease: this.lease,
    });
    this.membership = membership;
    const answerTimeoutMs = options.answerTimeoutMs;
    this.forwarder = new Forwarder({ nodeId, clock, connect: options.connect, answerTimeoutMs });
    this.tlsForwarder = options.tls && new Forwarder({
      nodeId,
      clock,
      connect: options.tls.connect((host, port) => pinOf(membership, clock, timing, host, port)),
      answerTimeoutMs,
    });
  }

  /**
   * Checks the node id (the spec's "Flags": up to ttl + grace), writes the
   * first heartbeat, which publishes `address` (the URL peers forward
   * requests to: the node's, once it listens), and starts watching the
   * other nodes. Throws `NodeIdInUse` when another process runs with this id.
   */
  async start(address: string): Promise<void> {
    const { bucket, clock, log, nodeId, timing } = this.options;
    this.#address = address;
    const checked = await checkNodeId({
      bucket,
      clock,
      log,
      nodeId,
      timing,
      signal: this.options.signal,
    });
    await this.lease.start(checked);
    this.membership.start();
    // Ready with a view of the other nodes, not the empty one of a start.
    await this.membership.refresh();
  }

  /**
   * The fingerprints of the certificates of every live peer that publishes
   * one: the peers the cluster listener lets in.
   */
  trustedFingerprints(): Set<string> {
    const trusted = new Set<string>();
    for (const peer of this.membership.liveNodes()) {
      const fingerprint = peer.heartbeat?.fingerprint;
      if (fingerprint && peer.nodeId !== this.options.nodeId) trusted.add(fingerprint);
    }
    return trusted;
  }

  /**
   * Where requests for a live peer's actors go: its cluster listener when
   * both have one; its client address when this node has none (it accepts
   * plain HTTP) or the peer has none and this node accepts plain HTTP;
   * nowhere when this node refuses plain HTTP and the peer has no listener.
   * A peer with a listener is never reached in plain text by a node with one.
   */
  #addressOf(heartbeat: Heartbeat | undefined): string | undefined {
    if (!heartbeat) return undefined;
    if (!this.tlsForwarder) return heartbeat.address;
    if (heartbeat.clusterAddress && heartbeat.fingerprint) return heartbeat.clusterAddress;
    return this.options.plaintext === "accept" ? heartbeat.address : undefined;
  }

  #whyNoAddress(node: string, heartbeat: Heartbeat | undefined): string | undefined {
    if (!heartbeat || this.#addressOf(heartbeat) !== undefined) return undefined;
    const now = this.options.clock.monotonic();
    if (now - this.#skippedLoggedAt >= SKIPPED_PEERS_LOG_MS) {
      this.#skippedLoggedAt = now;
      this.options.log.warn(
        "skipping peers without a cluster listener: this node refuses plain HTTP between nodes",
        { node },
      );
    }
    return `the actor's node ${node} has no cluster listener and this node refuses plain HTTP ` +
      `between nodes (--cluster-plaintext refuse); retry`;
  }

  /** Whether this node's lease is valid: it may run events only then. */
  valid(): boolean {
    return this.lease.valid();
  }

  #frees(heartbeat: Heartbeat | undefined, record: OwnerRecord): boolean {
    return heartbeatFrees(
      heartbeat,
      record,
      this.options.clock.now(),
      this.options.timing.fenceAfterMs,
    );
  }

  /**
   * Whether an actor whose record names another node is free to take: that
   * node's heartbeat says released or fenced. A node that is merely not
   * live keeps its actors until a fence frees them.
   */
  canTakeFrom(record: OwnerRecord): boolean {
    return this.#frees(this.membership.peer(record.node)?.heartbeat, record);
  }

  /**
   * {@linkcode ClusterPlane.canTakeFrom}, and when the view says no, the same
   * rule on the holder's heartbeat read from the bucket now: a route that
   * read it fresh and found it gone must not meet a take that refuses on a
   * view a period old.
   */
  async canTakeFromFresh(record: OwnerRecord): Promise<boolean> {
    if (this.canTakeFrom(record)) return true;
    return this.#frees(await this.#readHeartbeat(record.node), record);
  }

  /**
   * Where a request for `actor` goes; `forwarded` when another node sent it
   * here. A holder that does not look live in the view is looked up once
   * more, by a read of its heartbeat: the view can be a period old, and the
   * holder may have just started.
   */
  async route(
    actor: ActorKey,
    forwarded: boolean,
    holdsHere: (actor: ActorKey) => boolean,
    fresh = false,
  ): Promise<Route> {
    let route = await this.#route(actor, forwarded, holdsHere, fresh);
    if (route.kind === "unavailable" && route.ownerDown) {
      const heartbeat = await this.#readHeartbeat(route.node);
      const read = heartbeat && { node: route.node, heartbeat };
      route = await this.#route(actor, forwarded, holdsHere, fresh, read);
    }
    if (route.kind === "forward" && !route.remembered) {
      this.holders.remember(actorKeyString(actor), route.node);
    }
    return route;
  }

  async #readHeartbeat(node: string): Promise<Heartbeat | undefined> {
    try {
      const object = await this.options.bucket.get(nodeKey(node));
      return object ? decodeHeartbeat(object.body, nodeKey(node)) : undefined;
    } catch (error) {
      this.options.log.debug("could not read a holder's heartbeat", {
        node,
        error: String(error),
      });
      return undefined;
    }
  }

  #route(
    actor: ActorKey,
    forwarded: boolean,
    holdsHere: (actor: ActorKey) => boolean,
    fresh: boolean,
    read?: { node: string; heartbeat: Heartbeat },
  ): Promise<Route> {
    const { ttlMs } = this.options.timing;
    const heartbeatOf = (node: string) =>
      read?.node === node ? read.heartbeat : this.membership.peer(node)?.heartbeat;
    return routeRequest(
      {
        nodeId: this.options.nodeId,
        holdsHere,
        readRecord: (a) => this.options.ownership.read(a),
        isLive: (node) => {
          const heartbeat = heartbeatOf(node);
          return heartbeat !== undefined && isLive(heartbeat, this.options.clock.now(), ttlMs);
        },
        frees: (record) => this.#frees(heartbeatOf(record.node), record),
        addressOf: (node) => this.#addressOf(heartbeatOf(node)),
        whyNoAddress: (node) => this.#whyNoAddress(node, heartbeatOf(node)),
        isSuspected: (node) => this.#isSuspected(node, heartbeatOf(node)),
        rememberedHolder: (a) => this.holders.holderOf(actorKeyString(a)),
      },
      actor,
      forwarded,
      fresh,
    );
  }

  /**
   * A live node this node could not open a connection to is suspected until
   * a lease write of it dated more than twice the allowed skew after the
   * failure shows it alive; then not again for {@linkcode SUSPECT_AGAIN_AFTER_MS}.
   */
  #isSuspected(node: string, heartbeat: Heartbeat | undefined): boolean {
    const suspicion = this.#suspected.get(node);
    if (!suspicion || suspicion.clearedAt !== undefined) return false;
    if (heartbeat && heartbeat.at > suspicion.since + 2 * this.options.timing.skewMs) {
      suspicion.clearedAt = this.options.clock.monotonic();
      this.options.log.info("a suspected node wrote its lease again", { node });
      return false;
    }
    return true;
  }

  #suspect(node: string) {
    const earlier = this.#suspected.get(node);
    const now = this.options.clock.monotonic();
    if (earlier && earlier.clearedAt === undefined) return;
    if (earlier?.clearedAt !== undefined && now - earlier.clearedAt < SUSPECT_AGAIN_AFTER_MS) {
      return;
    }
    this.#suspected.delete(node);
    if (this.#suspected.size >= MAX_SUSPECTED_NODES) {
      this.#suspected.delete(this.#suspected.keys().next().value!);
    }
    this.#suspected.set(node, { since: this.options.clock.now(), clearedAt: undefined });
    this.options.log.warn("could not open a connection to a live node: its actors' GETs are kept", {
      node,
    });
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
    const path = actorPath(actor, request);
    const result = await this.#forwarderFor(address).forwardStreamed(address, {
      method: request.method,
      path,
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
    this.holders.forget(actorKeyString(actor), node);
    if (result.kind === "timeout") {
      return {
        kind: "failed",
        status: 504,
        message: `the actor's node ${node} did not answer within 30 s`,
      };
    }
    this.options.log.warn("forwarding failed", { node, address, reason: result.reason });
    // A refused handshake proves the peer up: it is not suspected for it.
    if (!result.written && !(result.unansweredNew && isTls(address))) this.#suspect(node);
    return {
      kind: "failed",
      status: 503,
      message: "the actor's node did not answer; retry",
      unsent: !result.written,
    };
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
      if (!this.options.signCall) throw new Error("this node cannot sign calls");
      signature = this.options.signCall({
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
    let result = await send();
    if (result.kind === "unreachable" && result.unansweredNew && isTls(address)) {
      // The peer refused this node's certificate (it saw this node's
      // heartbeat expire) and read nothing: once this node's next heartbeat
      // landed and two periods passed, it has seen it live again.
      const { periodMs } = this.options.timing;
      this.options.log.info("a peer refused this node's certificate; the call waits to retry", {
        node,
      });
      const landed = await this.lease.writeLanded(this.options.clock.monotonic(), 2 * periodMs);
      if (!landed) {
        return {
          kind: "not-run",
          error:
            `node ${node} refused this node's certificate (this node's heartbeat did not land)`,
        };
      }
      await this.options.clock.sleep(2 * periodMs);
      result = await send();
      if (result.kind === "unreachable" && result.unansweredNew) {
        return { kind: "not-run", error: `node ${node} refused this node's certificate` };
      }
    }
    if (result.kind === "response") return this.#answered(result, actor, node);
    // A call's body is in hand: only a stream could be refused on the way.
    if (result.kind === "body-refused") return { kind: "not-run", error: result.reason };
    this.holders.forget(actorKeyString(actor), node);
    if (result.kind === "timeout") {
      return { kind: "not-run", error: `the actor's node ${node} did not answer within 30 s` };
    }
    this.options.log.warn("a call to another node failed", {
      node,
      address,
      reason: result.reason,
    });
    if (!result.written && !(result.unansweredNew && isTls(address))) this.#suspect(node);
    return { kind: "not-run", error: `the actor's node ${node} did not answer; retry` };
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
      this.holders.forget(actorKeyString(actor), node);
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

  /**
   * After the node released its actors: writes the heartbeat `released`
   * and stops watching.
   */
  async stop(): Promise<void> {
    this.membership.close();
    await this.lease.release().catch(() => false);
    this.lease.close();
    await this.forwarder.close();
    await this.tlsForwarder?.close();
  }
}
