/**
 * What one run of the simulator is: its options, the shape and faults its
 * seed draws (swarm testing), the streams of randomness that draw them, and
 * what it reports.
 *
 * @module
 */

import type { Random } from "../src/time/clock.ts";
import type { NodeParts } from "../src/node/assemble.ts";
import type { OpKind } from "./executor_host.ts";
import type { Variant } from "./variants.ts";

/** The start of every run's time line (14 November 2023). */
export const EPOCH = 1_700_000_000_000;

/** How a run is made. */
export interface SimOptions {
  seed: number;
  /** A deliberately broken variant of the code; the real code when absent. */
  variant?: Variant;
  /** Virtual length of the run, ms, the final quiet phase included (default 300 s). */
  durationMs?: number;
  /** Lines of trace kept for a failure's report (default 200). */
  traceLines?: number;
  /** Receives every trace line as it is written (`--trace`). */
  echo?: (line: string) => void;
  /** The node lease ttl (default 10 s, the spec's). */
  ttlMs?: number;
  /** Overrides the number of nodes the seed draws. */
  nodes?: number;
  /** Known violations of the real code (sim/known.ts) fail the run too. */
  strict?: boolean;
  /**
   * In storms, bases and delete markers may reach the store late too, not
   * only LTX files: this shows a bug of the real code (docs/testing.md).
   */
  lateMarkers?: boolean;
  /**
   * Given each node's parts as soon as the node is built, before the
   * simulator watches it (test/sim/frozen_parts_test.ts freezes them: the
   * simulator must watch through the parts' observers, not by replacing
   * their methods).
   */
  built?: (parts: NodeParts) => void;
}

/** An invariant that did not hold. */
export interface Violation {
  /** Which invariant: `two-holders`, `fenced-while-valid`, … (docs/testing.md). */
  kind: string;
  message: string;
  /** Virtual ms since the start of the run. */
  at: number;
}

/** What a seed drew: the cluster's shape and which faults it injects. */
export interface Swarm {
  nodes: number;
  actors: number;
  /** Client requests per second, all nodes together. */
  clientRate: number;
  /** An actor with no event this long hibernates (released). */
  idleMs: number;
  /** Mean time between two injected faults. */
  chaosGapMs: number;
  faults: {
    crash: boolean;
    stop: boolean;
    pause: boolean;
    zombie: boolean;
    partition: boolean;
    /** Partitions between two nodes (the bucket still reachable), one way or both. */
    netsplit: boolean;
    /** One node leaves for good when the quiet phase begins (its actors must be freed). */
    retire: boolean;
    storm: boolean;
    outage: boolean;
  };
  /** Upper bound of the bucket's latency when calm, ms. */
  calmLatencyMs: number;
  /** Upper bound of the one-way delay between two nodes, ms (a tenth of the packets up to 20 times it). */
  peerLatencyMs: number;
  /** Shares of the kinds of client requests (they add up to 1). */
  ops: Record<OpKind, number>;
  /** `--history-retention-secs`, ms: collection after each snapshot keeps what is younger. */
  retentionMs: number;
  /** Chances that a crash also empties the machine's data directory, or loses its power. */
  disk: { emptyDir: number; powerLoss: number };
  /** Executors of each node (`--executors`): one, or two that share its actors. */
  executors: number;
  /** `--db-idle-secs`, ms: an idle database is closed (its actor may stay resident). */
  databaseIdleMs: number;
  /**
   * WebSocket clients open at once (0: none), the rooms they open sockets to
   * (actors of their own, which the clients' occasional reads through any
   * node may take elsewhere), and the mean gap between a client's messages.
   */
  sockets: { clients: number; rooms: number; messageGapMs: number };
  /**
   * Clients that set alarms (0: none), each one every `gapMs` on average,
   * due from 5 s before to 30 s after it is sent; alarms whose due time is
   * a multiple of `failEvery` ms fail their first two firings.
   */
  alarms: { setters: number; gapMs: number; failEvery: number };
  /**
   * The deploy client (sim/deploys.ts): a new version of the app every
   * `gapMs` on average, each class's component changed with chance `change`.
   */
  deploys: { gapMs: number; change: number };
}

/** Counts of what happened. */
export interface Stats {
  events: number;
  requests: number;
  served: number;
  /** Requests another node answered (forwarded by the node asked). */
  forwarded: number;
  /** Forwards sent (ClusterPlane.forward), and how many ended without the peer's answer. */
  forwards: number;
  forwardFailures: number;
  /** Forwards answered "not held": the peer did not hold the actor, nothing ran there. */
  notHeld: number;
  /** The longest forward, ms, the forwarding process's pauses left out. */
  longestForwardMs: number;
  /** Kept requests (failover waits), by how they ended. */
  kept: Record<string, number>;
  /** The longest kept request that ended without an answer (given up), ms. */
  longestGiveUpMs: number;
  netsplits: number;
  /**
   * Requests for an actor its node's heartbeat freed, at a healthy node in
   * calm weather, and how many of those saw the takeover within its bound.
   */
  takeoversAwaited: number;
  takeoversSeen: number;
  /** Requests whose client left before the answer. */
  clientsLeft: number;
  unavailable: number;
  refused: number;
  takes: number;
  releases: number;
  actorEvents: number;
  fences: number;
  leasesLost: number;
  leaseExpiries: number;
  idInUse: number;
  starts: number;
  crashes: number;
  stops: number;
  pauses: number;
  zombies: number;
  partitions: number;
  storms: number;
  outages: number;
  clockSteps: number;
  /** Last write to fence, ms, of each dead or paused node fenced. */
  takeoverDelays: number[];
  /** The same, for the fences of dead nodes with the bucket reachable throughout. */
  calmTakeoverDelays: number[];
  reads: number;
  plainWrites: number;
  durableWrites: number;
  /** Durable writes acknowledged (their upload landed and the hold stood). */
  durableAcked: number;
  deletes: number;
  /** Replicas opened (restored, or found current). */
  restores: number;
  /** Replicas that could not be opened (the bucket did not answer, or a first snapshot failed). */
  restoreFailures: number;
  emptyDirs: number;
  powerLosses: number;
  /** Chains restored and compared with their owner's database (checkpoints and the end). */
  chainChecks: number;
  /**
   * Checks where an earlier generation's late upload had landed on top of a
   * hold that had written nothing yet (docs/testing.md): counted, not failed.
   */
  lateOverUnwrittenHold: number;
  /** Socket events sent to executors. */
  socketEvents: number;
  /** Sockets the clients opened, and upgrades refused. */
  socketsOpened: number;
  socketsRefused: number;
  /** Messages the socket clients sent, and echoes they got back. */
  socketMessagesSent: number;
  socketEchoes: number;
  /** How the clients' sockets closed, by code. */
  socketCloses: Record<string, number>;
  /** Alarm sets acknowledged, successful on-alarms, and firings again of one alarm (each explained by a fault). */
  alarmsSet: number;
  alarmsFired: number;
  alarmRefirings: number;
  /** Versions the deploy client moved `current` to, the first included. */
  versionsDeployed: number;
  /** Versions applied by the nodes' followers, every process together, and by node. */
  versionsApplied: number;
  appliedByNode: Record<string, number>;
  /** Events refused because the actor ran a later version than the executor's (503, `behind`). */
  behindRefusals: number;
  /** Starts that ended because the bucket did not answer the check of the tenant's apps. */
  tenantCheckFailures: number;
}

/** The outcome of one run. */
export interface SimResult {
  seed: number;
  variant: string | undefined;
  ok: boolean;
  violation: Violation | undefined;
  /** The last lines of the trace. */
  trace: string[];
  /** Digest of the whole trace: equal for two runs of one seed. */
  digest: string;
  /** Virtual ms simulated. */
  virtualMs: number;
  swarm: Swarm;
  stats: Stats;
  /** Known violations of the real code seen (not failing the run unless `strict`), by kind. */
  known: Record<string, { count: number; first: Violation }>;
}

/** The default virtual length of a run. */
export const DEFAULT_DURATION_MS = 300_000;

/** Sub-streams of a seed, so that one kind of draw does not shift the others. */
export const Stream = {
  Settings: 1,
  Chaos: 2,
  Clients: 3,
  Network: 4,
  Tokens: 5,
  Clocks: 6,
  Bucket: 7,
  Disk: 8,
  Ops: 9,
  Peers: 10,
  Waits: 11,
  Sockets: 12,
  Alarms: 13,
  Deploys: 14,
  Sleepers: 15,
} as const;

/** The seed of one sub-stream of a run's seed. */
export function streamSeed(seed: number, stream: number): number {
  let h = Math.imul((seed >>> 0) ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(stream, 0xc2b2ae35);
  h ^= h >>> 16;
  h = Math.imul(h, 0x7feb352d);
  h ^= h >>> 15;
  h = Math.imul(h, 0x846ca68b);
  return (h ^ (h >>> 16)) >>> 0;
}

/**
 * The shape of a run from its settings stream: nodes, actors, load, the
 * faults it injects and how hard, and the node settings it runs with.
 */
export function drawSwarm(r: Random, nodesOverride: number | undefined): Swarm {
  const on = () => r.next() < 0.65;
  const nodes = nodesOverride ?? 2 + Math.floor(r.next() * 4);
  return {
    nodes,
    actors: 2 + Math.floor(r.next() * 10),
    clientRate: 1 + r.next() * 15,
    idleMs: 2_000 + r.next() * 40_000,
    chaosGapMs: 2_000 + r.next() * 15_000,
    faults: {
      crash: on(),
      stop: on(),
      pause: on(),
      zombie: r.next() < 0.3,
      partition: on(),
      netsplit: nodes > 1 && on(),
      retire: r.next() < 0.35,
      storm: on(),
      outage: on(),
    },
    calmLatencyMs: 1 + r.next() * 15,
    ops: drawOps(r),
    retentionMs: [0, 30_000, 3_600_000][Math.floor(r.next() * 3)],
    disk: { emptyDir: r.next() * 0.4, powerLoss: r.next() * 0.4 },
    peerLatencyMs: 0.1 + r.next() * (r.next() < 0.3 ? 200 : 5),
    executors: r.next() < 0.5 ? 1 : 2,
    // Half the runs close idle databases soon, with their actors resident.
    databaseIdleMs: r.next() < 0.5 ? Math.round(1_000 + r.next() * 9_000) : 3_600_000,
    // Drawn last, so that the settings drawn before sockets were simulated stay as they were.
    sockets: {
      clients: r.next() < 0.75 ? 1 + Math.floor(r.next() * 8) : 0,
      rooms: 1 + Math.floor(r.next() * 3),
      messageGapMs: 200 + r.next() * 20_000,
    },
    // After sockets, for the same reason.
    alarms: {
      setters: r.next() < 0.75 ? 1 + Math.floor(r.next() * 3) : 0,
      gapMs: 500 + r.next() * 10_000,
      failEvery: 2 + Math.floor(r.next() * 4),
    },
    // After alarms, for the same reason.
    deploys: {
      gapMs: 1_000 + r.next() * 14_000,
      change: 0.3 + r.next() * 0.7,
    },
  };
}

function drawOps(r: Random): Record<OpKind, number> {
  const weights = {
    read: 0.2 + r.next(),
    write: 0.2 + r.next(),
    durable: 0.2 + r.next(),
    delete: r.next() < 0.5 ? 0 : 0.01 + r.next() * 0.04,
  };
  const sum = weights.read + weights.write + weights.durable + weights.delete;
  return {
    read: weights.read / sum,
    write: weights.write / sum,
    durable: weights.durable / sum,
    delete: weights.delete / sum,
  };
}

/** Counts of what happened, all at 0. */
export function noStats(): Stats {
  return {
    events: 0,
    requests: 0,
    served: 0,
    forwarded: 0,
    forwards: 0,
    forwardFailures: 0,
    notHeld: 0,
    longestForwardMs: 0,
    kept: {},
    longestGiveUpMs: 0,
    netsplits: 0,
    takeoversAwaited: 0,
    takeoversSeen: 0,
    clientsLeft: 0,
    unavailable: 0,
    refused: 0,
    takes: 0,
    releases: 0,
    actorEvents: 0,
    fences: 0,
    leasesLost: 0,
    leaseExpiries: 0,
    idInUse: 0,
    starts: 0,
    crashes: 0,
    stops: 0,
    pauses: 0,
    zombies: 0,
    partitions: 0,
    storms: 0,
    outages: 0,
    clockSteps: 0,
    takeoverDelays: [],
    calmTakeoverDelays: [],
    reads: 0,
    plainWrites: 0,
    durableWrites: 0,
    durableAcked: 0,
    deletes: 0,
    restores: 0,
    restoreFailures: 0,
    emptyDirs: 0,
    powerLosses: 0,
    chainChecks: 0,
    lateOverUnwrittenHold: 0,
    socketEvents: 0,
    socketsOpened: 0,
    socketsRefused: 0,
    socketMessagesSent: 0,
    socketEchoes: 0,
    socketCloses: {},
    alarmsSet: 0,
    alarmsFired: 0,
    alarmRefirings: 0,
    versionsDeployed: 0,
    versionsApplied: 0,
    appliedByNode: {},
    behindRefusals: 0,
    tenantCheckFailures: 0,
  };
}
