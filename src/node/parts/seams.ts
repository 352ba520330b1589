/**
 * What a node is built from: its options and classes (the input) and its
 * seams (clock, random, bucket, where executors run, the client listener,
 * the connections to peers), which the simulator gives its own.
 *
 * @module
 */

import type { Clock, Random } from "../../time/clock.ts";
import type { Logger } from "../../log.ts";
import type { Bucket } from "../../bucket/bucket.ts";
import type { ExecutorLauncher } from "../../actors/executor_launcher.ts";
import type { Connect } from "../../http/forward.ts";
import type { ClusterPlane } from "../../cluster/cluster_plane.ts";
import type { HolderMemory } from "../../cluster/routing/holders.ts";
import type { LeaseTiming } from "../../cluster/lease_timing.ts";
import type { NodeIdentity } from "../../security/node_identity.ts";
import type { ClassCatalog } from "../../deploy/class_catalog.ts";
import type { AppFollower } from "../../deploy/app_follower.ts";
import type { SocketUpgrade } from "../../websockets/upgrade.ts";
import type { NodeObservers } from "../observers.ts";
import type { NodeOptions } from "../options.ts";
import type { TakeRule } from "../policies.ts";
import type { ClientListen } from "../listen.ts";

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
    /** Another take rule than `freedByHeartbeat` (src/node/policies.ts). */
    takeRule?: (plane: ClusterPlane) => TakeRule;
    /** How long a forwarded request waits for its answer (30 s by the spec). */
    answerTimeoutMs?: number;
    /** Another memory of holders than `HolderMemory`. */
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
