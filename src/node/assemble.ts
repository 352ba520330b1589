/**
 * One node's object graph, built once from its options and its seams (clock,
 * random, bucket, where executors run, the client listener, the connections
 * to peers), each part made after what it uses: `wasmkeep serve` (through
 * {@linkcode WasmKeepNode.start}) and the simulator (sim/) both build their
 * nodes here, so the simulator runs the node that ships.
 *
 * Nothing is started here but the executors and, last, the client listener;
 * the node's lifecycle (node.ts) probes the bucket, joins the cluster and
 * stops.
 *
 * @module
 */

import type { Clock, Random } from "../time/clock.ts";
import type { Logger } from "../log.ts";
import type { Bucket } from "../bucket/bucket.ts";
import { randomHex } from "../bucket/random.ts";
import { countedBucket } from "../bucket/counted.ts";
import { ExecutorPool } from "../actors/executor_pool.ts";
import type { ExecutorLauncher } from "../actors/executor_launcher.ts";
import { ActorHost } from "../actors/actor_host.ts";
import { type ActorKey, DEFAULT_TENANT } from "../actors/key.ts";
import type { ActorRequest, EventOutcome } from "../actors/protocol.ts";
import { createCallHandler } from "../actors/call_router.ts";
import { createClientHandler } from "../http/client_handler.ts";
import type { UnreadBody } from "../http/unread_body.ts";
import { Relays } from "../cluster/relays.ts";
import type { Connect } from "../http/forward.ts";
import {
  maxClientConnections,
  maxClusterConnections,
  maxOpenDatabases,
  maxRelays,
  openFileLimit,
} from "../limits.ts";
import { MetricsRegistry } from "../metrics/registry.ts";
import { NodeCounters } from "../metrics/node_counters.ts";
import { type Hold, OwnershipRecords } from "../cluster/ownership.ts";
import { ClusterPlane } from "../cluster/cluster_plane.ts";
import type { HolderMemory } from "../cluster/routing/holders.ts";
import { RequestRouting } from "../cluster/routing/request_routing.ts";
import { type LeaseTiming, leaseTiming } from "../cluster/lease_timing.ts";
import { FailoverWaits } from "../cluster/failover_wait.ts";
import { LeaseDuties } from "../cluster/duties/scheduler.ts";
import { fencePeers } from "../cluster/duties/fence_peers.ts";
import { tlsConnector } from "../http/tls_connect.ts";
import type { NodeIdentity } from "../security/node_identity.ts";
import { VERSION } from "../version.ts";
import { NODE_DEFAULTS, type NodeOptions } from "./options.ts";
import {
  Admission,
  CallSecurity,
  freedByHeartbeat,
  ownershipHolds,
  takenFromAnyId,
  type TakeRule,
  wallClockOf,
} from "./policies.ts";
import type { ClientListen, ClientListener } from "./listen.ts";
import { ActorSockets, CLOSE } from "../websockets/actor_sockets.ts";
import { movedSince } from "../websockets/owner_sweep.ts";
import { relayedSocketAcceptor, socketOpener, type SocketUpgrade } from "../websockets/upgrade.ts";
import type { UpgradeAnswer } from "../net/h1/server.ts";
import { AlarmIndex } from "../alarms/alarm_index.ts";
import { AlarmTimers } from "../alarms/alarm_timers.ts";
import { AlarmSweep } from "../alarms/alarm_sweep.ts";
import type { HandedAlarm } from "../alarms/alarm_handover.ts";
import { ALARM_SWEEP_MS } from "../limits.ts";
import type { ClassCatalog } from "../deploy/class_catalog.ts";
import type { AppFollower } from "../deploy/app_follower.ts";
import { ExistingActors } from "../deploy/existing_actors.ts";
import { appNameString } from "../deploy/app_name.ts";
import type { NodeObservers } from "./observers.ts";

/** What a node is built from besides its options: its seams. */
export interface NodeSeams {
  clock: Clock;
  random: Random;
  log: Logger;
  bucket: Bucket;
  /** Listens for clients with the node's handler; the node's URL comes from it. */
  listen: ClientListen;
  /** Where executors run; by default processes of this program. */
  launcher?: ExecutorLauncher;
  /** Plain connections to peers; by default TCP. */
  connect?: Connect;
  /**
   * Switches a client's upgrade to a WebSocket; by default
   * `Deno.upgradeWebSocket` (the simulator's client port is not `Deno.serve`).
   */
  upgradeSocket?: SocketUpgrade;
  /** The cluster listener's certificate and key (with `cluster.listener`). */
  identity?: NodeIdentity;
  /** The open-file limit the node's bounds are cut to; by default the process's. */
  fileLimit?: number;
  /** This process's token in the bucket; by default 16 hex digits drawn from `random`. */
  processToken?: string;
  /** Whoever watches the node's parts (the simulator), each part's observer given to it. */
  observers?: NodeObservers;
  /**
   * Deliberately broken variants for the simulator (sim/variants.ts): each a
   * parameter the real code takes. Absent in `serve`.
   */
  planted?: {
    /** Lease timings other than the ttl's. */
    timing?: (timing: LeaseTiming) => LeaseTiming;
    /** Another take rule than {@linkcode freedByHeartbeat}. */
    takeRule?: (plane: ClusterPlane) => TakeRule;
    /** How long a forwarded request waits for its answer (30 s by the spec). */
    answerTimeoutMs?: number;
    /** Another memory of holders than {@linkcode HolderMemory}. */
    holders?: () => HolderMemory;
    /**
     * The node never notices that a room with sockets here moved: its takes
     * are told to the sockets as if each replaced nobody's record, and the
     * read before a message says it did not move.
     */
    socketsIgnoreMoves?: boolean;
    /** The alarm sweep's grace instead of the lease period plus grace. */
    alarmSweepGraceMs?: number;
    /** A forward that failed is sent once more, although it may have been written. */
    resendForwards?: boolean;
  };
}

/** A built node's parts, for its lifecycle (node.ts) and whoever watches it (sim/). */
export interface NodeParts {
  options: NodeOptions;
  /** The data directory, resolved. */
  dataDir: string;
  bucketUrl: string;
  clock: Clock;
  random: Random;
  log: Logger;
  /** The bucket, its requests counted (`wasmkeep_bucket_requests_total`). */
  bucket: Bucket;
  /** The bucket as the seams gave it, uncounted (what kind of store it is). */
  seamBucket: Bucket;
  metrics: MetricsRegistry;
  counters: NodeCounters;
  processToken: string;
  ownership: OwnershipRecords;
  /** The cluster side, not started; `undefined` on a standalone node. */
  plane: ClusterPlane | undefined;
  /** The classes served now, with their rules. */
  catalog: ClassCatalog;
  /** The follower of the app (`--app`), started by the lifecycle once the node is ready. */
  follower: AppFollower | undefined;
  /** The take rule its actor host takes with. */
  takeRule: TakeRule;
  timing: LeaseTiming | undefined;
  pool: ExecutorPool;
  host: ActorHost;
  waits: FailoverWaits;
  routing: RequestRouting;
  calls: CallSecurity;
  duties: LeaseDuties;
  /** The node's timer of alarms (issue 19). */
  alarmTimers: AlarmTimers;
  /** The overdue sweep of the alarm index: a lease duty in a cluster, run by the node when standalone. */
  alarmSweep: AlarmSweep;
  admission: Admission;
  /** Cluster listener connections at most (0 without one). */
  clusterConnections: number;
  identity: NodeIdentity | undefined;
  /** Why the node is not ready, as the handlers answer it; the lifecycle sets it. */
  readiness: Readiness;
  /** The client listener's handler and the cluster listener's. */
  handler: (request: Request) => Promise<Response>;
  clusterHandler: (request: Request) => Promise<Response>;
  listener: ClientListener;
  /** The upgrades this node relays to peers, cut together when trust in a peer ends. */
  relays: Relays;
  /** The WebSockets of the actors this node serves. */
  sockets: ActorSockets;
  /** Whether another node took an actor since its sockets' last event ran here. */
  socketsMovedAway: (key: ActorKey) => Promise<boolean>;
  /** The cluster listener's upgrades: WebSockets relayed here by peers (a cluster node). */
  clusterUpgrade: ((request: Request) => Promise<UpgradeAnswer>) | undefined;
}

/**
 * Why a node is not ready: set by its lifecycle as it goes (starting,
 * checking the bucket, joining, stopping), and a cluster node is not ready
 * while its lease is not valid.
 *
 * @example
 * ```ts
 * import { Readiness } from "./assemble.ts";
 * const readiness = new Readiness(undefined);
 * readiness.set(undefined);
 * console.log(readiness.reason()); // undefined: ready
 * ```
 */
export class Readiness {
  #reason: string | undefined = "starting";
  #stopping = false;

  /**
   * `blocked`: why the node's other parts keep it from being ready (its
   * app's version cannot be applied), checked after the lifecycle's reason.
   */
  constructor(
    readonly plane: ClusterPlane | undefined,
    readonly blocked: () => { reason: string; servesRequests: boolean } | undefined = () =>
      undefined,
  ) {}

  /** The reason the lifecycle gives now, `undefined` once it is done starting. */
  set(reason: string | undefined): void {
    this.#reason = reason;
  }

  /** From now on the node is stopping. */
  stopping(): void {
    this.#stopping = true;
  }

  /** Whether the start is over (the node served or serves). */
  get started(): boolean {
    return this.#reason === undefined;
  }

  /**
   * Why `/_wasmkeep/ready` says not ready, or `undefined`: {@linkcode reason},
   * or what keeps the node from being ready while it still serves (a
   * version of its app it cannot apply, beside the one it keeps).
   */
  readyReport(): string | undefined {
    return this.reason() ?? this.blocked()?.reason;
  }

  /** Why the node is not ready, or `undefined`. */
  reason(): string | undefined {
    if (this.#stopping) return "stopping";
    if (this.#reason) return this.#reason;
    const blocked = this.blocked();
    if (blocked && !blocked.servesRequests) return blocked.reason;
    if (this.plane && !this.plane.valid()) {
      return "the node lease is not valid (its heartbeat did not land)";
    }
    return undefined;
  }
}

/** What is made before the assembly: the options, their classes and where the node lives. */
export interface NodeInput {
  options: NodeOptions;
  /** The classes served now (components loaded, or the simulator's), with their rules. */
  catalog: ClassCatalog;
  /** With `options.app`: the follower of the app, which replaces the catalog's version (not started). */
  follower?: AppFollower;
  /** The data directory, resolved. */
  dataDir: string;
  bucketUrl: string;
}

/** The 503 of an event whose class lacks a required value (`--requires`), or `undefined`. */
function unsetRequired(catalog: ClassCatalog, key: ActorKey): Promise<EventOutcome> | undefined {
  const missing = catalog.missing(key.class);
  if (!missing) return undefined;
  return Promise.resolve({
    kind: "failed",
    status: 503,
    message: `class '${key.class}' is missing required values (${
      missing.join(", ")
    }): it runs once they are set; retry`,
  });
}

/**
 * Builds a node: every part, wired once, in the order they use each other.
 *
 * @example
 * ```ts ignore
 * const parts = assembleNode({ options, classes, dataDir, bucketUrl }, seams);
 * const node = WasmKeepNode.fromParts(parts);
 * ```
 */
export function assembleNode(input: NodeInput, seams: NodeSeams): NodeParts {
  const { options, catalog, follower, dataDir, bucketUrl } = input;
  const classes = catalog.specs();
  // A node that follows an app keys its actors by the app's tenant.
  const tenant = options.app?.tenant ?? DEFAULT_TENANT;
  const { clock, random, log } = seams;
  const fileLimit = seams.fileLimit ?? openFileLimit();
  const metrics = new MetricsRegistry();
  // Every counter, with each value of its labels, is exported at 0 from now.
  const counters = new NodeCounters(metrics, classes.map((c) => c.className), {
    cluster: options.cluster !== undefined,
  });
  const bucket = countedBucket(seams.bucket, (op, area) => counters.bucketRequest(op, area));
  const processToken = seams.processToken ?? randomHex(random, 8);
  const ownership = new OwnershipRecords({
    bucket,
    clock,
    nodeId: options.nodeId,
    processToken,
    log,
    observer: seams.observers?.ownership,
  });
  const calls = new CallSecurity({ nodeId: options.nodeId, clock, random, log });

  const clusterConnections = options.cluster?.listener ? maxClusterConnections(fileLimit) : 0;
  // A relay's connection to the owner is its own file; its client's holds a place.
  const relayConnections = options.cluster ? maxRelays(fileLimit) : 0;
  const requested = options.maxConnections ?? NODE_DEFAULTS.maxConnections;
  const admission = new Admission(
    maxClientConnections(requested, fileLimit, clusterConnections + relayConnections),
  );
  if (admission.max < requested) {
    log.warn("--max-connections lowered to fit the open-file limit", {
      requested,
      max_connections: admission.max,
      open_file_limit: fileLimit,
    });
  }

  const cluster = options.cluster;
  const baseTiming = cluster ? leaseTiming(cluster.leaseTtlMs) : undefined;
  const timing = baseTiming && (seams.planted?.timing?.(baseTiming) ?? baseTiming);
  const identity = seams.identity;
  const plane = cluster && timing
    ? new ClusterPlane({
      bucket,
      clock,
      log,
      nodeId: options.nodeId,
      processToken,
      timing,
      tls: cluster.listener && identity
        ? {
          clusterAddress: cluster.listener.advertise,
          fingerprint: identity.fingerprint,
          connect: (pinFor) => tlsConnector({ identity, pinFor }),
        }
        : undefined,
      connect: seams.connect,
      answerTimeoutMs: seams.planted?.answerTimeoutMs,
      forwardObserver: seams.observers?.forwards,
      resendFailedForwards: seams.planted?.resendForwards,
      holders: seams.planted?.holders?.(),
      plaintext: cluster.plaintext,
      version: VERSION,
      app: options.app && appNameString(options.app),
      ownership,
      signCall: calls.sign,
    })
    : undefined;
  const readiness = new Readiness(plane, () => {
    const reason = follower?.notReady();
    // A node that applied a version serves it while it cannot apply the next.
    return reason === undefined ? undefined : { reason, servesRequests: !!follower!.applied };
  });
  const leaseValid = () => !plane || plane.valid();
  const takeRule = plane
    ? (seams.planted?.takeRule ?? freedByHeartbeat)(plane)
    : takenFromAnyId(log);

  const ignoreMoves = seams.planted?.socketsIgnoreMoves === true;
  const tookAs = (hold: Hold): Hold => ignoreMoves ? { ...hold, previous: undefined } : hold;
  const pool = new ExecutorPool({
    size: options.executors,
    dataDir,
    classes,
    deploySeq: catalog.seq,
    deployLine: catalog.version.line ?? "",
    maxOpenDatabases: maxOpenDatabases(fileLimit),
    databaseIdleMs: options.databaseIdleMs,
    eventTimeoutMs: options.eventTimeoutMs,
    logLevel: options.logLevel,
    clock,
    log,
    launcher: seams.launcher,
    // A standalone node's bucket is on its own disk: replicating into it
    // would protect nothing (ADR 0005).
    replicate: plane !== undefined,
    bucketUrl,
    nodeId: options.nodeId,
    historyRetentionMs: options.historyRetentionMs,
    maxSocketMessageBytes: options.maxSocketMessageBytes,
  });
  // The executors get a new version's classes before any request sees its rules.
  follower?.onApplied((version) =>
    pool.setClasses(version.seq, version.line ?? "", version.classes.map((c) => c.spec))
  );
  const host = new ActorHost(
    pool,
    // Every take is told to the actor's sockets here (a take from another process is a move).
    ownershipHolds(
      ownership,
      takeRule,
      leaseValid,
      (hold) => sockets.took(hold.actor, tookAs(hold)),
    ),
    {
      maxQueuedEvents: options.maxQueuedEvents,
      maxResidentActors: options.maxResidentActors,
      idleMs: options.idleMs,
    },
    clock,
    log,
    // Events run only while the lease is valid (a cluster node), and the
    // executor runs nothing of them past its end (on the wall clock, which
    // both processes read).
    leaseValid,
    () => plane ? wallClockOf(clock, plane.lease.validUntil) : 0,
    seams.observers?.host,
  );
  metrics.gauge(
    "wasmkeep_resident_actors",
    "Actors with an instance in memory.",
    () => host.residentCount,
  );
  metrics.gauge("wasmkeep_events_in_flight", "Events running or queued.", () => host.inFlight);

  const waits = new FailoverWaits({
    clock,
    random,
    maxWaitMs: cluster?.failoverWaitMs ?? 0,
    maxKept: Math.floor(admission.max / 4),
    count: (outcome) => counters.failoverWait(outcome),
    observer: seams.observers?.waits,
  });
  const routing = new RequestRouting({
    plane,
    holdsHere: (actor) => host.holds(actor),
    // Every event this node runs (requests, calls, alarms) waits while its
    // class lacks a required value; an alarm is retried.
    dispatch: (key, request, special) =>
      unsetRequired(catalog, key) ?? host.dispatch(key, request, special),
    waits,
    log,
  });
  const alarmTimers = new AlarmTimers({
    clock,
    log,
    fire: (key, due) => routing.routeAlarm(key, due),
    retryMaxMs: options.alarmRetryMaxMs,
    onFired: (by) => counters.alarmFired(by),
    onRetry: () => counters.alarmRetried(),
    observer: seams.observers?.alarmTimers,
  });
  const alarmSweep = new AlarmSweep({
    index: new AlarmIndex(bucket),
    timers: alarmTimers,
    clock,
    log,
    tenants: () => [tenant],
    // A cluster node fires what its owner did not; a standalone one is the
    // owner of everything, and looks one sweep ahead (after a restart).
    graceMs: seams.planted?.alarmSweepGraceMs ??
      (timing ? timing.fenceAfterMs : -ALARM_SWEEP_MS),
  });
  metrics.gauge(
    "wasmkeep_alarms_armed",
    "Alarms on this node's timer (of actors it holds or last held, or found overdue).",
    () => alarmTimers.size,
  );
  metrics.gauge(
    "wasmkeep_alarms_overdue",
    "Alarms on this node's timer whose due time passed (firing, waiting for a retry or a place).",
    () => alarmTimers.overdue(),
  );
  // Socket events go to the host directly, in arrival order: the socket is on this node.
  const sockets = new ActorSockets({
    dispatch: (key, request, socket, stillWanted) =>
      host.dispatch(key, request, socket, stillWanted),
    processToken,
    log,
    clock,
    // A wake of a room whose record names another node: that node ran its
    // events meanwhile, where these sockets could not see them.
    movedAway: plane && ((key) => movedAway(key)),
    heldGeneration: (key) => host.holdOf(key)?.generation,
    maxMessageBytes: options.maxSocketMessageBytes,
    counters,
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
  /**
   * Whether another node took `key` since its sockets' last event ran here:
   * its record names that node at a later generation. Before any event of
   * them ran here (an open whose take is under way), no.
   */
  const movedAway = async (key: ActorKey): Promise<boolean> => {
    const last = sockets.lastHeld(key);
    if (host.holds(key) || last === undefined) return false;
    return !ignoreMoves && movedSince(await ownership.read(key), options.nodeId, last);
  };
  metrics.gauge(
    "wasmkeep_websockets",
    "WebSockets of actors open on this node.",
    () => sockets.count,
  );
  const relays = new Relays(Math.max(1, relayConnections));
  if (plane) {
    metrics.gauge(
      "wasmkeep_relays",
      "Sockets this node relays to the nodes holding their actors, open now.",
      () => relays.size,
    );
  }
  const routeSocket = plane &&
    ((key: ActorKey, forwarded: boolean, fresh?: boolean) =>
      plane.route(key, forwarded, (actor) => host.holds(actor), fresh));
  const openSocket = socketOpener({
    sockets,
    clock,
    upgrade: seams.upgradeSocket,
    route: routeSocket,
    keep: plane && ((...args) => routing.keepUntilTaken(...args)),
    relaying: plane && {
      upgrade: (address, node, key, request) => plane.peers.upgrade(address, node, key, request),
      relays,
      relayed: () => counters.socketRelayed(),
      fingerprintOf: (node) => plane.membership.peer(node)?.heartbeat?.fingerprint,
      clock,
      random,
    },
  });
  const clusterUpgrade = routeSocket && relayedSocketAcceptor({
    sockets,
    tenant,
    hasClass: (name) => catalog.has(name),
    route: routeSocket,
    clock,
    random,
  });
  const existing = new ExistingActors({
    held: (key) => host.holds(key),
    hasRecord: async (key) => (await ownership.read(key)) !== undefined,
  });
  const onCall = createCallHandler({
    hasClass: (name) => catalog.has(name),
    route: (target, request, call) => routing.routeCall(target, request, call),
  }, clock);
  const dispatch = async (
    key: ActorKey,
    request: ActorRequest,
    client?: { readonly signal: AbortSignal; readonly body?: UnreadBody },
  ) => {
    const outcome = await routing.route(key, request, client);
    counters.event(
      key.class,
      outcome.kind === "response" ? outcome.response.status : outcome.status,
    );
    return outcome;
  };
  const handlerContext = {
    nodeId: options.nodeId,
    tenant,
    maxBodyBytes: options.maxBodyBytes,
    hasClass: (name: string) => catalog.has(name),
    classesKnown: () => !follower || follower.applied !== undefined,
    notReadyReason: () => readiness.reason(),
    readyReport: () => readiness.readyReport(),
    dispatch,
    // Where requests may go on to another node, a long body is sent on as it is read.
    streamsBodies: plane !== undefined,
    admit: () => admission.admit(),
    access: (className: string, name: string) => catalog.access(className, name),
    missing: (className: string) => catalog.missing(className),
    exists: (key: ActorKey) => existing.exists(key),
    // A peer's clean stop hands its alarms to this node's timer.
    armAlarms: plane
      ? (alarms: HandedAlarm[]) => {
        for (const { key, due } of alarms) alarmTimers.arm(key, due, "owner");
      }
      : undefined,
  };
  const verifyCall = (request: Parameters<CallSecurity["verify"]>[0]) => calls.verify(request);
  const handler = createClientHandler({
    ...handlerContext,
    openSocket,
    renderMetrics: () => metrics.render(),
    // Refusing plain HTTP between nodes, a signed call on the client
    // listener is a client's request (no caller, internal classes refused).
    verifyCall: cluster?.plaintext === "accept" ? verifyCall : undefined,
  });
  const clusterHandler = createClientHandler({ ...handlerContext, verifyCall });
  let listener: ClientListener;
  try {
    listener = seams.listen(handler);
  } catch (error) {
    // Nothing runs yet but the host's hibernation sweep, which a drain ends.
    void host.drain(0);
    throw error;
  }
  // Requests are served from here on, once this returns: nothing after it throws.
  pool.start({
    // A durable write is acknowledged only if it landed while this node
    // held the actor: its record unchanged since the take and, in a
    // cluster, its lease still valid before and after the check.
    checkHold: async (actor, generation) => {
      if (!leaseValid()) return false;
      const held = await host.stillHolds(actor, generation);
      return held && leaseValid();
    },
    onGiveUp: (actor, generation) => host.gaveUp(actor, generation),
    onCall,
    onCount: (name, by) => counters.replication(name, by),
    onBucketRequests: (counts) => counters.bucketRequests(counts),
    socketsOf: (actor) => sockets.connections(actor),
    onSocketOutput: (message) => sockets.output(message),
    onAlarmSeen: (actor, due) => alarmTimers.seen(actor, due),
    // An actor ran a version this node has not applied yet: look for it now.
    onBehind: () => void follower?.check(),
    onExecutorReplaced: (index, unstarted) => {
      counters.executorReplaced();
      host.executorReplaced(index, unstarted);
    },
  });

  const duties = new LeaseDuties({ clock, log });
  if (plane) {
    duties.add(fencePeers(plane.membership));
    duties.add(alarmSweep.duty());
    duties.follow(plane.lease);
    // Events already sent may run as long as the renewed lease.
    plane.lease.subscribe({
      extended: (validUntil) => pool.extendLease(wallClockOf(clock, validUntil)),
    });
  }

  log.info("node listening", {
    node: options.nodeId,
    url: listener.url,
    executors: options.executors,
    open_file_limit: fileLimit,
  });
  return {
    options,
    dataDir,
    bucketUrl,
    clock,
    random,
    log,
    bucket,
    seamBucket: seams.bucket,
    metrics,
    counters,
    processToken,
    ownership,
    plane,
    catalog,
    follower,
    takeRule,
    timing,
    pool,
    host,
    waits,
    routing,
    calls,
    duties,
    alarmTimers,
    alarmSweep,
    admission,
    clusterConnections,
    identity,
    readiness,
    handler,
    clusterHandler,
    listener,
    relays,
    sockets,
    socketsMovedAway: movedAway,
    clusterUpgrade,
  };
}
