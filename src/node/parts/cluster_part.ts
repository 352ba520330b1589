/**
 * The node's cluster side (absent on a standalone node): its lease timing,
 * its plane (lease, membership, peers), the rule its takes follow, and the
 * duties it runs while its lease is valid.
 *
 * @module
 */

import type { ExecutorPool } from "../../actors/executor_pool.ts";
import type { AlarmSweep } from "../../alarms/alarm_sweep.ts";
import type { BucketPart } from "./bucket_part.ts";
import { ClusterPlane } from "../../cluster/cluster_plane.ts";
import { LeaseDuties } from "../../cluster/duties/scheduler.ts";
import { fencePeers } from "../../cluster/duties/fence_peers.ts";
import { type LeaseTiming, leaseTiming } from "../../cluster/lease_timing.ts";
import { tlsConnector } from "../../http/tls_connect.ts";
import { appNameString } from "../../deploy/app_name.ts";
import { VERSION } from "../../version.ts";
import {
  type CallSecurity,
  freedByHeartbeat,
  takenFromAnyId,
  type TakeRule,
  wallClockOf,
} from "../policies.ts";
import type { NodeInput, NodeSeams } from "./seams.ts";

/** The cluster side, or a standalone node's stand-ins. */
export interface ClusterPart {
  timing: LeaseTiming | undefined;
  /** The cluster side, not started; `undefined` on a standalone node. */
  plane: ClusterPlane | undefined;
  /** The rule the actor host takes with. */
  takeRule: TakeRule;
  /** Whether the node may run events and write: always, standalone; while its lease is valid. */
  leaseValid: () => boolean;
}

/**
 * Builds the cluster side from `--cluster` options; a standalone node's
 * takes take from any id.
 *
 * @example
 * ```ts
 * import { clusterPart } from "./cluster_part.ts";
 * import type { NodeInput, NodeSeams } from "./seams.ts";
 * import type { BucketPart } from "./bucket_part.ts";
 * import type { CallSecurity } from "../policies.ts";
 * declare const input: NodeInput;
 * declare const seams: NodeSeams;
 * declare const store: BucketPart;
 * declare const calls: CallSecurity;
 * const { plane, takeRule } = clusterPart(input, seams, { store, calls });
 * ```
 */
export function clusterPart(
  input: NodeInput,
  seams: NodeSeams,
  { store, calls }: { store: BucketPart; calls: CallSecurity },
): ClusterPart {
  const { bucket, ownership, processToken } = store;
  const { options } = input;
  const { clock, log, identity } = seams;
  const cluster = options.cluster;
  const baseTiming = cluster ? leaseTiming(cluster.leaseTtlMs) : undefined;
  const timing = baseTiming && (seams.planted?.timing?.(baseTiming) ?? baseTiming);
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
  const takeRule: TakeRule = plane
    ? (seams.planted?.takeRule ?? freedByHeartbeat)(plane)
    : takenFromAnyId(log);
  return { timing, plane, takeRule, leaseValid: () => !plane || plane.valid() };
}

/**
 * The duties a cluster node runs while its lease is valid (fencing peers
 * whose leases ran out, the overdue alarm sweep), and the executors' events
 * allowed to run as long as each renewed lease. A standalone node's are
 * none: it sweeps alarms itself.
 *
 * @example
 * ```ts
 * import { type ClusterPart, leaseDuties } from "./cluster_part.ts";
 * import type { NodeSeams } from "./seams.ts";
 * declare const cluster: ClusterPart;
 * declare const alarmSweep: Parameters<typeof leaseDuties>[1]; // the alarms part's sweep
 * declare const pool: Parameters<typeof leaseDuties>[2]; // the actor part's executor pool
 * declare const seams: NodeSeams;
 * const duties = leaseDuties(cluster.plane, alarmSweep, pool, seams);
 * ```
 */
export function leaseDuties(
  plane: ClusterPlane | undefined,
  alarmSweep: AlarmSweep,
  pool: ExecutorPool,
  { clock, log }: NodeSeams,
): LeaseDuties {
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
  return duties;
}
