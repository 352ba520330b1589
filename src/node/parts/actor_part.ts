/**
 * The node's actors: the executor pool (processes that run the events) and
 * the actor host (which holds actors, queues their events, and takes them
 * under the cluster's rule), with their gauges.
 *
 * @module
 */

import { ActorHost } from "../../actors/actor_host.ts";
import { ExecutorPool, type ExecutorPoolEvents } from "../../actors/executor_pool.ts";
import { maxOpenDatabases } from "../../limits.ts";
import { ownershipHolds, wallClockOf } from "../policies.ts";
import type { BucketPart } from "./bucket_part.ts";
import type { ClusterPart } from "./cluster_part.ts";
import type { TakeNotices } from "./take_notices.ts";
import type { NodeInput, NodeSeams } from "./seams.ts";

/** The executors and the host over them. */
export interface ActorPart {
  pool: ExecutorPool;
  host: ActorHost;
}

/**
 * Builds the pool (not started) and the host; every take is told to
 * `takes`. A new version's classes reach the executors before any request
 * sees its rules.
 *
 * @example
 * ```ts
 * import { actorPart } from "./actor_part.ts";
 * import type { NodeInput, NodeSeams } from "./seams.ts";
 * import type { BucketPart } from "./bucket_part.ts";
 * import type { ClusterPart } from "./cluster_part.ts";
 * import type { TakeNotices } from "./take_notices.ts";
 * import { openFileLimit } from "../../limits.ts";
 * declare const input: NodeInput;
 * declare const seams: NodeSeams;
 * declare const store: BucketPart;
 * declare const cluster: ClusterPart;
 * declare const takes: TakeNotices;
 * const fileLimit = openFileLimit();
 * const { pool, host } = actorPart(input, seams, { store, cluster, takes, fileLimit });
 * ```
 */
export function actorPart(
  input: NodeInput,
  seams: NodeSeams,
  { store, cluster, takes, fileLimit }: {
    store: BucketPart;
    cluster: ClusterPart;
    takes: TakeNotices;
    /** The open-file limit the executors' open databases are cut to. */
    fileLimit: number;
  },
): ActorPart {
  const { ownership, metrics } = store;
  const { plane, takeRule, leaseValid } = cluster;
  const { options, catalog, follower, dataDir, bucketUrl } = input;
  const { clock, log } = seams;
  const pool = new ExecutorPool({
    size: options.executors,
    startAll: plane !== undefined,
    dataDir,
    classes: catalog.specs(),
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
    // Every take is told to the actor's sockets (a take from another process is a move).
    ownershipHolds(ownership, takeRule, leaseValid, (hold) => takes.tell(hold)),
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
  return { pool, host };
}

/**
 * Starts the executors, their hooks wired: a durable write is acknowledged
 * only if it landed while this node held the actor (its record unchanged
 * since the take and, in a cluster, its lease still valid before and after
 * the check). `hooks` are the other parts' (calls, sockets, alarms, the
 * app's versions, counters).
 *
 * @example
 * ```ts
 * import { type ActorPart, startExecutors } from "./actor_part.ts";
 * import type { ClusterPart } from "./cluster_part.ts";
 * declare const actors: ActorPart;
 * declare const cluster: ClusterPart;
 * declare const hooks: Parameters<typeof startExecutors>[2];
 * startExecutors(actors, cluster, hooks); // hooks: onCall, socketsOf, …
 * ```
 */
export function startExecutors(
  { pool, host }: ActorPart,
  { leaseValid }: ClusterPart,
  hooks: Omit<ExecutorPoolEvents, "checkHold" | "onGiveUp">,
): void {
  pool.start({
    checkHold: async (actor, generation) => {
      if (!leaseValid()) return false;
      const held = await host.stillHolds(actor, generation);
      return held && leaseValid();
    },
    onGiveUp: (actor, generation) => host.gaveUp(actor, generation),
    ...hooks,
  });
}
