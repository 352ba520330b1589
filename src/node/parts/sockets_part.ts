/**
 * The WebSockets of the actors this node serves: the sockets themselves
 * (their events go to the actor host, in arrival order), the client port's
 * opener (here, or relayed to the node holding the actor), the cluster
 * port's acceptor of relayed sockets, and the relays.
 *
 * @module
 */

import type { ActorKey } from "../../actors/key.ts";
import type { Hold } from "../../cluster/ownership.ts";
import { Relays } from "../../cluster/relays.ts";
import type { UpgradeAnswer } from "../../net/h1/server.ts";
import { ActorSockets, CLOSE } from "../../websockets/actor_sockets.ts";
import { movedSince } from "../../websockets/owner_sweep.ts";
import { relayedSocketAcceptor, socketOpener } from "../../websockets/upgrade.ts";
import type { ActorPart } from "./actor_part.ts";
import type { BoundsPart } from "./bounds_part.ts";
import type { BucketPart } from "./bucket_part.ts";
import type { ClusterPart } from "./cluster_part.ts";
import type { RoutingPart } from "./routing_part.ts";
import type { TakeNotices } from "./take_notices.ts";
import type { NodeInput, NodeSeams } from "./seams.ts";

/** The node's sockets and how they open. */
export interface SocketsPart {
  sockets: ActorSockets;
  /** Whether another node took an actor since its sockets' last event ran here. */
  movedAway: (key: ActorKey) => Promise<boolean>;
  /** The upgrades this node relays to peers, cut together when trust in a peer ends. */
  relays: Relays;
  /** Opens a client's upgrade, here or relayed (the client port's `openSocket`). */
  openSocket: ReturnType<typeof socketOpener>;
  /** The cluster listener's upgrades: WebSockets relayed here by peers (a cluster node). */
  clusterUpgrade: ((request: Request) => Promise<UpgradeAnswer>) | undefined;
}

/** What the sockets need of the node's other parts. */
export interface SocketsNeeds {
  store: BucketPart;
  bounds: BoundsPart;
  cluster: ClusterPart;
  actors: ActorPart;
  routing: RoutingPart;
  /** The host's takes, which the sockets listen to from now on. */
  takes: TakeNotices;
  tenant: string;
}

/**
 * Whether another node took an actor since its sockets' last event ran
 * here: its record names that node at a later generation. The sockets ask
 * it and it asks them (their last hold), so it is bound to them once they
 * are made.
 */
class MoveCheck {
  #sockets: ActorSockets | undefined;

  constructor(
    readonly host: ActorPart["host"],
    readonly ownership: BucketPart["ownership"],
    readonly nodeId: string,
    /** A planted variant: no move is ever seen. */
    readonly ignoreMoves: boolean,
  ) {}

  /** Binds the sockets whose last holds are read. */
  watch(sockets: ActorSockets): void {
    this.#sockets = sockets;
  }

  /** Before any event of its sockets ran here (an open whose take is under way), no. */
  async movedAway(key: ActorKey): Promise<boolean> {
    const last = this.#sockets!.lastHeld(key);
    if (this.host.holds(key) || last === undefined) return false;
    return !this.ignoreMoves && movedSince(await this.ownership.read(key), this.nodeId, last);
  }
}

/** The sockets, listening to the host's takes. */
function actorSockets(
  { options, catalog }: NodeInput,
  seams: NodeSeams,
  { store, cluster, actors, takes }: SocketsNeeds,
): Pick<SocketsPart, "sockets" | "movedAway"> {
  const { host } = actors;
  const ignoreMoves = seams.planted?.socketsIgnoreMoves === true;
  const tookAs = (hold: Hold): Hold => ignoreMoves ? { ...hold, previous: undefined } : hold;
  const moves = new MoveCheck(host, store.ownership, options.nodeId, ignoreMoves);
  // Socket events go to the host directly, in arrival order: the socket is on this node.
  const sockets = new ActorSockets({
    dispatch: (key, request, socket, stillWanted) =>
      host.dispatch(key, request, socket, stillWanted),
    processToken: store.processToken,
    log: seams.log,
    clock: seams.clock,
    // A wake of a room whose record names another node: that node ran its
    // events meanwhile, where these sockets could not see them.
    movedAway: cluster.plane && ((key) => moves.movedAway(key)),
    heldGeneration: (key) => host.holdOf(key)?.generation,
    maxMessageBytes: options.maxSocketMessageBytes,
    counters: store.counters,
    refusal: (key) => {
      if (catalog.access(key.class, key.name) === "internal") {
        return { code: CLOSE.policyViolation, reason: `class '${key.class}' is internal now` };
      }
      const missing = catalog.missing(key.class);
      return missing && {
        code: CLOSE.internalError,
        reason: `class '${key.class}' is missing required values (${missing.join(", ")})`,
      };
    },
  });
  moves.watch(sockets);
  // Every take is told to the actor's sockets (a take from another process is a move).
  takes.listen((hold) => sockets.took(hold.actor, tookAs(hold)));
  store.metrics.gauge(
    "wasmkeep_websockets",
    "WebSockets of actors open on this node.",
    () => sockets.count,
  );
  return { sockets, movedAway: (key) => moves.movedAway(key) };
}

/**
 * Builds the sockets part: a cluster node routes an upgrade as a request
 * (here, or relayed to the holder) and accepts peers' relayed ones.
 *
 * @example
 * ```ts
 * import { type SocketsNeeds, socketsPart } from "./sockets_part.ts";
 * import type { NodeInput, NodeSeams } from "./seams.ts";
 * declare const input: NodeInput;
 * declare const seams: NodeSeams;
 * declare const needs: SocketsNeeds;
 * const { sockets, openSocket } = socketsPart(input, seams, needs); // needs: store, bounds, …
 * ```
 */
export function socketsPart(input: NodeInput, seams: NodeSeams, needs: SocketsNeeds): SocketsPart {
  const { clock, random } = seams;
  const { store, bounds, cluster, actors, routing, tenant } = needs;
  const { plane } = cluster;
  const { sockets, movedAway } = actorSockets(input, seams, needs);
  const relays = new Relays(Math.max(1, bounds.relayConnections));
  if (plane) {
    store.metrics.gauge(
      "wasmkeep_relays",
      "Sockets this node relays to the nodes holding their actors, open now.",
      () => relays.size,
    );
  }
  const routeSocket = plane &&
    ((key: ActorKey, forwarded: boolean, fresh?: boolean) =>
      plane.route(key, forwarded, (actor) => actors.host.holds(actor), fresh));
  const openSocket = socketOpener({
    sockets,
    clock,
    upgrade: seams.upgradeSocket,
    route: routeSocket,
    keep: plane && ((...args) => routing.routing.keepUntilTaken(...args)),
    relaying: plane && {
      upgrade: (address, node, key, request) => plane.peers.upgrade(address, node, key, request),
      relays,
      relayed: () => store.counters.socketRelayed(),
      fingerprintOf: (node) => plane.membership.peer(node)?.heartbeat?.fingerprint,
      clock,
      random,
    },
  });
  const clusterUpgrade = routeSocket && relayedSocketAcceptor({
    sockets,
    tenant,
    hasClass: (name) => input.catalog.has(name),
    route: routeSocket,
    clock,
    random,
  });
  return { sockets, movedAway, relays, openSocket, clusterUpgrade };
}
