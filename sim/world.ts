/**
 * One simulated cluster, run from one seed: nodes running the real cluster
 * code (`ClusterPlane`: node id check, node lease, membership with fencing,
 * routing and forwarding; `OwnershipRecords`; `ActorHost` with the simulated
 * executor of `sim/executor.ts`, real SQLite and replication; the client
 * handler, `RequestRouting` and `FailoverWaits`) on one
 * {@linkcode ObservedBucket} and the network of `sim/network.ts`, clients
 * sending requests for random actors through random nodes, and faults drawn
 * from the seed: bucket latency, errors, lost answers, silent calls, slow
 * listings and outages; partitions of one machine from the bucket, and
 * between two nodes; process pauses; crashes; clean stops; restarts through
 * the id check (with the same or an empty data directory, or after a power
 * loss); a second process started while the first is frozen; skewed and
 * drifting clocks; clients that leave.
 *
 * Each seed also draws which of those faults it uses and how hard (swarm
 * testing), so that runs differ in kind, not only in detail.
 *
 * The invariants (see docs/testing.md) are checked after every event, on
 * every write the bucket applies, at every event an actor runs, and at the
 * end.
 *
 * @module
 */

import type { ActorHolds } from "../src/actors/actor_host.ts";
import { ActorHost } from "../src/actors/actor_host.ts";
import type { ExecutorPool } from "../src/actors/executor_pool.ts";
import { type ActorKey, actorKeyString } from "../src/actors/key.ts";
import type { ActorRequest } from "../src/actors/protocol.ts";
import type { MemoryFaults, TimeWindow } from "../src/bucket/memory.ts";
import { nodeKey } from "../src/bucket/keys.ts";
import { REQUEST_TIMEOUT_MS } from "../src/bucket/bounds.ts";
import { randomHex, seededRandom } from "../src/bucket/random.ts";
import { ClusterPlane, type ForwardOutcome, heartbeatFrees } from "../src/cluster/cluster_plane.ts";
import {
  defaultFailoverWaitMs,
  FailoverWaits,
  type WaitOutcome,
} from "../src/cluster/failover_wait.ts";
import { RequestRouting } from "../src/cluster/request_routing.ts";
import { createClientHandler, NODE_HEADER } from "../src/http/client_handler.ts";
import { ANSWER_TIMEOUT_MS, CONNECT_TIMEOUT_MS } from "../src/http/forward.ts";
import { decodeHeartbeat, type Heartbeat } from "../src/cluster/heartbeat.ts";
import { type LeaseTiming, leaseTiming } from "../src/cluster/lease_timing.ts";
import { NodeIdInUse } from "../src/cluster/node_id_check.ts";
import type { NodeLeaseLost } from "../src/cluster/node_lease.ts";
import { KNOWN } from "./known.ts";
import {
  decodeOwnerRecord,
  type Hold,
  type OwnerRecord,
  OwnershipRecords,
} from "../src/cluster/ownership.ts";
import { createLogger, type Logger } from "../src/log.ts";
import type { Random } from "../src/time/clock.ts";
import { VERSION } from "../src/version.ts";
import { between, ObservedBucket, ProcessBucket, type Reachability } from "./bucket.ts";
import {
  EventFailure,
  type ExecutorObserver,
  type Op,
  type OpKind,
  opOf,
  opTarget,
  type SettledActor,
  SimExecutor,
} from "./executor.ts";
import { losePower, RunDisk } from "./disk.ts";
import { DataChecks } from "./data.ts";
import {
  type ChainPosition,
  replayChain,
  type Restored,
  restoreFromStore,
  StoreView,
} from "./chain.ts";
import { HistoryError } from "../src/replication/history.ts";
import { RestoreUnavailable } from "../src/replication/restore.ts";
import { ReplicationFailed } from "../src/replication/uploader.ts";
import { MachineClock, ProcessClock, TrueClock } from "./clocks.ts";
import { type Owner, type ScheduledEvent, Scheduler } from "./scheduler.ts";
import { Trace } from "./trace.ts";
import { type LinkState, SimNetwork } from "./network.ts";
import { serveConnection } from "./http_server.ts";
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

/** The last part of every run: no new faults, every node back, then every actor asked for. */
const QUIET_MS = 50_000;

/**
 * Tolerances of the request bounds: scheduling and clock drift (±2,000 ppm
 * of 35 s is 70 ms) and, for a kept request, the answer of a look under way
 * when the wait runs out (its reads end then).
 */
const FORWARD_SLACK_MS = 200;
/**
 * A request for an actor whose holder was fenced, at a healthy node in calm
 * weather, leads to its takeover within this long (a record read and a
 * conditional write take milliseconds then).
 */
const TAKEOVER_MS = 10_000;
/** No request waits longer for its answer (see `#checkUnanswered`). */
const REQUEST_BOUND_MS = 300_000;
/**
 * At the end, after the quiet phase and the settling: a kept GET's 25 s and
 * a forward's 35 s, with room; a request older than this is one that hangs.
 */
const QUIET_REQUEST_BOUND_MS = 90_000;
const KEPT_SLACK_MS = 500;

/** Sub-streams of a seed, so that one kind of draw does not shift the others. */
const Stream = {
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
} as const;

/** Virtual time between two checks of every actor's chain against its owner's database. */
const CHECKPOINT_MS = 20_000;

/** After the final probe: time for the last uploads to land before the final check. */
const SETTLE_MS = 25_000;

function streamSeed(seed: number, stream: number): number {
  let h = Math.imul((seed >>> 0) ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(stream, 0xc2b2ae35);
  h ^= h >>> 16;
  h = Math.imul(h, 0x7feb352d);
  h ^= h >>> 15;
  h = Math.imul(h, 0x846ca68b);
  return (h ^ (h >>> 16)) >>> 0;
}

/** A machine: its id, clocks, partitions, and the process that runs on it now. */
class SimNode {
  current: SimProcess | undefined;
  incarnations = 0;
  restart: ScheduledEvent | undefined;
  partitionUntil = -Infinity;
  partitionMode: "refuse" | "silent" = "refuse";
  /** Left the cluster for good: never restarted. */
  retired = false;
  net!: Reachability;
  /** The data directory its processes use now (a process started beside a live one gets another). */
  dataDir = "";
  dataDirs = 0;
  constructor(readonly id: string, readonly machine: MachineClock) {}
}

/** One process of a node, from its start to its crash or exit. */
class SimProcess implements Owner {
  dead = false;
  paused = false;
  readonly deferred: ScheduledEvent[] = [];
  state: "starting" | "serving" | "stopping" | "exited" = "starting";
  plane: ClusterPlane | undefined;
  /** True time since which it has served without a pause or partition. */
  readySince: number | undefined;
  /** Holds its takes returned and it has not released, by actor, oldest first. */
  readonly holds = new Map<string, Hold[]>();
  clock!: ProcessClock;
  host!: ActorHost;
  ownership!: OwnershipRecords;
  bucket!: ProcessBucket;
  executor!: SimExecutor;
  dataDir!: string;
  /** The node's real client handler (src/http/client_handler.ts) over its real routing. */
  handler!: (request: Request) => Promise<Response>;
  waits!: FailoverWaits;
  /** `host:port` it listens on; its machine, as the network names it. */
  authority = "";
  machine = "";
  stopListening: () => void = () => {};
  /** Virtual ms it spent paused before its current pause, and when that began. */
  pausedMs = 0;
  pausedAt = 0;
  readonly name: string;

  constructor(readonly node: SimNode, readonly incarnation: number, readonly token: string) {
    this.name = `${node.id}#${incarnation}`;
  }

  /** When it ran events of each actor (dispatches: take and event), newest last; a minute's worth. */
  readonly #dispatches = new Map<string, { start: number; end: number }[]>();

  /** A dispatch of `actor` begins at `now`; set `end` on the span returned when it ends. */
  dispatchStarts(actor: string, now: number): { start: number; end: number } {
    const spans = (this.#dispatches.get(actor) ?? []).filter((s) => s.end > now - 60_000);
    const span = { start: now, end: Infinity };
    spans.push(span);
    this.#dispatches.set(actor, spans);
    return span;
  }

  /** How much of `[from, to]` some dispatch of `actor` was under way (their union). */
  dispatchTime(actor: string, from: number, to: number): number {
    let covered = 0;
    let reach = from;
    const spans = [...(this.#dispatches.get(actor) ?? [])].sort((a, b) => a.start - b.start);
    for (const span of spans) {
      const start = Math.max(span.start, reach);
      const end = Math.min(span.end, to);
      if (end > start) {
        covered += end - start;
        reach = end;
      }
    }
    return covered;
  }

  /** Virtual ms it has spent paused so far (its timers and events wait meanwhile). */
  pausedSoFar(now: number): number {
    return this.pausedMs + (this.paused ? now - this.pausedAt : 0);
  }

  /** The hold it acts on for `actor` now, if it believes it holds it with a valid lease. */
  belief(actor: ActorKey, id: string): Hold | undefined {
    if (this.dead || !this.plane || !this.plane.valid() || !this.host.holds(actor)) return;
    const holds = this.holds.get(id);
    return holds?.[holds.length - 1];
  }
}

/** Runs one seed. */
export async function runSeed(options: SimOptions): Promise<SimResult> {
  const world = new World(options);
  return await world.run();
}

class World {
  readonly #options: SimOptions;
  readonly #seed: number;
  readonly #variant: Variant | undefined;
  readonly #sched = new Scheduler(EPOCH);
  readonly #trace: Trace;
  readonly #timing: LeaseTiming;
  readonly #settings: Random;
  readonly #chaos: Random;
  readonly #clients: Random;
  readonly #net: Random;
  readonly #tokens: Random;
  readonly #peers: Random;
  readonly #waitDraws: Random;
  readonly #network: SimNetwork;
  /** Partitions between two nodes: from `a` to `b`, and back unless one way. */
  readonly #splits: {
    a: string;
    b: string;
    mode: "refuse" | "silent";
    oneWay: boolean;
    until: number;
  }[] = [];
  /** Client requests not answered yet, by op id: the process asked and when. */
  readonly #unanswered = new Map<number, { proc: SimProcess; at: number; paused: number }>();
  /** The node whose executor ran each client op (by op id): each runs at most once. */
  readonly #ranBy = new Map<number, string>();
  /** How long a GET is kept for a takeover: the CLI's default (25 s with the default ttl). */
  readonly #failoverWaitMs: number;
  readonly #store: ObservedBucket;
  readonly #swarm: Swarm;
  readonly #nodes: SimNode[] = [];
  readonly #actors: { key: ActorKey; id: string; short: string }[] = [];
  /** Processes not dead, paused ones included. */
  readonly #procs = new Set<SimProcess>();
  readonly #byToken = new Map<string, SimProcess>();
  readonly #byName = new Map<string, SimProcess>();
  readonly #disk: RunDisk;
  readonly #diskFaults: Random;
  readonly #opDraws: Random;
  readonly #data: DataChecks;
  /** When each process last began to wake each actor (virtual ms), by `token actor`. */
  readonly #wakes = new Map<string, number>();
  #nextWriteId = 0;
  readonly #stats: Stats = {
    events: 0,
    requests: 0,
    served: 0,
    forwarded: 0,
    forwards: 0,
    forwardFailures: 0,
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
  };
  #violation: Violation | undefined;
  readonly #known_ = new Map<string, { count: number; first: Violation }>();
  /**
   * Takes, by actor, that a known bug of the real code let through (sim/known.ts): the
   * generation they wrote and the bug.
   */
  readonly #suspectTakes = new Map<string, { generation: bigint; kind: string }[]>();
  /** Pairs of holds already reported as a known violation. */
  readonly #reported = new Set<string>();
  readonly #durationMs: number;
  readonly #quietAt: number;
  #quiet = false;
  // The bucket's weather.
  readonly #outages: TimeWindow[] = [];
  #calmFaults: MemoryFaults;
  #storm: { until: number; answerMaxMs: number; lateWriteRate: number } | undefined;
  #lastStormEnd = -Infinity;
  // Invariant state.
  /** Last live heartbeat write applied, by process token: true time. */
  readonly #lastLiveWrite = new Map<string, number>();
  readonly #fenced = new Set<string>();
  /** When each process's heartbeat was written fenced or released (true time), by token. */
  readonly #goneAt = new Map<string, number>();
  /**
   * Actors whose record names a fenced process and for which a healthy
   * node got a request in calm weather: it must take them over soon.
   */
  readonly #awaitingTakeover = new Map<
    string,
    { since: number; proc: SimProcess; holder: string; gone: string; goneAt: number; op: number }
  >();
  readonly #records = new Map<string, OwnerRecord>();
  /** Dead or paused processes whose actors must become free in time. */
  readonly #deaths = new Map<string, SimProcess>();
  readonly #bound: number;

  constructor(options: SimOptions) {
    this.#options = options;
    this.#seed = options.seed >>> 0;
    this.#variant = options.variant;
    this.#trace = new Trace(options.traceLines ?? 200);
    this.#trace.echo = options.echo;
    const base = leaseTiming(options.ttlMs);
    this.#timing = this.#variant?.timing ? this.#variant.timing(base) : base;
    // The bound of the spec's "How it works", from the real timings.
    this.#bound = base.fenceAfterMs + base.watchMs + base.periodMs + base.skewMs + 1000;
    this.#settings = seededRandom(streamSeed(this.#seed, Stream.Settings));
    this.#chaos = seededRandom(streamSeed(this.#seed, Stream.Chaos));
    this.#clients = seededRandom(streamSeed(this.#seed, Stream.Clients));
    this.#net = seededRandom(streamSeed(this.#seed, Stream.Network));
    this.#tokens = seededRandom(streamSeed(this.#seed, Stream.Tokens));
    this.#peers = seededRandom(streamSeed(this.#seed, Stream.Peers));
    this.#waitDraws = seededRandom(streamSeed(this.#seed, Stream.Waits));
    this.#failoverWaitMs = defaultFailoverWaitMs(base);
    this.#network = new SimNetwork({
      sched: this.#sched,
      latencyMs: () => this.#peerLatency(),
      link: (from, to) => this.#link(from, to),
    });
    this.#durationMs = Math.max(options.durationMs ?? DEFAULT_DURATION_MS, QUIET_MS + 10_000);
    this.#quietAt = EPOCH + this.#durationMs - QUIET_MS;
    this.#swarm = this.#drawSwarm();
    this.#calmFaults = {
      latencyMs: { min: 0.2, max: this.#swarm.calmLatencyMs },
      outages: this.#outages,
    };
    this.#store = new ObservedBucket({
      clock: new TrueClock(this.#sched),
      random: seededRandom(streamSeed(this.#seed, Stream.Bucket)),
      faults: this.#calmFaults,
    });
    this.#store.onApplied = (key, body, writer) => this.#applied(key, body, writer);
    this.#diskFaults = seededRandom(streamSeed(this.#seed, Stream.Disk));
    this.#opDraws = seededRandom(streamSeed(this.#seed, Stream.Ops));
    this.#data = new DataChecks((kind, message) => this.#fail(kind, message), () => this.#elapsed);
    this.#disk = new RunDisk(this.#seed);
  }

  /** Virtual ms since the start of the run. */
  get #elapsed(): number {
    return this.#sched.now - EPOCH;
  }

  #drawSwarm(): Swarm {
    const r = this.#settings;
    const on = () => r.next() < 0.65;
    const nodes = this.#options.nodes ?? 2 + Math.floor(r.next() * 4);
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
      ops: this.#drawOps(r),
      retentionMs: [0, 30_000, 3_600_000][Math.floor(r.next() * 3)],
      disk: { emptyDir: r.next() * 0.4, powerLoss: r.next() * 0.4 },
      peerLatencyMs: 0.1 + r.next() * (r.next() < 0.3 ? 200 : 5),
    };
  }

  #drawOps(r: Random): Record<OpKind, number> {
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

  async run(): Promise<SimResult> {
    const unhandled = (event: PromiseRejectionEvent) => {
      event.preventDefault();
      this.#fail(
        "unhandled-rejection",
        `a promise rejected with nobody to handle it: ${describe(event.reason)}`,
      );
    };
    globalThis.addEventListener("unhandledrejection", unhandled);
    try {
      this.#setUp();
      const check = () => this.#check();
      const end = EPOCH + this.#durationMs;
      // Between stretches of the time line, every actor's chain is checked.
      for (let at = EPOCH + CHECKPOINT_MS; !this.#violation; at += CHECKPOINT_MS) {
        await this.#sched.runUntil(Math.min(at, end), check);
        if (this.#violation || at >= end) break;
        this.#checkUnanswered(false);
        await this.#checkChains(false);
      }
      if (!this.#violation) await this.#finalProbe();
      if (!this.#violation) this.#checkDeaths();
      if (!this.#violation) {
        this.#log("sim", "settling: the last uploads land");
        await this.#sched.runUntil(this.#sched.now + SETTLE_MS, check);
      }
      if (!this.#violation) this.#checkUnanswered(true);
      if (!this.#violation) await this.#checkChains(true);
    } catch (e) {
      this.#fail("simulator-error", `the simulation threw: ${describe(e)}`);
    } finally {
      globalThis.removeEventListener("unhandledrejection", unhandled);
      // Nothing of this run may fire in the next one's drains, nor keep a file open.
      for (const proc of this.#procs) {
        proc.dead = true;
        proc.executor?.kill();
      }
      this.#disk.remove();
    }
    for (const node of this.#nodes) this.#stats.clockSteps += node.machine.steps;
    this.#stats.events = this.#sched.fired;
    this.#trace.add(`end ${this.#violation ? `FAIL ${this.#violation.kind}` : "ok"}`);
    return {
      seed: this.#seed,
      variant: this.#variant?.name,
      ok: !this.#violation,
      violation: this.#violation,
      trace: this.#trace.last(),
      digest: this.#trace.digest(),
      virtualMs: this.#sched.now - EPOCH,
      swarm: this.#swarm,
      stats: this.#stats,
      known: Object.fromEntries(this.#known_),
    };
  }

  // ---------------------------------------------------------------- set-up

  #setUp(): void {
    const swarm = this.#swarm;
    const clocks = seededRandom(streamSeed(this.#seed, Stream.Clocks));
    const skew = this.#timing.skewMs;
    this.#log(
      "sim",
      `seed ${this.#seed}${this.#variant ? ` variant ${this.#variant.name}` : ""}: ${
        JSON.stringify(swarm)
      }`,
    );
    for (let i = 0; i < swarm.nodes; i++) {
      const id = String.fromCharCode(97 + i);
      // Half the machines sit at an edge of the band: the widest skew the rules allow.
      const offsetMs = clocks.next() < 0.5
        ? (clocks.next() < 0.5 ? -1 : 1) * skew / 2
        : (clocks.next() * 2 - 1) * skew / 2;
      const driftPpm = (clocks.next() * 2 - 1) * 2000;
      const machine = new MachineClock(this.#sched, {
        offsetMs,
        driftPpm,
        skewMs: skew,
        random: seededRandom(Math.floor(clocks.next() * 2 ** 32)),
      });
      const node = new SimNode(id, machine);
      node.dataDir = this.#disk.dataDir(`${id}-${++node.dataDirs}`);
      node.net = {
        partition: () =>
          this.#quiet || this.#sched.now >= node.partitionUntil ? undefined : node.partitionMode,
        answerLatencyMs: () => this.#answerLatency(),
        lateWriteMs: (key) => this.#lateWrite(key),
      };
      this.#nodes.push(node);
      this.#log(
        "sim",
        `node ${id}: clock offset ${offsetMs.toFixed(1)} ms, drift ${driftPpm.toFixed(0)} ppm`,
      );
      this.#sched.after(this.#chaos.next() * 2000, () => this.#start(node));
    }
    const names = ["counter", "room", "cart"];
    for (let i = 0; i < swarm.actors; i++) {
      const key = { tenant: "default", class: names[i % names.length], name: `x${i}` };
      this.#actors.push({ key, id: actorKeyString(key), short: `${key.class}/${key.name}` });
    }
    this.#sched.after(this.#exp(swarm.chaosGapMs), () => this.#chaosStep());
    this.#sched.after(
      this.#exp(1000 / swarm.clientRate, this.#clients),
      () => this.#clientStep(),
    );
    this.#sched.at(this.#quietAt, () => this.#beginQuiet());
  }

  #answerLatency(): number {
    const storm = this.#storm;
    if (!storm) return between(this.#net, 0.1, 3);
    // Mostly quick, sometimes slow, rarely very slow.
    const u = this.#net.next();
    if (u < 0.8) return between(this.#net, 0.5, 30);
    if (u < 0.98) return between(this.#net, 30, storm.answerMaxMs);
    return between(this.#net, storm.answerMaxMs, 4 * storm.answerMaxMs);
  }

  /**
   * During a storm, some uploads of actors' histories reach the store late
   * (up to the request timeout) while their senders give up and go on.
   */
  #lateWrite(key: string): number | undefined {
    const storm = this.#storm;
    const late = this.#options.lateMarkers ? key.startsWith("actors/") : key.endsWith(".ltx");
    if (!storm || !late || this.#net.next() >= storm.lateWriteRate) return undefined;
    return between(this.#net, 1_000, 30_000);
  }

  #exp(mean: number, random: Random = this.#chaos): number {
    return -Math.log(1 - random.next()) * mean;
  }

  // ------------------------------------------------------------- processes

  /** The newest process of `node` that has not died, if any. */
  #alive(node: SimNode): SimProcess | undefined {
    let found: SimProcess | undefined;
    for (const proc of this.#procs) if (proc.node === node && !proc.dead) found = proc;
    return found;
  }

  async #start(node: SimNode): Promise<void> {
    if (this.#violation || node.retired) return;
    if (node.current && !node.current.dead && !node.current.paused) return;
    // A process started while another of its node still lives (frozen) is
    // on another machine with the same node id: a data directory of its own.
    if (this.#alive(node)) node.dataDir = this.#disk.dataDir(`${node.id}-${++node.dataDirs}`);
    const incarnation = ++node.incarnations;
    const token = randomHex(this.#tokens, 8);
    const proc = new SimProcess(node, incarnation, token);
    proc.dataDir = node.dataDir;
    const clock = new ProcessClock(this.#sched, node.machine, proc);
    proc.clock = clock;
    const ownHeartbeat = nodeKey(node.id);
    const filter = this.#variant?.ownHeartbeatPut;
    proc.bucket = new ProcessBucket(
      this.#store,
      this.#sched,
      proc,
      proc.name,
      node.net,
      filter ? (key, o) => key === ownHeartbeat ? filter(o) : o : undefined,
      (key, body) => this.#data.sent(key, body, proc.name),
    );
    const log = this.#logger(proc);
    proc.ownership = new OwnershipRecords({
      bucket: proc.bucket,
      clock,
      nodeId: node.id,
      processToken: token,
      log,
    });
    const holds: ActorHolds<Hold> = {
      take: async (actor) => {
        const hold = await proc.ownership.take(actor, {
          canTakeFrom: (record) => this.#canTakeFrom(proc, record),
          // As src/node.ts: no record write without a valid lease.
          mayWrite: () => !proc.plane || proc.plane.valid(),
        });
        const id = actorKeyString(actor);
        const list = proc.holds.get(id) ?? [];
        list.push(hold);
        proc.holds.set(id, list);
        this.#stats.takes++;
        this.#log(proc.name, `took ${short(actor)} gen ${hold.generation}`);
        return hold;
      },
      release: (hold) => {
        const id = actorKeyString(hold.actor);
        const list = proc.holds.get(id);
        const at = list?.indexOf(hold) ?? -1;
        if (list && at >= 0) list.splice(at, 1);
        this.#stats.releases++;
        this.#log(proc.name, `releases ${short(hold.actor)} gen ${hold.generation}`);
        return proc.ownership.release(hold);
      },
      stillHolds: (hold) => proc.ownership.stillHolds(hold),
    };
    proc.executor = new SimExecutor({
      dataDir: proc.dataDir,
      nodeId: node.id,
      bucket: proc.bucket,
      clock,
      log,
      historyRetentionMs: this.#swarm.retentionMs,
      // As src/node.ts: a durable write is acknowledged only if it landed while
      // this process held the actor, its lease valid before and after the check.
      checkHold: async (actor, generation) => {
        if (proc.plane && !proc.plane.valid()) return false;
        const held = await proc.host.stillHolds(actor, generation);
        return held && (!proc.plane || proc.plane.valid());
      },
      gaveUp: (actor, generation) => proc.host.gaveUp(actor, generation),
      canRun: () => !proc.plane || proc.plane.valid(),
      observer: this.#observer(proc),
      peek: (key) => this.#store.shadow.get(key),
      broken: this.#variant?.replication,
    });
    // The pool ActorHost sends to: the simulated executor, each event checked as it is sent.
    const pool = {
      run: (executor: number, key: ActorKey, generation: number, request: ActorRequest) => {
        this.#actorEvent(proc, key, generation);
        this.#opRuns(proc, opOf(request).id);
        return proc.executor.run(executor, key, generation, request);
      },
      drop: (key: ActorKey, generation: number) => proc.executor.drop(key, generation),
      discardAll: () => proc.executor.discardAll(),
      executorOf: (key: ActorKey) => proc.executor.executorOf(key),
    } as unknown as ExecutorPool;
    // As src/node.ts; the last argument, whether events may run (the lease is valid), is
    // passed for an ActorHost that takes it and ignored by one that does not.
    const Host = ActorHost as unknown as new (...args: unknown[]) => ActorHost;
    proc.host = new Host(
      pool,
      holds,
      { maxQueuedEvents: 128, maxResidentActors: 10_000, idleMs: this.#swarm.idleMs },
      clock,
      log,
      () => !proc.plane || proc.plane.valid(),
    );
    this.#serve(proc, log);
    node.current = proc;
    this.#procs.add(proc);
    this.#byToken.set(token, proc);
    this.#byName.set(proc.name, proc);
    this.#stats.starts++;
    this.#log(proc.name, `starts (process ${token})`);
    let plane: ClusterPlane;
    try {
      plane = await ClusterPlane.start({
        bucket: proc.bucket,
        clock,
        log,
        nodeId: node.id,
        processToken: token,
        timing: this.#timing,
        address: `http://${proc.authority}`,
        // Nodes talk plain HTTP (TLS between nodes is not simulated): --cluster-plaintext accept.
        plaintext: "accept",
        connect: this.#network.connector({ owner: proc, machine: proc.machine }),
        answerTimeoutMs: this.#variant?.answerTimeoutMs,
        version: VERSION,
        ownership: proc.ownership,
        holdsHere: (actor) => proc.host.holds(actor),
        onLeaseChange: (valid) => this.#leaseChange(proc, valid),
        onLeaseLost: (reason) => this.#leaseLost(proc, reason),
      });
    } catch (e) {
      if (proc.dead || proc.state !== "starting") return;
      if (e instanceof NodeIdInUse) {
        this.#stats.idInUse++;
        this.#log(proc.name, `refused to start: node id in use`);
        this.#exit(proc);
        // An older process of the node that came back from a freeze still runs: it is the node.
        const older = this.#alive(node);
        if (older) node.current = older;
        else this.#scheduleRestart(node, between(this.#chaos, 1_000, 10_000));
        return;
      }
      this.#fail("start-failed", `${proc.name} could not start: ${describe(e)}`);
      return;
    }
    if (proc.state !== "starting") return;
    this.#timeForwards(proc, plane);
    proc.plane = plane;
    proc.state = "serving";
    if (!proc.paused && node.net.partition() === undefined) proc.readySince = this.#sched.now;
    this.#log(proc.name, `serving (lease ${plane.valid() ? "valid" : "not valid"})`);
  }

  /**
   * What src/node.ts serves with, on the simulated network: the real routing
   * (RequestRouting with FailoverWaits) behind the real client handler, which
   * clients call directly and other nodes reach through `sim/http_server.ts`.
   */
  #serve(proc: SimProcess, log: Logger): void {
    const node = proc.node;
    proc.machine = `${node.id}/${node.dataDirs}`;
    proc.authority = `${node.id}-${node.dataDirs}.sim:8080`;
    const waits = new FailoverWaits({
      clock: proc.clock,
      random: seededRandom(Math.floor(this.#waitDraws.next() * 2 ** 32)),
      maxWaitMs: this.#failoverWaitMs,
      maxKept: 2_500,
      count: (outcome) => this.#stats.kept[outcome] = (this.#stats.kept[outcome] ?? 0) + 1,
    });
    proc.waits = waits;
    // A kept request given up must be answered within the wait (the spec:
    // --failover-wait-secs "sets how long a request is kept at most"). A
    // look that asked for the actor here handed the request on, as one that
    // forwards it does (then "the usual" bounds apply): the time its take
    // and event took is not the wait's.
    const keep = waits.keep.bind(waits);
    waits.keep = (actor, signal, check, giveUp) => {
      const start = this.#sched.now;
      const paused = proc.pausedSoFar(start);
      return keep(actor, signal, check, (outcome: WaitOutcome) => {
        const now = this.#sched.now;
        const handedOn = proc.dispatchTime(actor, start, now);
        const ms = now - start - (proc.pausedSoFar(now) - paused) - handedOn;
        this.#stats.longestGiveUpMs = Math.max(this.#stats.longestGiveUpMs, ms);
        if (outcome !== "over_cap" && ms > this.#failoverWaitMs + KEPT_SLACK_MS) {
          this.#fail(
            "kept-past-bound",
            `${proc.name} kept a request for ${actor} ${(ms / 1000).toFixed(3)} s before its ` +
              `503 (${outcome}); the wait is ${this.#failoverWaitMs / 1000} s`,
          );
        }
        return giveUp(outcome);
      });
    };
    const routing = new RequestRouting({
      plane: () => proc.plane,
      dispatch: async (key, request) => {
        const span = proc.dispatchStarts(actorKeyString(key), this.#sched.now);
        try {
          return await proc.host.dispatch(key, request);
        } finally {
          span.end = this.#sched.now;
        }
      },
      waits,
      log,
    });
    const classes = new Set(this.#actors.map((a) => a.key.class));
    proc.handler = createClientHandler({
      nodeId: node.id,
      tenant: "default",
      maxBodyBytes: 1024 * 1024,
      hasClass: (name) => classes.has(name),
      notReadyReason: () => {
        if (proc.state !== "serving") return proc.state;
        const plane = proc.plane;
        return plane && !plane.valid() ? "the node lease is not valid" : undefined;
      },
      dispatch: (key, request, client) => routing.route(key, request, client),
    });
    proc.stopListening = this.#network.listen(
      proc.authority,
      { owner: proc, machine: proc.machine },
      (conn) => void serveConnection(conn, proc.handler, proc.authority),
    );
  }

  /**
   * Times each forward of `plane` against the forwarder's bounds (a
   * connection within 5 s, the answer within 30 s of the write), leaving
   * out the forwarding process's pauses; the variant `forward-resends`
   * sends a request again after it may have been written.
   */
  #timeForwards(proc: SimProcess, plane: ClusterPlane): void {
    const forward = plane.forward.bind(plane);
    const bound = CONNECT_TIMEOUT_MS + ANSWER_TIMEOUT_MS + FORWARD_SLACK_MS;
    plane.forward = async (...args: Parameters<ClusterPlane["forward"]>) => {
      this.#stats.forwards++;
      const start = this.#sched.now;
      const paused = proc.pausedSoFar(start);
      let outcome: ForwardOutcome = await forward(...args);
      if (this.#variant?.resendForwards && outcome.kind === "failed") {
        outcome = await forward(...args);
      }
      const ms = this.#sched.now - start - (proc.pausedSoFar(this.#sched.now) - paused);
      this.#stats.longestForwardMs = Math.max(this.#stats.longestForwardMs, ms);
      if (outcome.kind === "failed") this.#stats.forwardFailures++;
      if (ms > bound && !this.#variant?.resendForwards) {
        this.#fail(
          "forward-past-bound",
          `${proc.name} forwarded a request to ${args[1]} for ${(ms / 1000).toFixed(3)} s ` +
            `(the bound is ${bound / 1000} s: a connection in 5 s, the answer in 30 s)`,
        );
      }
      return outcome;
    };
  }

  /**
   * Every request is answered: none waits past the longest path a request
   * can take (the record and heartbeat read, a take, an event's 30 s, the
   * route again and a forward's 35 s, or a kept GET's 25 s and a forward),
   * rounded up to {@linkcode REQUEST_BOUND_MS}, the asked process's pauses
   * left out; and at the end, after the quiet phase, none is left waiting
   * past {@linkcode QUIET_REQUEST_BOUND_MS}. A
   * request whose process died is over (its client saw the connection end).
   */
  #checkUnanswered(final: boolean): void {
    for (const [op, { proc, at, paused }] of this.#unanswered) {
      if (proc.dead) {
        this.#unanswered.delete(op);
        continue;
      }
      const ms = this.#sched.now - at - (proc.pausedSoFar(this.#sched.now) - paused);
      if (ms > (final ? QUIET_REQUEST_BOUND_MS : REQUEST_BOUND_MS)) {
        this.#fail(
          "request-past-bound",
          `op ${op} sent to ${proc.name} at ${((at - EPOCH) / 1000).toFixed(3)} s is not ` +
            `answered ${(ms / 1000).toFixed(3)} s later`,
        );
        return;
      }
    }
  }

  /** A client op reached an executor: each runs at most once, anywhere. */
  #opRuns(proc: SimProcess, op: number): void {
    const earlier = this.#ranBy.get(op);
    if (earlier !== undefined) {
      this.#fail(
        "op-ran-twice",
        `op ${op} reached an executor twice: on ${earlier}, then ${proc.name}`,
      );
      return;
    }
    this.#ranBy.set(op, proc.name);
  }

  /** The path between two machines now, as the partitions between their nodes make it. */
  #link(from: string, to: string): LinkState {
    if (this.#quiet) return { state: "up" };
    const a = from.slice(0, from.indexOf("/"));
    const b = to.slice(0, to.indexOf("/"));
    let silentUntil = -Infinity;
    for (const split of this.#splits) {
      if (split.until <= this.#sched.now) continue;
      const covers = (split.a === a && split.b === b) ||
        (!split.oneWay && split.a === b && split.b === a);
      if (!covers) continue;
      if (split.mode === "refuse") return { state: "refuse" };
      silentUntil = Math.max(silentUntil, split.until);
    }
    return silentUntil > -Infinity ? { state: "silent", until: silentUntil } : { state: "up" };
  }

  /** A one-way delay between two nodes: mostly under the seed's bound, a tenth up to 20 times it. */
  #peerLatency(): number {
    const max = this.#swarm.peerLatencyMs;
    const r = this.#peers;
    return r.next() < 0.9 ? between(r, 0.02, max) : between(r, max, 20 * max);
  }

  #canTakeFrom(proc: SimProcess, record: OwnerRecord): boolean {
    const plane = proc.plane;
    if (!plane) return false;
    // The broken variant: an actor is free once its holder is not live in this view.
    if (this.#variant?.takeRule === "not-live") return !plane.membership.isLive(record.node);
    // As src/node.ts: ClusterPlane.canTakeFrom.
    return plane.canTakeFrom(record);
  }

  #leaseChange(proc: SimProcess, valid: boolean): void {
    this.#log(proc.name, valid ? "lease valid" : "lease not valid");
    if (valid) return;
    if (proc.state === "serving") this.#stats.leaseExpiries++;
    // As src/node.ts: every actor dropped at once, unless the node is stopping.
    if (proc.state !== "stopping") proc.host.dropAll();
  }

  #leaseLost(proc: SimProcess, reason: NodeLeaseLost): void {
    this.#stats.leasesLost++;
    this.#log(proc.name, `lease lost (${reason.kind}): stops`);
    proc.host.dropAll();
    void this.#stop(proc, "lost");
  }

  /** A clean stop as src/node.ts makes it, or the stop after a lost lease. */
  async #stop(proc: SimProcess, why: "stop" | "lost"): Promise<void> {
    if (proc.dead || proc.state === "stopping" || proc.state === "exited") return;
    const plane = proc.plane;
    proc.state = "stopping";
    proc.readySince = undefined;
    // As src/node.ts: kept requests get their 503, the listener takes no new connection.
    proc.waits.stop();
    proc.stopListening();
    if (!plane) {
      this.#exit(proc);
      this.#scheduleRestart(proc.node, between(this.#chaos, 1_000, 10_000));
      return;
    }
    await proc.host.drain(10_000);
    // As src/node.ts: the executors close their actors once their uploads landed…
    await proc.executor.close();
    // …then the records say the actors are free.
    if (plane.valid()) await proc.host.releaseAll();
    proc.ownership.close();
    await plane.stop();
    this.#log(proc.name, `stopped (${why})`);
    this.#exit(proc);
    this.#scheduleRestart(
      proc.node,
      why === "lost" ? between(this.#chaos, 1_000, 10_000) : between(this.#chaos, 1_000, 20_000),
    );
  }

  #exit(proc: SimProcess): void {
    this.#network.kill(proc);
    proc.executor.kill();
    proc.dead = true;
    proc.state = "exited";
    proc.readySince = undefined;
    this.#procs.delete(proc);
    this.#deaths.set(proc.token, proc);
  }

  #scheduleRestart(node: SimNode, delayMs: number): void {
    if (node.restart || node.retired) return;
    node.restart = this.#sched.after(delayMs, () => {
      node.restart = undefined;
      const older = this.#alive(node);
      if (older && !older.paused) node.current = older;
      else void this.#start(node);
    });
  }

  #logger(proc: SimProcess): Logger {
    return createLogger({
      level: "info",
      // Drop the wall-clock stamp: the trace has true time.
      sink: (line) => this.#log(proc.name, line.slice(line.indexOf(" ") + 1)),
      now: () => proc.clock.now(),
    });
  }

  // ----------------------------------------------------------------- chaos

  #chaosStep(): void {
    if (this.#quiet || this.#violation) return;
    this.#sched.after(this.#exp(this.#swarm.chaosGapMs), () => this.#chaosStep());
    const f = this.#swarm.faults;
    const actions = (Object.keys(f) as (keyof Swarm["faults"])[]).filter((k) =>
      f[k] && k !== "retire"
    );
    if (actions.length === 0) return;
    const action = actions[Math.floor(this.#chaos.next() * actions.length)];
    const node = this.#nodes[Math.floor(this.#chaos.next() * this.#nodes.length)];
    const proc = node.current;
    const r = this.#chaos;
    switch (action) {
      case "crash":
        if (proc && !proc.dead) this.#crash(proc, between(r, 200, 30_000));
        break;
      case "stop":
        if (proc && proc.state === "serving" && !proc.paused) {
          this.#stats.stops++;
          this.#log(proc.name, "stop requested (SIGTERM)");
          void this.#stop(proc, "stop");
        }
        break;
      case "pause": {
        if (!proc || proc.dead || proc.paused) break;
        const u = r.next();
        const ms = u < 0.4
          ? between(r, 50, 4_000)
          : u < 0.7
          ? between(r, 6_000, 14_000)
          : between(r, 15_000, 45_000);
        this.#pause(proc, ms);
        break;
      }
      case "zombie":
        if (!proc || proc.dead || proc.paused || proc.state !== "serving") break;
        // The machine is frozen, and a second process is started with its id meanwhile.
        this.#stats.zombies++;
        this.#pause(proc, between(r, 20_000, 60_000));
        this.#log(proc.name, "frozen; a new process of the node will start beside it");
        this.#sched.after(between(r, 500, 5_000), () => void this.#start(node));
        break;
      case "partition": {
        const ms = between(r, 500, 25_000);
        node.partitionUntil = Math.max(node.partitionUntil, this.#sched.now + ms);
        node.partitionMode = r.next() < 0.5 ? "refuse" : "silent";
        this.#stats.partitions++;
        this.#log(
          "sim",
          `node ${node.id} cut off from the bucket for ${
            (ms / 1000).toFixed(1)
          } s (${node.partitionMode})`,
        );
        for (const p of this.#procs) if (p.node === node) p.readySince = undefined;
        this.#sched.at(node.partitionUntil, () => this.#partitionEnds(node));
        break;
      }
      case "netsplit": {
        const others = this.#nodes.filter((n) => n !== node);
        const other = others[Math.floor(r.next() * others.length)];
        // Some outlast the forwarder's 30 s wait for an answer.
        const ms = r.next() < 0.7 ? between(r, 500, 15_000) : between(r, 15_000, 60_000);
        const mode = r.next() < 0.5 ? "refuse" : "silent";
        const oneWay = r.next() < 0.3;
        this.#splits.push({ a: node.id, b: other.id, mode, oneWay, until: this.#sched.now + ms });
        this.#stats.netsplits++;
        this.#log(
          "sim",
          `network ${node.id} ${oneWay ? "->" : "<->"} ${other.id} cut for ${
            (ms / 1000).toFixed(1)
          } s (${mode})`,
        );
        break;
      }
      case "storm":
        this.#beginStorm(between(r, 5_000, 40_000));
        break;
      case "outage": {
        const ms = between(r, 500, 30_000);
        this.#outages.push({ from: this.#sched.now, until: this.#sched.now + ms });
        this.#stats.outages++;
        this.#log("sim", `bucket outage for ${(ms / 1000).toFixed(1)} s`);
        break;
      }
    }
  }

  #crash(proc: SimProcess, restartAfterMs: number): void {
    this.#stats.crashes++;
    this.#log(proc.name, `crashes (restart in ${(restartAfterMs / 1000).toFixed(1)} s)`);
    this.#exit(proc);
    this.#diskAfterCrash(proc);
    if (proc.node.current === proc) this.#scheduleRestart(proc.node, restartAfterMs);
  }

  /**
   * What the crash left on the machine's disk: its files as they were, or,
   * as the seed draws, an empty data directory (a new disk) or a power loss.
   * Only the directory its node's processes use now, and none another
   * process still has open.
   */
  #diskAfterCrash(proc: SimProcess): void {
    const node = proc.node;
    if (proc.dataDir !== node.dataDir || this.#alive(node)) return;
    const r = this.#diskFaults.next();
    if (r < this.#swarm.disk.emptyDir) {
      this.#stats.emptyDirs++;
      this.#disk.wipe(node.dataDir);
      this.#log("sim", `node ${node.id} restarts with an empty data directory`);
    } else if (r < this.#swarm.disk.emptyDir + this.#swarm.disk.powerLoss) {
      this.#stats.powerLosses++;
      const effects = losePower(node.dataDir, this.#diskFaults);
      const list = [...effects].map(([path, effect]) => `${path} ${effect}`).join(", ");
      this.#log("sim", `node ${node.id} lost its power: ${list || "no database"}`);
    }
  }

  #pause(proc: SimProcess, ms: number): void {
    this.#stats.pauses++;
    proc.paused = true;
    proc.pausedAt = this.#sched.now;
    proc.readySince = undefined;
    this.#deaths.set(proc.token, proc);
    this.#log(proc.name, `paused for ${(ms / 1000).toFixed(1)} s`);
    this.#sched.after(ms, () => this.#resume(proc));
  }

  #resume(proc: SimProcess): void {
    if (proc.dead || !proc.paused) return;
    proc.paused = false;
    proc.pausedMs += this.#sched.now - proc.pausedAt;
    this.#deaths.delete(proc.token);
    this.#log(proc.name, "resumes");
    if (proc.state === "serving" && proc.node.net.partition() === undefined) {
      proc.readySince = this.#sched.now;
    }
    this.#sched.resume(proc);
  }

  #partitionEnds(node: SimNode): void {
    if (this.#sched.now < node.partitionUntil) return;
    this.#log("sim", `node ${node.id} reaches the bucket again`);
    for (const p of this.#procs) {
      if (p.node === node && p.state === "serving" && !p.paused) p.readySince = this.#sched.now;
    }
  }

  #beginStorm(ms: number): void {
    const r = this.#chaos;
    const until = this.#sched.now + ms;
    if (this.#storm) {
      this.#storm.until = Math.max(this.#storm.until, until);
    } else {
      const answerMaxMs = between(r, 50, 1_500);
      const lateWriteRate = r.next() < 0.5 ? between(r, 0, 0.1) : 0;
      this.#storm = { until, answerMaxMs, lateWriteRate };
      const faults: MemoryFaults = {
        latencyMs: { min: 0.5, max: between(r, 20, 800) },
        errorRate: between(r, 0, 0.25),
        timeoutRate: r.next() < 0.5 ? between(r, 0, 0.04) : 0,
        lostAnswerRate: between(r, 0, 0.2),
        listDelayMs: r.next() < 0.4 ? between(r, 0, 4_000) : 0,
        outages: this.#outages,
      };
      this.#store.faults = faults;
      this.#stats.storms++;
      this.#log(
        "sim",
        `bucket storm: ${JSON.stringify({ ...faults, outages: undefined, lateWriteRate })}`,
      );
    }
    this.#sched.at(until, () => this.#endStorm());
  }

  #endStorm(): void {
    if (!this.#storm || this.#sched.now < this.#storm.until) return;
    this.#storm = undefined;
    this.#store.faults = this.#calmFaults;
    this.#lastStormEnd = this.#sched.now;
    this.#log("sim", "bucket calm again");
  }

  /** No new faults: the weather clears, frozen processes resume, every node comes back. */
  #beginQuiet(): void {
    this.#quiet = true;
    this.#log("sim", "quiet phase: no more faults; every node comes back");
    if (this.#swarm.faults.retire) {
      const node = this.#nodes[Math.floor(this.#chaos.next() * this.#nodes.length)];
      node.retired = true;
      if (node.restart) this.#sched.cancel(node.restart);
      node.restart = undefined;
      this.#log("sim", `node ${node.id} leaves the cluster for good`);
      for (const proc of [...this.#procs]) if (proc.node === node) this.#exit(proc);
    }
    if (this.#storm) {
      this.#storm.until = this.#sched.now;
      this.#endStorm();
    }
    for (const w of this.#outages) w.until = Math.min(w.until, this.#sched.now);
    for (const node of this.#nodes) {
      if (node.partitionUntil > this.#sched.now) {
        node.partitionUntil = this.#sched.now;
        this.#partitionEnds(node);
      }
    }
    for (const proc of [...this.#procs]) if (proc.paused) this.#resume(proc);
    for (const node of this.#nodes) {
      if (!node.retired && (!node.current || node.current.dead)) {
        if (node.restart) this.#sched.cancel(node.restart);
        node.restart = undefined;
        const older = this.#alive(node);
        if (older) node.current = older;
        else void this.#start(node);
      }
    }
  }

  // --------------------------------------------------------------- clients

  #clientStep(): void {
    if (this.#violation) return;
    if (this.#sched.now < this.#quietAt + QUIET_MS / 2) {
      this.#sched.after(
        this.#exp(1000 / this.#swarm.clientRate, this.#clients),
        () => this.#clientStep(),
      );
    }
    const c = this.#clients;
    const actor = this.#actors[Math.floor(c.next() * this.#actors.length)];
    const node = this.#nodes[Math.floor(c.next() * this.#nodes.length)];
    // A tenth of the clients give up on their request after a while.
    const patienceMs = c.next() < 0.1 ? between(c, 500, 40_000) : undefined;
    void this.#request(node, actor, this.#drawOp(), between(c, 0.2, 2), patienceMs);
  }

  /** A client's request: a read, a plain or durable write, or a delete, as the seed's mix says. */
  #drawOp(): Op {
    const u = this.#opDraws.next();
    const { read, write, durable } = this.#swarm.ops;
    const kind: OpKind = u < read
      ? "read"
      : u < read + write
      ? "write"
      : u < read + write + durable
      ? "durable"
      : "delete";
    return { kind, id: ++this.#nextWriteId };
  }

  /** A client request for `actor` sent to `node`; resolves to whether it was served. */
  #request(
    node: SimNode,
    actor: { key: ActorKey; id: string; short: string },
    op: Op,
    networkMs: number,
    patienceMs?: number,
  ): Promise<boolean> {
    this.#stats.requests++;
    const proc = node.current;
    if (!proc || proc.dead || proc.state !== "serving") {
      this.#stats.refused++;
      return Promise.resolve(false);
    }
    return new Promise((resolve) => {
      this.#sched.after(networkMs, () => {
        this.#ask(proc, actor, op, patienceMs).then(resolve, (e) => {
          this.#fail("request-threw", `a request to ${proc.name} threw: ${describe(e)}`);
          resolve(false);
        });
      }, proc);
    });
  }

  /**
   * A client's request, through the process's real handler (routing, the
   * forwarder over the simulated network, failover waits), as the client
   * reads the answer: a durable write answered 200 is acknowledged, at the
   * TXID it took, by the node the answer names. A client with `patienceMs`
   * leaves after that long (its request's signal aborts: a kept request is
   * dropped, a forward stops) and reads no answer.
   */
  async #ask(
    proc: SimProcess,
    actor: { key: ActorKey; id: string; short: string },
    op: Op,
    patienceMs?: number,
  ): Promise<boolean> {
    const tag = `${op.kind} ${op.id} ${actor.short}`;
    this.#expectTakeover(proc, actor.id, op.id);
    this.#unanswered.set(op.id, {
      proc,
      at: this.#sched.now,
      paused: proc.pausedSoFar(this.#sched.now),
    });
    const { method, path } = opTarget(op);
    const url = `http://${proc.authority}/actor/${actor.key.class}/${actor.key.name}${path}`;
    const client = new AbortController();
    // The process learns of it as an event of its own: on resume if paused, never if dead.
    if (patienceMs !== undefined) this.#sched.after(patienceMs, () => client.abort(), proc);
    const response = await proc.handler(new Request(url, { method, signal: client.signal }));
    const text = (await response.text()).trim();
    this.#unanswered.delete(op.id);
    if (client.signal.aborted) {
      this.#stats.clientsLeft++;
      this.#log(proc.name, `${tag}: the client left; answered ${response.status} ${text}`);
      return false;
    }
    const answeredBy = response.headers.get(NODE_HEADER);
    if (response.status !== 200) {
      this.#stats.unavailable++;
      this.#log(proc.name, `${tag}: ${response.status} ${text} (from ${answeredBy})`);
      return false;
    }
    this.#stats.served++;
    if (answeredBy !== proc.node.id) this.#stats.forwarded++;
    const ran = this.#ranBy.get(op.id);
    const ranNode = ran?.slice(0, ran.indexOf("#"));
    if (ranNode !== answeredBy) {
      this.#fail(
        "answer-misattributed",
        `${tag} was answered 200 naming ${answeredBy} as the node that ran it; ` +
          `it ran on ${ran ?? "no node"}`,
      );
      return true;
    }
    if (op.kind === "durable") {
      const header = response.headers.get("x-sim-txid");
      if (header === null) throw new Error(`durable write ${op.id} answered without a TXID`);
      const txid = BigInt(header);
      // The client was told its write is durable.
      this.#stats.durableAcked++;
      this.#data.acked(actor.id, op, txid);
      this.#log(proc.name, `${tag}: durable at TXID ${txid} (ran on ${ran})`);
    }
    return true;
  }

  /**
   * After the quiet phase: every actor must be served, by the node asked or
   * by the node it forwards to, within 30 s of asking once a second.
   */
  async #finalProbe(): Promise<void> {
    this.#log("sim", "final check: every actor must be served");
    const pending = new Map(this.#actors.map((a) => [a.id, a]));
    const last = new Map<string, string>();
    for (let round = 0; round < 30 && pending.size > 0 && !this.#violation; round++) {
      let i = 0;
      for (const actor of pending.values()) {
        const node = this.#nodes[(round + i++) % this.#nodes.length];
        const read = { kind: "read" as const, id: ++this.#nextWriteId };
        void this.#request(node, actor, read, 1).then((served) => {
          if (served) return pending.delete(actor.id);
          const holder = this.#records.get(`owners/${actor.id}`);
          last.set(actor.id, `asked ${node.id}; record ${describeRecord(holder)}`);
        });
      }
      await this.#sched.runUntil(this.#sched.now + 1000, () => this.#check());
    }
    if (pending.size > 0 && !this.#violation) {
      const which = [...pending.values()].map((a) => `${a.short} (${last.get(a.id) ?? "?"})`);
      this.#fail("not-served-at-end", `not served 30 s into the final check: ${which.join(", ")}`);
    }
  }

  // ------------------------------------------------------------------ data

  /** What a process's executor reports, checked as it happens. */
  #observer(proc: SimProcess): ExecutorObserver {
    const who = (generation: number) => `${proc.name} (gen ${generation})`;
    return {
      waking: (actor) => {
        this.#wakes.set(`${proc.token} ${actorKeyString(actor)}`, this.#elapsed);
        return this.#elapsed;
      },
      restored: (actor, generation, ids, txid, mark) => {
        this.#stats.restores++;
        // What a restore reads is the history as of its start: writes
        // acknowledged since (by a newer holder) are not its to hold.
        this.#data.saw(
          actorKeyString(actor),
          who(generation),
          `after its restore of ${short(actor)}`,
          ids,
          txid,
          mark,
        );
      },
      read: (actor, generation, ids, txid) => {
        this.#stats.reads++;
        this.#data.saw(
          actorKeyString(actor),
          who(generation),
          `in a read of ${short(actor)}`,
          ids,
          txid,
        );
      },
      committed: (actor, _generation, op) => {
        if (op.kind === "durable") this.#stats.durableWrites++;
        else this.#stats.plainWrites++;
        this.#data.committed(actorKeyString(actor), op);
      },
      deleted: (actor, generation) => {
        this.#stats.deletes++;
        this.#data.deleted(actorKeyString(actor));
        this.#log(proc.name, `${short(actor)} deleted itself (gen ${generation})`);
      },
      runs: (actor, generation) => this.#statementRuns(proc, actor, generation),
      openFailed: (actor, generation, error, timedOut) => {
        this.#stats.restoreFailures++;
        // A restore the event's limit abandoned rejects with the abort's reason.
        if (proc.dead || proc.executor.killed || timedOut) return;
        if (error instanceof HistoryError) {
          this.#fail(
            "history-unrestorable",
            `${who(generation)} could not restore ${short(actor)}: ${describe(error)}`,
          );
        } else if (
          !(error instanceof RestoreUnavailable || error instanceof ReplicationFailed ||
            error instanceof EventFailure)
        ) {
          this.#fail(
            "replica-open-failed",
            `${who(generation)} could not open ${short(actor)}'s replica: ${describe(error)}`,
          );
        }
      },
    };
  }

  /**
   * The process that holds `actor` with a valid lease, as its record in the
   * bucket says, and whose executor has it resident with every commit landed
   * and no event under way.
   */
  #settledOwner(
    actor: { key: ActorKey; id: string },
  ): { proc: SimProcess; settled: SettledActor } | undefined {
    const record = this.#records.get(`owners/${actor.id}`);
    if (!record || record.state !== "held") return undefined;
    for (const proc of this.#procs) {
      const hold = proc.belief(actor.key, actor.id);
      if (!hold || record.process !== proc.token || record.generation !== hold.generation) continue;
      const settled = proc.executor.settled(actor.id);
      if (settled && BigInt(settled.generation) === hold.generation) return { proc, settled };
    }
    return undefined;
  }

  /**
   * Every actor's chain in the bucket, as the store holds it now: it restores,
   * holds every acknowledged durable write, and is the database of the
   * actor's owner when one is settled. At checkpoints, for the actors with a
   * settled owner, by the independent replay (sim/chain.ts); at the end, for
   * every actor, by the real restore too, which the replay must agree with.
   */
  async #checkChains(final: boolean): Promise<void> {
    const view = new StoreView(this.#store.shadow);
    const where = final ? "at the end" : "at a checkpoint";
    for (const actor of this.#actors) {
      if (this.#violation) return;
      const owner = this.#settledOwner(actor);
      if (!owner && !final) continue;
      const chain = `${where}, the chain of ${actor.short} in the bucket`;
      this.#stats.chainChecks++;
      let replayed: ChainPosition;
      try {
        replayed = replayChain(view, actor.key);
      } catch (e) {
        this.#fail("history-unrestorable", `${chain} cannot be replayed: ${describe(e)}`);
        return;
      }
      let restored: Restored | undefined;
      if (final) {
        try {
          restored = await restoreFromStore(view, actor.key, this.#disk.scratchPath());
        } catch (e) {
          this.#fail("history-unrestorable", `${chain} cannot be restored: ${describe(e)}`);
          return;
        }
        if (replayed.txid !== restored.txid || replayed.checksum !== restored.checksum) {
          this.#fail(
            "replay-differs",
            `${chain} restores to ${position(restored)}, an independent replay of its files ` +
              `to ${position(replayed)}`,
          );
          return;
        }
        if (!this.#data.saw(actor.id, chain, "restores, but", restored.ids, restored.txid)) return;
      }
      if (!owner) continue;
      const { proc, settled } = owner;
      const same = settled.txid === replayed.txid && settled.checksum === replayed.checksum &&
        (!restored || sameIds(settled.ids, restored.ids));
      if (same) continue;
      const differs = `${chain} restores to ${position(replayed)}` +
        (restored ? ` with ${restored.ids.size} rows` : "") +
        `, but its owner ${proc.name} (gen ${settled.generation}) stands at ` +
        `${position(settled)} with ${settled.ids.size} rows` +
        (restored ? ` (${diffIds(settled.ids, restored.ids)})` : "");
      if (
        !this.#data.wroteAt(actor.id, BigInt(settled.generation)) &&
        this.#chainWhenWoken(view, actor, proc, settled)
      ) {
        // See docs/testing.md: a hold that wrote nothing has no base to cap an
        // earlier generation's late upload.
        this.#stats.lateOverUnwrittenHold++;
        this.#log("sim", `NOTE late upload over a hold that wrote nothing: ${differs}`);
        continue;
      }
      this.#fail("chain-differs", differs);
      return;
    }
  }

  /**
   * Whether the chain as it stood when `proc` began to wake the actor (the
   * objects written since left out) is the owner's database: then only
   * uploads that landed after its restore read the history make the chain
   * differ.
   */
  #chainWhenWoken(
    view: StoreView,
    actor: { key: ActorKey; id: string },
    proc: SimProcess,
    settled: SettledActor,
  ): boolean {
    const mark = this.#wakes.get(`${proc.token} ${actor.id}`);
    if (mark === undefined) return false;
    const earlier = new Map<string, Uint8Array>();
    for (const [key, body] of view.objects) {
      if ((this.#data.writtenAt(key) ?? -1) < mark) earlier.set(key, body);
    }
    try {
      const then = replayChain(new StoreView(earlier), actor.key);
      return then.txid === settled.txid && then.checksum === settled.checksum;
    } catch {
      return false;
    }
  }

  // ------------------------------------------------------------ invariants

  /**
   * A violation of an invariant the real code is known to break (sim/known.ts):
   * counted and traced, and the run goes on, unless `strict`.
   */
  #known(kind: string, message: string): void {
    // A kind sim/known.ts no longer lists was fixed: it showing again fails.
    if (this.#options.strict || !KNOWN[kind]) return this.#fail(kind, message);
    const seen = this.#known_.get(kind);
    if (seen) seen.count++;
    else {this.#known_.set(kind, {
        count: 1,
        first: { kind, message, at: this.#sched.now - EPOCH },
      });}
    this.#log("sim", `KNOWN ${kind}: ${message}`);
  }

  #fail(kind: string, message: string): void {
    if (this.#violation) return;
    this.#violation = { kind, message, at: this.#sched.now - EPOCH };
    this.#log("sim", `VIOLATION ${kind}: ${message}`);
    this.#sched.stop();
  }

  /** After every event: one holder per actor; dead nodes' actors freed in time. */
  #check(): void {
    if (this.#violation) return;
    for (const actor of this.#actors) {
      let first: [SimProcess, Hold] | undefined;
      for (const proc of this.#procs) {
        const hold = proc.belief(actor.key, actor.id);
        if (!hold) continue;
        if (!first) {
          first = [proc, hold];
          continue;
        }
        const message = `${first[0].name} (gen ${first[1].generation}) and ${proc.name} ` +
          `(gen ${hold.generation}) both hold ${actor.short} with a valid lease`;
        const known = this.#suspectBetween(actor.id, first[1].generation, hold.generation);
        if (known) {
          const pair = `${actor.id} ${first[1].generation} ${hold.generation}`;
          if (!this.#reported.has(pair)) {
            this.#reported.add(pair);
            this.#known(known, message);
          }
          continue;
        }
        this.#fail("two-holders", message);
        return;
      }
    }
    this.#checkDeaths();
    this.#checkTakeovers();
  }

  /**
   * A request for an actor whose holder's node is gone in the bucket (its
   * heartbeat fenced or released, as the process the record names or one
   * alive after it was written) since a while (every node has listed it
   * since), reaching a node that serves without a pause or partition while
   * the bucket is calm: the spec frees the actor, and "the next request for
   * one of them starts it on another node".
   */
  /**
   * Whether `heartbeat` frees `record` on every node's clock: a fence frees
   * once it is `fenceAfterMs` old, on clocks that differ by the skew.
   */
  #freesEverywhere(heartbeat: Heartbeat, record: OwnerRecord): boolean {
    return heartbeatFrees(
      heartbeat,
      record,
      this.#sched.now,
      this.#timing.fenceAfterMs + this.#timing.skewMs,
    );
  }

  #expectTakeover(proc: SimProcess, actorId: string, op: number): void {
    if (this.#awaitingTakeover.has(actorId)) return;
    const record = this.#records.get(`owners/${actorId}`);
    if (!record || record.state !== "held") return;
    const heartbeat = this.#heartbeatIn(record.node);
    if (!heartbeat || !this.#freesEverywhere(heartbeat, record)) return;
    const goneAt = this.#goneAt.get(heartbeat.process);
    const now = this.#sched.now;
    // Every node lists the heartbeats once a period (in calm weather the
    // listing takes milliseconds): by then each has seen it.
    const listed = this.#timing.periodMs + 500;
    if (goneAt === undefined || now < goneAt + listed) return;
    // The node asked has served, and the bucket been calm, for a bucket
    // request's timeout: nothing a storm or a partition left hanging on it
    // holds the takeover up.
    const settled = now - REQUEST_TIMEOUT_MS - 1_000;
    if (!this.#healthy(proc) || proc.readySince! > settled || !this.#bucketCalm()) return;
    this.#stats.takeoversAwaited++;
    this.#awaitingTakeover.set(actorId, {
      since: now,
      proc,
      holder: record.process,
      gone: heartbeat.process,
      goneAt,
      op,
    });
  }

  /** Serving, with a valid lease, since before now without a pause or a partition from the bucket. */
  #healthy(proc: SimProcess): boolean {
    return !proc.dead && proc.state === "serving" && proc.readySince !== undefined &&
      proc.plane !== undefined && proc.plane.valid() && proc.node.net.partition() === undefined;
  }

  /**
   * No storm and no outage now, nor within a bucket request's timeout
   * before: a call the storm left unanswered still holds up what waits on
   * it (a take of the actor, and the requests queued behind it) until then.
   */
  #bucketCalm(): boolean {
    const calm = this.#calmSince();
    return calm !== undefined && calm <= this.#sched.now - REQUEST_TIMEOUT_MS - 1_000;
  }

  /** True time since which the bucket has had no storm or outage; undefined while it has one. */
  #calmSince(): number | undefined {
    const now = this.#sched.now;
    if (this.#storm) return undefined;
    let calm = this.#lastStormEnd;
    for (const w of this.#outages) {
      if (w.from <= now && now < w.until) return undefined;
      if (w.until <= now) calm = Math.max(calm, w.until);
    }
    return calm;
  }

  /**
   * Each awaited takeover happens (the record names another process, or is
   * released) within {@linkcode TAKEOVER_MS}, unless the weather or the
   * node asked changed meanwhile (then it is excused).
   */
  #checkTakeovers(): void {
    const now = this.#sched.now;
    for (const [actorId, wait] of this.#awaitingTakeover) {
      const record = this.#records.get(`owners/${actorId}`);
      const heartbeat = record && this.#heartbeatIn(record.node);
      if (!record || record.state !== "held" || record.process !== wait.holder) {
        this.#stats.takeoversSeen++;
        this.#awaitingTakeover.delete(actorId);
        continue;
      }
      // A new process of the node wrote its heartbeat live again: the node
      // is back, and takes its actors itself.
      if (heartbeat?.process !== wait.gone || !this.#freesEverywhere(heartbeat, record)) {
        this.#awaitingTakeover.delete(actorId);
        continue;
      }
      // Calm since the request (and so since 31 s before it, as when it came).
      const calm = this.#calmSince();
      const excused = !this.#healthy(wait.proc) || wait.proc.readySince! > wait.since ||
        calm === undefined || calm > wait.since;
      if (excused) {
        this.#awaitingTakeover.delete(actorId);
        continue;
      }
      if (now - wait.since > TAKEOVER_MS) {
        const name = (token: string) => this.#byToken.get(token)?.name ?? token;
        this.#fail(
          "freed-actor-not-taken",
          `${actorId} is still held by ${name(wait.holder)}; its node's heartbeat (${
            name(wait.gone)
          }) freed it ${((wait.since - wait.goneAt) / 1000).toFixed(1)} s before op ${wait.op} ` +
            `reached ${wait.proc.name} (healthy, the bucket calm); ` +
            `${(TAKEOVER_MS / 1000).toFixed(0)} s later nobody took it over`,
        );
        return;
      }
    }
  }

  /** An actor event runs: its node's lease is valid, and no other node holds the actor. */
  #actorEvent(proc: SimProcess, key: ActorKey, generation: number): void {
    this.#stats.actorEvents++;
    const id = actorKeyString(key);
    this.#data.eventRuns(id, generation, proc.name);
    const holds = proc.holds.get(id);
    const own = proc.host.holds(key) ? holds?.[holds.length - 1] : undefined;
    if (!proc.plane?.valid()) {
      this.#fail(
        "event-outside-lease",
        `${proc.name} runs an event of ${short(key)} (gen ${generation}) while its lease is ` +
          `not valid${own ? "" : " (and it does not hold the actor)"}`,
      );
      return;
    }
    for (const other of this.#procs) {
      if (other === proc) continue;
      const hold = other.belief(key, id);
      if (hold) {
        const message = `${proc.name} runs an event of ${short(key)} (gen ${generation}) while ` +
          `${other.name} holds it (gen ${hold.generation}) with a valid lease`;
        const known = this.#suspectBetween(id, BigInt(generation), hold.generation);
        if (known) {
          this.#known(known, message);
          return;
        }
        this.#fail(
          "event-while-other-holds",
          `${proc.name} runs an event of ${short(key)} (gen ${generation}) while ${other.name} ` +
            `holds it (gen ${hold.generation}) with a valid lease`,
        );
        return;
      }
    }
  }

  /**
   * An event's statement runs in the executor: the process's lease is valid,
   * and no other process holds the actor with a valid lease (checked again
   * here, not only when the event was sent: it may have waited on the bucket).
   */
  #statementRuns(proc: SimProcess, key: ActorKey, generation: number): void {
    const id = actorKeyString(key);
    if (!proc.plane?.valid()) {
      this.#fail(
        "event-outside-lease",
        `${proc.name} runs a statement of ${short(key)} (gen ${generation}) in its executor ` +
          `while its lease is not valid`,
      );
      return;
    }
    for (const other of this.#procs) {
      if (other === proc) continue;
      const hold = other.belief(key, id);
      if (hold) {
        this.#fail(
          "event-while-other-holds",
          `${proc.name} runs a statement of ${short(key)} (gen ${generation}) in its executor ` +
            `while ${other.name} holds it (gen ${hold.generation}) with a valid lease`,
        );
        return;
      }
    }
  }

  #suspect(id: string, generation: bigint, kind: string): void {
    const list = this.#suspectTakes.get(id) ?? [];
    list.push({ generation, kind });
    this.#suspectTakes.set(id, list);
  }

  /**
   * The known bug whose take superseded the older of two holds without its holder
   * knowing: a suspect take above the older generation and up to the newer one (the
   * newer hold may descend from it).
   */
  #suspectBetween(id: string, a: bigint, b: bigint): string | undefined {
    const [low, high] = a < b ? [a, b] : [b, a];
    return (this.#suspectTakes.get(id) ?? []).find((t) =>
      t.generation > low && t.generation <= high
    )?.kind;
  }

  /**
   * A dead (crashed, exited or paused) process whose heartbeat is still live
   * in the bucket must be fenced (or replaced by a new process of its node)
   * within the spec's bound of its last write, counted from when the bucket
   * was reachable for another node with a settled lease.
   */
  #checkDeaths(): void {
    const now = this.#sched.now;
    for (const [token, proc] of this.#deaths) {
      const current = this.#heartbeatIn(proc.node.id);
      if (!current || current.process !== token || current.lease !== "live") {
        this.#deaths.delete(token);
        continue;
      }
      const lastWrite = this.#lastLiveWrite.get(token);
      if (lastWrite === undefined) continue;
      const reachable = this.#reachableSince(proc.node);
      if (reachable === undefined) continue;
      const due = Math.max(lastWrite, reachable) + this.#bound;
      if (now > due) {
        this.#fail(
          "dead-node-not-fenced",
          `${proc.name} is ${proc.paused ? "paused" : "dead"}; its last write landed ${
            ((now - lastWrite) / 1000).toFixed(1)
          } s ago and the bucket was reachable for ${((now - reachable) / 1000).toFixed(1)} s, ` +
            `but its heartbeat is still live (bound ${(this.#bound / 1000).toFixed(1)} s)`,
        );
        return;
      }
    }
  }

  /**
   * True time since which the bucket has had no storm or outage and some
   * process of another node has served without a pause or partition;
   * undefined when that is not so now.
   */
  #reachableSince(except: SimNode): number | undefined {
    const calm = this.#calmSince();
    if (calm === undefined) return undefined;
    let ready: number | undefined;
    for (const proc of this.#procs) {
      if (proc.node === except || proc.readySince === undefined) continue;
      ready = ready === undefined ? proc.readySince : Math.min(ready, proc.readySince);
    }
    return ready === undefined ? undefined : Math.max(calm, ready);
  }

  #heartbeatIn(nodeId: string): Heartbeat | undefined {
    const body = this.#store.shadow.get(nodeKey(nodeId));
    if (!body) return undefined;
    try {
      return decodeHeartbeat(body, nodeKey(nodeId));
    } catch {
      return undefined;
    }
  }

  /** Every write the bucket applied. */
  #applied(key: string, body: Uint8Array | null, writer: string): void {
    if (key.startsWith("nodes/")) this.#heartbeatWritten(key, body, writer);
    else if (key.startsWith("owners/")) this.#recordWritten(key, body, writer);
    else if (key.startsWith("actors/")) {
      const proc = this.#byName.get(writer);
      this.#data.applied(
        key,
        body,
        writer,
        proc?.token,
        (token) => (token && this.#byToken.get(token)?.name) ?? `process ${token}`,
      );
    }
  }

  #heartbeatWritten(key: string, body: Uint8Array | null, writer: string): void {
    if (!body) {
      this.#log(writer, `${key} deleted`);
      return;
    }
    let heartbeat: Heartbeat;
    try {
      heartbeat = decodeHeartbeat(body, key);
    } catch {
      return;
    }
    const token = heartbeat.process;
    const proc = this.#byToken.get(token);
    const now = this.#sched.now;
    if (heartbeat.lease === "fenced") {
      this.#stats.fences++;
      this.#fenced.add(token);
      this.#goneAt.set(token, now);
      const lastWrite = this.#lastLiveWrite.get(token);
      const age = lastWrite === undefined ? NaN : now - lastWrite;
      this.#log(
        writer,
        `${key} fenced (process ${proc?.name ?? token}, last write ${
          (age / 1000).toFixed(1)
        } s ago)`,
      );
      if (proc && (proc.dead || proc.paused) && lastWrite !== undefined) {
        this.#stats.takeoverDelays.push(age);
        const reachable = this.#reachableSince(proc.node);
        if (reachable !== undefined && reachable <= lastWrite) {
          this.#stats.calmTakeoverDelays.push(age);
        }
      }
      if (proc && !proc.dead && proc.plane?.valid()) {
        this.#fail(
          "fenced-while-valid",
          `${writer} fenced ${proc.name} while its lease was valid (last write ${
            (age / 1000).toFixed(3)
          } s ago)`,
        );
        return;
      }
      const window = this.#timing.fenceAfterMs + this.#timing.watchMs + this.#timing.periodMs +
        this.#timing.skewMs;
      if (
        proc && !proc.dead && proc.readySince !== undefined && proc.readySince <= now - window &&
        !this.#storm && this.#lastStormEnd <= now - window
      ) {
        this.#fail(
          "fenced-healthy-node",
          `${writer} fenced ${proc.name}, which served without a pause or partition for ${
            ((now - proc.readySince) / 1000).toFixed(1)
          } s with no bucket storm (only outages, which every node saw)`,
        );
      }
      return;
    }
    if (this.#fenced.has(token)) {
      this.#fail(
        "heartbeat-after-fence",
        `${writer} wrote its heartbeat (${heartbeat.lease}) after it was fenced`,
      );
      return;
    }
    if (heartbeat.lease === "live") this.#lastLiveWrite.set(token, now);
    else {
      this.#goneAt.set(token, now);
      this.#log(writer, `${key} released`);
    }
  }

  #recordWritten(key: string, body: Uint8Array | null, writer: string): void {
    if (!body) {
      this.#fail("record-deleted", `${writer} deleted ${key}`);
      return;
    }
    let record: OwnerRecord;
    try {
      record = decodeOwnerRecord(body, key);
    } catch (e) {
      this.#fail(
        "record-malformed",
        `${writer} wrote a record that cannot be read: ${describe(e)}`,
      );
      return;
    }
    const before = this.#records.get(key);
    this.#records.set(key, record);
    if (record.state === "held") {
      this.#data.took(key.slice("owners/".length), record.generation, record.process);
    }
    const writer_ = this.#byToken.get(record.process);
    if (record.state === "held" && writer_ && !writer_.plane?.valid()) {
      // A take landing while its process's lease is not valid: fixed by
      // TakeOptions.mayWrite, so this fails the run if it shows again (a
      // put outliving the lease it was sent under would).
      this.#suspect(key.slice("owners/".length), record.generation, "take-without-lease");
    }
    this.#log(writer, `${key.slice(7 + "default/".length)} ← ${describeRecord(record)}`);
    if (!before) return;
    if (record.generation < before.generation) {
      this.#fail(
        "generation-backwards",
        `${key} went from generation ${before.generation} to ${record.generation}`,
      );
    } else if (record.state === "held" && record.generation === before.generation) {
      this.#fail(
        "generation-reused",
        `${key} held again at generation ${record.generation} (${describeRecord(before)} before)`,
      );
    }
  }

  // ----------------------------------------------------------------- trace

  #log(who: string, message: string): void {
    const t = ((this.#sched.now - EPOCH) / 1000).toFixed(3).padStart(8);
    this.#trace.add(this.#disk.redact(`${t} ${who.padEnd(4)} ${message}`));
  }
}

function short(key: ActorKey): string {
  return `${key.class}/${key.name}`;
}

function position(p: { txid: bigint; checksum: bigint }): string {
  return `TXID ${p.txid} (checksum ${p.checksum.toString(16).padStart(16, "0")})`;
}

function sameIds(a: Set<number>, b: Set<number>): boolean {
  if (a.size !== b.size) return false;
  for (const id of a) if (!b.has(id)) return false;
  return true;
}

/** What one set of ids has that the other lacks, briefly. */
function diffIds(owner: Set<number>, chain: Set<number>): string {
  const only = (a: Set<number>, b: Set<number>) => [...a].filter((id) => !b.has(id)).slice(0, 8);
  return `only the owner has ${JSON.stringify(only(owner, chain))}, only the chain ` +
    JSON.stringify(only(chain, owner));
}

function describeRecord(record: OwnerRecord | undefined): string {
  if (!record) return "none";
  return `${record.node}:${record.process.slice(0, 4)} ${record.state} gen ${record.generation}`;
}

function describe(e: unknown): string {
  return e instanceof Error ? `${e.name}: ${e.message}` : String(e);
}
