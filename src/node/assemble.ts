/**
 * One node's object graph, built once from its options and its seams (clock,
 * random, bucket, where executors run, the client listener, the connections
 * to peers): `wasmkeep serve` (through {@linkcode WasmKeepNode.start}) and
 * the simulator (sim/) both build their nodes here, so the simulator runs
 * the node that ships.
 *
 * Each part is built by its own function (src/node/parts/) from the parts
 * before it, so the assembly reads as the list of parts in the order they
 * use each other. Nothing is started here but the executors and, last, the
 * client listener; the node's lifecycle (node.ts) probes the bucket, joins
 * the cluster and stops.
 *
 * @module
 */

import type { Clock, Random } from "../time/clock.ts";
import type { Logger } from "../log.ts";
import type { Bucket } from "../bucket/bucket.ts";
import type { ExecutorPool } from "../actors/executor_pool.ts";
import type { ActorHost } from "../actors/actor_host.ts";
import { type ActorKey, DEFAULT_TENANT } from "../actors/key.ts";
import type { Relays } from "../cluster/relays.ts";
import { openFileLimit } from "../limits.ts";
import type { MetricsRegistry } from "../metrics/registry.ts";
import type { NodeCounters } from "../metrics/node_counters.ts";
import type { OwnershipRecords } from "../cluster/ownership.ts";
import type { ClusterPlane } from "../cluster/cluster_plane.ts";
import type { RequestRouting } from "../cluster/routing/request_routing.ts";
import type { LeaseTiming } from "../cluster/lease_timing.ts";
import type { FailoverWaits } from "../cluster/failover_wait.ts";
import type { LeaseDuties } from "../cluster/duties/scheduler.ts";
import type { NodeIdentity } from "../security/node_identity.ts";
import type { NodeOptions } from "./options.ts";
import { type Admission, CallSecurity, type TakeRule } from "./policies.ts";
import type { ClientListener } from "./listen.ts";
import type { ActorSockets } from "../websockets/actor_sockets.ts";
import type { UpgradeAnswer } from "../net/h1/server.ts";
import type { AlarmTimers } from "../alarms/alarm_timers.ts";
import type { AlarmSweep } from "../alarms/alarm_sweep.ts";
import type { ClassCatalog } from "../deploy/class_catalog.ts";
import type { AppFollower } from "../deploy/app_follower.ts";
import type { NodeInput, NodeSeams } from "./parts/seams.ts";
import type { Readiness } from "./parts/readiness.ts";
import { bucketPart } from "./parts/bucket_part.ts";
import { boundsPart } from "./parts/bounds_part.ts";
import { clusterPart, leaseDuties } from "./parts/cluster_part.ts";
import { TakeNotices } from "./parts/take_notices.ts";
import { actorPart, startExecutors } from "./parts/actor_part.ts";
import { deploysPart } from "./parts/deploys_part.ts";
import { routingPart } from "./parts/routing_part.ts";
import { alarmsPart } from "./parts/alarms_part.ts";
import { socketsPart } from "./parts/sockets_part.ts";
import { listenersPart } from "./parts/listeners_part.ts";

export type { NodeInput, NodeSeams } from "./parts/seams.ts";
export { Readiness } from "./parts/readiness.ts";

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
 * Builds a node: every part, wired once, in the order they use each other.
 *
 * @example
 * ```ts
 * import { assembleNode, type NodeInput, type NodeSeams } from "./assemble.ts";
 * declare const input: NodeInput;
 * declare const seams: NodeSeams;
 * const { options, catalog, dataDir, bucketUrl } = input;
 * // WasmKeepNode (node.ts) runs the parts' life from start to stop.
 * const parts = assembleNode({ options, catalog, dataDir, bucketUrl }, seams);
 * console.log(parts.listener.url);
 * ```
 */
export function assembleNode(input: NodeInput, seams: NodeSeams): NodeParts {
  const { options, catalog, follower, dataDir, bucketUrl } = input;
  const { clock, random, log } = seams;
  // A node that follows an app keys its actors by the app's tenant.
  const tenant = options.app?.tenant ?? DEFAULT_TENANT;
  const fileLimit = seams.fileLimit ?? openFileLimit();

  const store = bucketPart(input, seams);
  const calls = new CallSecurity({ nodeId: options.nodeId, clock, random, log });
  const bounds = boundsPart(options, fileLimit, log);
  const cluster = clusterPart(input, seams, { store, calls });
  // The host tells its takes to the sockets, which are made after it.
  const takes = new TakeNotices();
  const actors = actorPart(input, seams, { store, cluster, takes, fileLimit });
  const deploys = deploysPart(input, { store, cluster, actors });
  const routing = routingPart(input, seams, { store, bounds, cluster, actors, deploys });
  const alarms = alarmsPart(input, seams, { store, cluster, actors, routing }, tenant);
  const sockets = socketsPart(input, seams, {
    store,
    bounds,
    cluster,
    actors,
    routing,
    takes,
    tenant,
  });
  const listeners = listenersPart(input, seams, {
    store,
    bounds,
    cluster,
    calls,
    actors,
    deploys,
    routing,
    alarms,
    sockets,
    tenant,
  });
  // Requests are served from here on, once this returns: nothing after it throws.
  startExecutors(actors, cluster, {
    onCall: routing.onCall,
    onCount: (name, by) => store.counters.replication(name, by),
    onBucketRequests: (counts) => store.counters.bucketRequests(counts),
    socketsOf: (actor) => sockets.sockets.connections(actor),
    onSocketOutput: (message) => sockets.sockets.output(message),
    onAlarmSeen: (actor, due) => alarms.alarmTimers.seen(actor, due),
    // An actor ran a version this node has not applied yet: look for it now.
    onBehind: () => void follower?.check(),
    onExecutorReplaced: (index, unstarted) => {
      store.counters.executorReplaced();
      actors.host.executorReplaced(index, unstarted);
    },
  });
  const duties = leaseDuties(cluster.plane, alarms.alarmSweep, actors.pool, seams);

  log.info("node listening", {
    node: options.nodeId,
    url: listeners.listener.url,
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
    seamBucket: seams.bucket,
    ...store,
    ...cluster,
    catalog,
    follower,
    ...actors,
    ...routing,
    calls,
    duties,
    ...alarms,
    ...bounds,
    identity: seams.identity,
    readiness: deploys.readiness,
    ...listeners,
    relays: sockets.relays,
    sockets: sockets.sockets,
    socketsMovedAway: sockets.movedAway,
    clusterUpgrade: sockets.clusterUpgrade,
  };
}
