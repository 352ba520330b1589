/**
 * What the parts of one run share (world.ts builds it): the time line and
 * its trace, the run's draws, the store, the machines and their processes,
 * and how a violation ends the run.
 *
 * @module
 */

import type { ActorKey } from "../src/actors/key.ts";
import type { LeaseTiming } from "../src/cluster/lease_timing.ts";
import { seededRandom } from "../src/bucket/random.ts";
import type { Random } from "../src/time/clock.ts";
import type { ObservedBucket } from "./bucket.ts";
import type { DataChecks } from "./data.ts";
import type { RunDisk } from "./disk.ts";
import type { SimNode, SimProcess } from "./processes.ts";
import type { Scheduler } from "./scheduler.ts";
import {
  EPOCH,
  type SimOptions,
  type Stats,
  Stream,
  streamSeed,
  type Swarm,
  type Violation,
} from "./swarm.ts";
import type { Trace } from "./trace.ts";
import type { Variant } from "./variants.ts";

/** An actor of the run, with its names. */
export interface SimActor {
  key: ActorKey;
  id: string;
  short: string;
}

/** The random streams of a run, each its own so that one kind of draw does not shift the others. */
export class Draws {
  readonly settings: Random;
  readonly chaos: Random;
  readonly clients: Random;
  readonly net: Random;
  readonly tokens: Random;
  readonly peers: Random;
  readonly waits: Random;
  readonly disk: Random;
  readonly ops: Random;
  readonly clocks: Random;
  readonly bucket: Random;
  readonly sockets: Random;
  readonly alarms: Random;
  readonly deploys: Random;
  readonly sleepers: Random;

  constructor(seed: number) {
    const stream = (s: number) => seededRandom(streamSeed(seed, s));
    this.settings = stream(Stream.Settings);
    this.chaos = stream(Stream.Chaos);
    this.clients = stream(Stream.Clients);
    this.net = stream(Stream.Network);
    this.tokens = stream(Stream.Tokens);
    this.peers = stream(Stream.Peers);
    this.waits = stream(Stream.Waits);
    this.disk = stream(Stream.Disk);
    this.ops = stream(Stream.Ops);
    this.clocks = stream(Stream.Clocks);
    this.bucket = stream(Stream.Bucket);
    this.sockets = stream(Stream.Sockets);
    this.alarms = stream(Stream.Alarms);
    this.deploys = stream(Stream.Deploys);
    this.sleepers = stream(Stream.Sleepers);
  }
}

/** The state of one run, shared by its parts. */
export interface SimContext {
  readonly options: SimOptions;
  readonly seed: number;
  readonly variant: Variant | undefined;
  readonly sched: Scheduler;
  readonly trace: Trace;
  readonly draws: Draws;
  /** The lease timings the nodes run with (a variant's, if any). */
  readonly timing: LeaseTiming;
  /** The lease timings of the spec, whatever the variant (the bounds checked). */
  readonly baseTiming: LeaseTiming;
  readonly swarm: Swarm;
  readonly stats: Stats;
  readonly store: ObservedBucket;
  readonly data: DataChecks;
  readonly disk: RunDisk;
  readonly nodes: SimNode[];
  readonly actors: SimActor[];
  /** The rooms of the socket clients (not asked for by the other clients). */
  readonly rooms: SimActor[];
  /**
   * Actors only the alarm clients touch (none in runs without them): no
   * client asks for them, so once their holder is gone only a sweep finds
   * their alarms.
   */
  readonly sleepers: SimActor[];
  /** Processes not dead, paused ones included. */
  readonly procs: Set<SimProcess>;
  readonly byToken: Map<string, SimProcess>;
  readonly byName: Map<string, SimProcess>;
  /** Dead or paused processes whose actors must become free in time. */
  readonly deaths: Map<string, SimProcess>;
  /** Whether the quiet phase began: no more faults. */
  quiet: boolean;
  readonly violation: Violation | undefined;
  /** A line of the trace. */
  log(who: string, message: string): void;
  /** An invariant did not hold: the run stops. */
  fail(kind: string, message: string): void;
}

/** Virtual ms since the start of the run. */
export function elapsed(ctx: SimContext): number {
  return ctx.sched.now - EPOCH;
}

/** An exponential draw of mean `mean`. */
export function exp(r: Random, mean: number): number {
  return -Math.log(1 - r.next()) * mean;
}

/** `class/name` of an actor, for the trace. */
export function short(key: ActorKey): string {
  return `${key.class}/${key.name}`;
}
