/**
 * A node's part in a cluster: its lease (after the node id check), its view
 * of the other nodes with the fencing duty, and where requests for actors
 * go (the decision in `routing/router.ts`, its carrying out to another node
 * in `routing/peer_forwarding.ts`).
 *
 * @module
 */

import type { Bucket } from "../bucket/bucket.ts";
import type { CallSigner } from "../security/call_signature.ts";
import { type ActorKey, actorKeyString } from "../actors/key.ts";
import { HolderMemory } from "./routing/holders.ts";
import type { Clock } from "../time/clock.ts";
import type { Logger } from "../log.ts";
import { checkNodeId } from "./node_id_check.ts";
import { NodeLease } from "./node_lease.ts";
import { Membership } from "./membership.ts";
import type { LeaseTiming } from "./lease_timing.ts";
import { decodeHeartbeat, type Heartbeat, isLive } from "./heartbeat.ts";
import { nodeKey } from "../bucket/keys.ts";
import type { OwnerRecord, OwnershipRecords } from "./ownership.ts";
import { type Route, routeRequest } from "./routing/router.ts";
import { type ForwardObserver, PeerForwarding } from "./routing/peer_forwarding.ts";
import type { Connect } from "../http/forward.ts";

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
  /** Told of each forwarded request (the simulator's bounds). */
  forwardObserver?: ForwardObserver;
  /** The simulator's planted `forward-resends`: {@linkcode PeerForwardingOptions.resendFailed}. */
  resendFailedForwards?: boolean;
  /** `--cluster-plaintext`: whether plain HTTP to peers without a listener is used. */
  plaintext: "accept" | "refuse";
  /** The WasmKeep version, published in the heartbeat. */
  version: string;
  /** `tenant/app` the node serves (`--app`), published in the heartbeat. */
  app?: string;
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

/** Also named here for src/node/policies.ts, which imports it with the plane. */
export type { CallSigner } from "../security/call_signature.ts";

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
 * The cluster side of a node.
 *
 * @example
 * ```ts
 * import { ClusterPlane, type ClusterPlaneOptions } from "./cluster_plane.ts";
 * import type { ActorHost } from "../actors/actor_host.ts";
 * declare const options: ClusterPlaneOptions;
 * declare const host: ActorHost;
 * const plane = new ClusterPlane({ ...options });
 * await plane.start("http://10.0.0.1:8080");
 * const actor = { tenant: "default", class: "counter", name: "a" };
 * const route = await plane.route(actor, false, (actor) => host.holds(actor));
 * await plane.stop();
 * ```
 */
export class ClusterPlane {
  /** The URL peers forward requests to, published in the heartbeat from the start. */
  #address = "";

  /** The holders of actors this node forwarded for (routing/holders.ts). */
  readonly holders: HolderMemory;

  readonly lease: NodeLease;
  readonly membership: Membership;
  /** Requests and calls sent on to the peers holding their actors. */
  readonly peers: PeerForwarding;
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
        app: options.app,
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
    this.peers = new PeerForwarding({
      nodeId,
      clock,
      log,
      timing,
      membership,
      lease: this.lease,
      holders: this.holders,
      plaintext: options.plaintext,
      connect: options.connect,
      tlsConnect: options.tls?.connect,
      answerTimeoutMs: options.answerTimeoutMs,
      signCall: options.signCall,
      observer: options.forwardObserver,
      resendFailed: options.resendFailedForwards,
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
        addressOf: (node) => this.peers.addressOf(heartbeatOf(node)),
        whyNoAddress: (node) => this.peers.whyNoAddress(node, heartbeatOf(node)),
        isSuspected: (node) => this.peers.isSuspected(node, heartbeatOf(node)),
        rememberedHolder: (a) => this.holders.holderOf(actorKeyString(a)),
      },
      actor,
      forwarded,
      fresh,
    );
  }

  /**
   * After the node released its actors: writes the heartbeat `released`
   * and stops watching.
   */
  async stop(): Promise<void> {
    this.membership.close();
    await this.lease.release().catch(() => false);
    this.lease.close();
    await this.peers.close();
  }
}
