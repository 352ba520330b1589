/**
 * The node's alarms: its timer (alarms of actors it holds or last held,
 * fired through the routing) and the sweep of the bucket's alarm index for
 * overdue ones.
 *
 * @module
 */

import { AlarmIndex } from "../../alarms/alarm_index.ts";
import { AlarmSweep } from "../../alarms/alarm_sweep.ts";
import { AlarmTimers } from "../../alarms/alarm_timers.ts";
import { ALARM_SWEEP_MS } from "../../limits.ts";
import type { BucketPart } from "./bucket_part.ts";
import type { ClusterPart } from "./cluster_part.ts";
import type { RoutingPart } from "./routing_part.ts";
import type { ActorPart } from "./actor_part.ts";
import type { NodeInput, NodeSeams } from "./seams.ts";

/** The timer and the sweep. */
export interface AlarmsPart {
  /** The node's timer of alarms (issue 19). */
  alarmTimers: AlarmTimers;
  /** The overdue sweep of the alarm index: a lease duty in a cluster, run by the node when standalone. */
  alarmSweep: AlarmSweep;
}

/**
 * Builds the alarms: a cluster node's sweep fires what an owner did not
 * (after the lease period and grace); a standalone one is the owner of
 * everything, and looks one sweep ahead (after a restart).
 *
 * @example
 * ```ts
 * import { alarmsPart } from "./alarms_part.ts";
 * import type { NodeInput, NodeSeams } from "./seams.ts";
 * import type { BucketPart } from "./bucket_part.ts";
 * import type { ClusterPart } from "./cluster_part.ts";
 * import type { RoutingPart } from "./routing_part.ts";
 * declare const input: NodeInput;
 * declare const seams: NodeSeams;
 * declare const store: BucketPart;
 * declare const cluster: ClusterPart;
 * import type { ActorPart } from "./actor_part.ts";
 * declare const routing: RoutingPart;
 * declare const actors: ActorPart;
 * const { alarmTimers } = alarmsPart(input, seams, { store, cluster, actors, routing }, "default");
 * ```
 */
export function alarmsPart(
  { options }: NodeInput,
  seams: NodeSeams,
  { store, cluster, actors, routing }: {
    store: BucketPart;
    cluster: ClusterPart;
    actors: ActorPart;
    routing: RoutingPart;
  },
  tenant: string,
): AlarmsPart {
  const { clock, log } = seams;
  const { counters, metrics } = store;
  const alarmTimers = new AlarmTimers({
    clock,
    log,
    fire: (key, due) => routing.routing.routeAlarm(key, due),
    // A standalone node starts executors on first use: the firing should not wait for one.
    warm: (key) => actors.pool.warm(key),
    retryMaxMs: options.alarmRetryMaxMs,
    onFired: (by) => counters.alarmFired(by),
    onRetry: () => counters.alarmRetried(),
    observer: seams.observers?.alarmTimers,
  });
  const alarmSweep = new AlarmSweep({
    index: new AlarmIndex(store.bucket),
    timers: alarmTimers,
    clock,
    log,
    tenants: () => [tenant],
    // A cluster node fires what its owner did not; a standalone one is the
    // owner of everything, and looks one sweep ahead (after a restart).
    graceMs: seams.planted?.alarmSweepGraceMs ??
      (cluster.timing ? cluster.timing.fenceAfterMs : -ALARM_SWEEP_MS),
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
  return { alarmTimers, alarmSweep };
}
