/**
 * One simulated cluster, run from one seed: nodes built by the real
 * assembly (src/node/assemble.ts) and run by the real lifecycle
 * (src/node/node.ts), their executors the real pool and runtime with the
 * process boundary replaced (sim/executor_host.ts), on one
 * {@linkcode ObservedBucket} and the network of sim/network.ts; clients
 * sending requests for random actors through random nodes
 * (sim/workload.ts), and faults drawn from the seed: bucket weather
 * (sim/weather.ts), partitions of one machine from the bucket and between
 * two nodes, process pauses, crashes, clean stops, restarts through the id
 * check (with the same or an empty data directory, or after a power loss),
 * a second process started while the first is frozen, skewed and drifting
 * clocks, clients that leave.
 *
 * Each seed also draws which of those faults it uses and how hard (swarm
 * testing), so that runs differ in kind, not only in detail. The invariants
 * (sim/invariants.ts, docs/testing.md) are checked after every event, on
 * every write the bucket applies, at every event an actor runs, and at the
 * end. What this file holds of the node is its seams and the watching of
 * its parts; nothing of the node is written again here.
 *
 * @module
 */

import { type ActorKey, actorKeyString } from "../src/actors/key.ts";
import { nodeKey } from "../src/bucket/keys.ts";
import { randomHex, seededRandom } from "../src/bucket/random.ts";
import type { ForwardOutcome } from "../src/cluster/routing/peer_forwarding.ts";
import { defaultFailoverWaitMs, type WaitOutcome } from "../src/cluster/failover_wait.ts";
import { ANSWER_TIMEOUT_MS, CONNECT_TIMEOUT_MS } from "../src/http/forward.ts";
import { leaseTiming } from "../src/cluster/lease_timing.ts";
import { NodeIdInUse } from "../src/cluster/node_id_check.ts";
import { createLogger, type Logger } from "../src/log.ts";
import {
  assembleNode,
  NODE_DEFAULTS,
  type NodeOptions,
  type NodeSeams,
  WasmKeepNode,
} from "../src/node/mod.ts";
import { HistoryError } from "../src/replication/history.ts";
import { RestoreUnavailable } from "../src/replication/restore.ts";
import { ReplicationFailed } from "../src/replication/uploader.ts";
import { EventFailure } from "../src/executor/runtime.ts";
import { between, ObservedBucket, ProcessBucket } from "./bucket.ts";
import { MachineClock, ProcessClock, TrueClock } from "./clocks.ts";
import { describeError } from "../src/describe_error.ts";
import { Draws, elapsed, exp, short, type SimActor, type SimContext } from "./context.ts";
import { DataChecks } from "./data.ts";
import { RunDisk } from "./disk.ts";
import { Faults } from "./faults.ts";
import { type ActorObserver, opOf, SimExecutors } from "./executor_host.ts";
import { AppFollower } from "../src/deploy/app_follower.ts";
import { NodeStartError } from "../src/node/options.ts";
import type { NodeObservers } from "../src/node/observers.ts";
import { ObservedCatalog, SIM_APP, SimDeploys, simLoad } from "./deploys.ts";
import { serveConnection } from "./http_server.ts";
import { simSocketUpgrade } from "./sockets.ts";
import { SocketClients } from "./socket_clients.ts";
import { SimAlarms } from "./alarms.ts";
import { Invariants } from "./invariants.ts";
import { type LinkState, SimNetwork } from "./network.ts";
import { SimNode, SimProcess } from "./processes.ts";
import { Scheduler } from "./scheduler.ts";
import {
  DEFAULT_DURATION_MS,
  drawSwarm,
  EPOCH,
  noStats,
  type SimOptions,
  type SimResult,
  type Swarm,
  type Violation,
} from "./swarm.ts";
import { Trace } from "./trace.ts";
import { Weather } from "./weather.ts";
import { HolderMemory } from "../src/cluster/routing/holders.ts";

/**
 * The variant `trust-not-held`'s memory of holders: the first holder it
 * learned of an actor stays, whatever the holder answered since.
 */
class StickyHolders extends HolderMemory {
  override remember(actor: string, node: string): void {
    if (this.holderOf(actor) === undefined) super.remember(actor, node);
  }
  override forget(): void {}
}
import { QUIET_MS, Workload } from "./workload.ts";

export { DEFAULT_DURATION_MS, EPOCH };
export type { SimOptions, SimResult, Stats, Swarm, Violation } from "./swarm.ts";

/**
 * Tolerances of the request bounds: scheduling and clock drift (±2,000 ppm
 * of 35 s is 70 ms) and, for a kept request, the answer of a look under way
 * when the wait runs out (its reads end then).
 */
const FORWARD_SLACK_MS = 200;
const KEPT_SLACK_MS = 500;

/** Virtual time between two checks of every actor's chain against its owner's database. */
const CHECKPOINT_MS = 20_000;

/** After the final probe: time for the last uploads to land before the final check. */
const SETTLE_MS = 25_000;

/** The classes of the run's actors (the simulated program, sim/executor_host.ts). */
const CLASSES = ["counter", "room", "cart"];

/** The sleepers of a run with alarm clients (sim/context.ts). */
const SLEEPERS = 2;

/** Runs one seed. */
export async function runSeed(options: SimOptions): Promise<SimResult> {
  const world = new World(options);
  return await world.run();
}

class World implements SimContext {
  readonly options: SimOptions;
  readonly seed: number;
  readonly variant: SimOptions["variant"];
  readonly sched = new Scheduler(EPOCH);
  readonly trace: Trace;
  readonly draws: Draws;
  readonly timing;
  readonly baseTiming;
  readonly swarm: Swarm;
  readonly stats = noStats();
  readonly store: ObservedBucket;
  readonly data: DataChecks;
  readonly disk: RunDisk;
  readonly nodes: SimNode[] = [];
  readonly actors: SimActor[] = [];
  readonly rooms: SimActor[] = [];
  readonly sleepers: SimActor[] = [];
  readonly procs = new Set<SimProcess>();
  readonly byToken = new Map<string, SimProcess>();
  readonly byName = new Map<string, SimProcess>();
  readonly deaths = new Map<string, SimProcess>();
  quiet = false;
  #violation: Violation | undefined;
  readonly #network: SimNetwork;
  readonly #weather: Weather;
  readonly #invariants: Invariants;
  readonly #workload: Workload;
  readonly #faults: Faults;
  /** How long a GET is kept for a takeover: the CLI's default (25 s with the default ttl). */
  readonly #failoverWaitMs: number;
  readonly #durationMs: number;
  readonly #quietAt: number;
  readonly #socketClients: SocketClients;
  readonly #alarms: SimAlarms;
  readonly #deploys: SimDeploys;

  constructor(options: SimOptions) {
    this.options = options;
    this.seed = options.seed >>> 0;
    this.variant = options.variant;
    this.trace = new Trace(options.traceLines ?? 200);
    this.trace.echo = options.echo;
    this.draws = new Draws(this.seed);
    this.baseTiming = leaseTiming(options.ttlMs);
    this.timing = this.variant?.timing ? this.variant.timing(this.baseTiming) : this.baseTiming;
    this.#failoverWaitMs = defaultFailoverWaitMs(this.baseTiming);
    this.#network = new SimNetwork({
      sched: this.sched,
      latencyMs: () => this.#peerLatency(),
      link: (from, to) => this.#link(from, to),
    });
    this.#durationMs = Math.max(options.durationMs ?? DEFAULT_DURATION_MS, QUIET_MS + 10_000);
    this.#quietAt = EPOCH + this.#durationMs - QUIET_MS;
    this.swarm = drawSwarm(this.draws.settings, options.nodes);
    this.store = new ObservedBucket({
      clock: new TrueClock(this.sched),
      random: this.draws.bucket,
    });
    this.#weather = new Weather(
      this.sched,
      this.store,
      this.draws.net,
      this.swarm.calmLatencyMs,
      options.lateMarkers ?? false,
      (message) => this.log("sim", message),
    );
    this.data = new DataChecks((kind, message) => this.fail(kind, message), () => elapsed(this));
    this.disk = new RunDisk(this.seed);
    this.#invariants = new Invariants(this, this.#weather);
    this.store.onApplied = (key, body, writer) => this.#invariants.applied(key, body, writer);
    this.#workload = new Workload(this, this.#invariants, this.#quietAt);
    this.#socketClients = new SocketClients(
      this,
      (owner) => this.#network.connector({ owner, machine: "clients/0" }),
      this.#quietAt + QUIET_MS / 2,
      (node, room) => this.#workload.readVia(node, room),
    );
    this.#alarms = new SimAlarms(
      this,
      this.#quietAt,
      (node, actor, at) => this.#workload.setAlarmVia(node, actor, at),
    );
    this.#deploys = new SimDeploys(this, this.#quietAt, CLASSES);
    this.#faults = new Faults(this, this.#weather, {
      start: (node) => void this.#start(node),
      stop: (proc) => void this.#stop(proc),
      crash: (proc, restartAfterMs) => this.#crash(proc, restartAfterMs),
      exit: (proc) => this.#exit(proc),
      alive: (node) => this.#alive(node),
    });
  }

  get violation(): Violation | undefined {
    return this.#violation;
  }

  fail(kind: string, message: string): void {
    if (this.#violation) return;
    this.#violation = { kind, message, at: elapsed(this) };
    this.log("sim", `VIOLATION ${kind}: ${message}`);
    this.sched.stop();
  }

  log(who: string, message: string): void {
    const t = (elapsed(this) / 1000).toFixed(3).padStart(8);
    this.trace.add(this.disk.redact(`${t} ${who.padEnd(4)} ${message}`));
  }

  async run(): Promise<SimResult> {
    const unhandled = (event: PromiseRejectionEvent) => {
      event.preventDefault();
      this.fail(
        "unhandled-rejection",
        `a promise rejected with nobody to handle it: ${describeError(event.reason, "named")}`,
      );
    };
    globalThis.addEventListener("unhandledrejection", unhandled);
    try {
      await this.#deploys.prepare();
      this.#setUp();
      const check = () => this.#invariants.check();
      const end = EPOCH + this.#durationMs;
      // Between stretches of the time line, every actor's chain is checked.
      for (let at = EPOCH + CHECKPOINT_MS; !this.#violation; at += CHECKPOINT_MS) {
        await this.sched.runUntil(Math.min(at, end), check);
        if (this.#violation || at >= end) break;
        this.#workload.checkUnanswered(false);
        await this.#invariants.checkChains(false);
      }
      // Before the probe takes every actor in (and arms the alarms it reads):
      // the alarms due by now fired by their own means, a sweep's included.
      if (!this.#violation) this.#alarms.checkFired();
      if (!this.#violation) await this.#workload.finalProbe();
      if (!this.#violation) this.#invariants.checkDeaths();
      if (!this.#violation) {
        this.log("sim", "settling: the last uploads land");
        await this.sched.runUntil(this.sched.now + SETTLE_MS, check);
      }
      if (!this.#violation) this.#workload.checkUnanswered(true);
      if (!this.#violation) await this.#invariants.checkChains(true);
    } catch (e) {
      this.fail("simulator-error", `the simulation threw: ${describeError(e, "named")}`);
    } finally {
      globalThis.removeEventListener("unhandledrejection", unhandled);
      // Nothing of this run may fire in the next one's drains, nor keep a file open.
      for (const proc of this.procs) {
        proc.dead = true;
        proc.executors?.killAll();
      }
      this.disk.remove();
    }
    for (const node of this.nodes) this.stats.clockSteps += node.machine.steps;
    this.stats.events = this.sched.fired;
    this.trace.add(`end ${this.#violation ? `FAIL ${this.#violation.kind}` : "ok"}`);
    return {
      seed: this.seed,
      variant: this.variant?.name,
      ok: !this.#violation,
      violation: this.#violation,
      trace: this.trace.last(),
      digest: this.trace.digest(),
      virtualMs: elapsed(this),
      swarm: this.swarm,
      stats: this.stats,
      known: this.#invariants.known(),
    };
  }

  // ---------------------------------------------------------------- set-up

  #setUp(): void {
    const swarm = this.swarm;
    const clocks = this.draws.clocks;
    const skew = this.timing.skewMs;
    this.log(
      "sim",
      `seed ${this.seed}${this.variant ? ` variant ${this.variant.name}` : ""}: ${
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
      const machine = new MachineClock(this.sched, {
        offsetMs,
        driftPpm,
        skewMs: skew,
        random: seededRandom(Math.floor(clocks.next() * 2 ** 32)),
      });
      const node = new SimNode(id, machine);
      node.dataDir = this.disk.dataDir(`${id}-${++node.dataDirs}`);
      node.net = {
        partition: () =>
          this.quiet || this.sched.now >= node.partitionUntil ? undefined : node.partitionMode,
        answerLatencyMs: () => this.#weather.answerLatency(),
        lateWriteMs: (key) => this.#weather.lateWrite(key),
      };
      this.nodes.push(node);
      this.log(
        "sim",
        `node ${id}: clock offset ${offsetMs.toFixed(1)} ms, drift ${driftPpm.toFixed(0)} ppm`,
      );
      this.sched.after(this.draws.chaos.next() * 2000, () => this.#start(node));
    }
    for (let i = 0; i < swarm.actors; i++) {
      const key = { tenant: "default", class: CLASSES[i % CLASSES.length], name: `x${i}` };
      this.actors.push({ key, id: actorKeyString(key), short: short(key) });
    }
    for (let i = 0; i < swarm.sockets.rooms; i++) {
      const key = { tenant: "default", class: "room", name: `s${i}` };
      this.rooms.push({ key, id: actorKeyString(key), short: short(key) });
    }
    for (let i = 0; swarm.alarms.setters > 0 && i < SLEEPERS; i++) {
      const key = { tenant: "default", class: "counter", name: `z${i}` };
      this.sleepers.push({ key, id: actorKeyString(key), short: short(key) });
    }
    this.sched.after(exp(this.draws.chaos, swarm.chaosGapMs), () => this.#faults.step());
    this.sched.after(
      exp(this.draws.clients, 1000 / swarm.clientRate),
      () => this.#workload.clientStep(),
    );
    this.#socketClients.start();
    this.#alarms.start();
    this.#deploys.start();
    this.sched.at(this.#quietAt, () => this.#faults.beginQuiet());
  }

  // ------------------------------------------------------------- processes

  /** The newest process of `node` that has not died, if any. */
  #alive(node: SimNode): SimProcess | undefined {
    let found: SimProcess | undefined;
    for (const proc of this.procs) if (proc.node === node && !proc.dead) found = proc;
    return found;
  }

  /** The options of a node of this run, as `serve` would be given them. */
  #nodeOptions(node: SimNode, dataDir: string): NodeOptions {
    return {
      ...NODE_DEFAULTS,
      nodeId: node.id,
      hostname: "sim",
      port: 8080,
      dataDir,
      // The classes come from the app's versions (sim/deploys.ts).
      actors: [],
      app: SIM_APP,
      bucketUrl: "sim://bucket",
      idleMs: this.swarm.idleMs,
      databaseIdleMs: this.swarm.databaseIdleMs,
      executors: this.swarm.executors,
      historyRetentionMs: this.swarm.retentionMs,
      cluster: {
        // Nodes talk plain HTTP (TLS between nodes is not simulated).
        plaintext: "accept",
        failoverWaitMs: this.#failoverWaitMs,
        leaseTtlMs: this.baseTiming.ttlMs,
      },
    };
  }

  async #start(node: SimNode): Promise<void> {
    if (this.#violation || node.retired) return;
    if (node.current && !node.current.dead && !node.current.paused) return;
    // A process started while another of its node still lives (frozen) is
    // on another machine with the same node id: a data directory of its own.
    if (this.#alive(node)) node.dataDir = this.disk.dataDir(`${node.id}-${++node.dataDirs}`);
    const incarnation = ++node.incarnations;
    const token = randomHex(this.draws.tokens, 8);
    const proc = new SimProcess(node, incarnation, token);
    proc.dataDir = node.dataDir;
    proc.machine = `${node.id}/${node.dataDirs}`;
    proc.authority = `${node.id}-${node.dataDirs}.sim:8080`;
    const clock = new ProcessClock(this.sched, node.machine, proc);
    proc.clock = clock;
    const ownHeartbeat = nodeKey(node.id);
    const filter = this.variant?.ownHeartbeatPut;
    proc.bucket = new ProcessBucket(
      this.store,
      this.sched,
      proc,
      proc.name,
      node.net,
      filter ? (key, o) => key === ownHeartbeat ? filter(o) : o : undefined,
      (key, body) => this.data.sent(key, body, proc.name),
    );
    const log = this.#logger(proc);
    const random = seededRandom(Math.floor(this.draws.waits.next() * 2 ** 32));
    proc.executors = new SimExecutors({
      sched: this.sched,
      owner: proc,
      clock,
      bucket: proc.bucket,
      log,
      random,
      nodeId: node.id,
      observer: this.#observer(proc),
      peek: (key) => this.store.shadow.get(key),
      broken: this.variant?.replication,
      // Each event as the pool sends it: the node's lease, and one holder.
      onEvent: (actor, generation, request, socket, alarm) => {
        this.#invariants.actorEvent(proc, actor, generation);
        if (socket) this.#invariants.socketEvent(proc, actor, generation, socket);
        else if (alarm === undefined) {
          const op = opOf(request);
          this.#workload.opRuns(proc, op.id);
          if (op.kind === "alarm") this.#alarms.opRan(actorKeyString(actor), op.id, op.at);
          if (op.kind === "delete") this.#alarms.opRan(actorKeyString(actor), op.id);
        }
      },
      alarmFailEvery: this.swarm.alarms.failEvery,
      servesBehind: this.variant?.servesBehind,
      alarmNotListed: this.variant?.alarmNotListed,
    });
    // Forwards are timed once the node serves, as its requests are.
    let forwardsTimed = false;
    const seams: NodeSeams = {
      clock,
      random,
      log,
      bucket: proc.bucket,
      launcher: proc.executors,
      connect: this.#network.connector({ owner: proc, machine: proc.machine }),
      fileLimit: 20_000,
      processToken: token,
      observers: this.#observers(proc, () => forwardsTimed),
      upgradeSocket: simSocketUpgrade,
      listen: (handler) => {
        const stop = this.#network.listen(
          proc.authority,
          { owner: proc, machine: proc.machine },
          (conn) => void serveConnection(conn, handler, proc.authority, clock, random),
        );
        proc.stopListening = stop;
        return {
          url: `http://${proc.authority}`,
          shutdown: () => {
            stop();
            return Promise.resolve();
          },
        };
      },
      planted: {
        timing: this.variant?.timing,
        answerTimeoutMs: this.variant?.answerTimeoutMs,
        holders: this.variant?.holders === "sticky" ? () => new StickyHolders() : undefined,
        socketsIgnoreMoves: this.variant?.socketsIgnoreMoves,
        resendForwards: this.variant?.resendForwards,
        alarmSweepGraceMs: this.variant?.alarmSweepGraceMs,
        // The broken variant: an actor is free once its holder is not live in this view.
        takeRule: this.variant?.takeRule === "not-live"
          ? (plane) => (record) => !plane.membership.isLive(record.node)
          : undefined,
      },
    };
    const options = this.#nodeOptions(node, proc.dataDir);
    // The node follows the app as `serve --app` does: the real follower, the
    // simulated program for each class of a version.
    const catalog = new ObservedCatalog((version) => this.#deploys.applied(proc, version));
    const follower = new AppFollower({
      bucket: proc.bucket,
      app: SIM_APP,
      clock,
      log,
      catalog,
      load: simLoad,
      hasAccessFlags: false,
    });
    proc.parts = assembleNode({
      options,
      catalog,
      follower,
      dataDir: proc.dataDir,
      bucketUrl: options.bucketUrl!,
    }, seams);
    // `serve` reads the app's current version once before it listens (node.ts
    // servedClasses); here at once, not awaited: until it applies one, the
    // node is not ready. The lifecycle starts its checks every 3 s.
    void follower.check();
    this.options.built?.(proc.parts);
    this.#watchLease(proc);
    node.current = proc;
    this.procs.add(proc);
    this.byToken.set(token, proc);
    this.byName.set(proc.name, proc);
    this.stats.starts++;
    this.log(proc.name, `starts (process ${token})`);
    proc.wasmkeep = WasmKeepNode.fromParts(proc.parts);
    proc.wasmkeep.whenFailed.catch(() => this.#stopped(proc, "lost"));
    try {
      await proc.wasmkeep.whenReady;
    } catch (e) {
      if (proc.dead || proc.state !== "starting") return;
      if ((e as Error).cause instanceof NodeIdInUse) {
        this.stats.idInUse++;
        this.log(proc.name, `refused to start: node id in use`);
        this.#exit(proc);
        // An older process of the node that came back from a freeze still runs: it is the node.
        const older = this.#alive(node);
        if (older) node.current = older;
        else this.#scheduleRestart(node, between(this.draws.chaos, 1_000, 10_000));
        return;
      }
      if (e instanceof NodeStartError && e.message.includes("to check the tenant's apps")) {
        // `serve --app` exits when the bucket does not answer its check of
        // the tenant's apps (after the start-up probe): restarted, as a
        // supervisor would.
        this.stats.tenantCheckFailures++;
        this.log(proc.name, `could not check the tenant's apps: exits`);
        this.#exit(proc);
        this.#scheduleRestart(node, between(this.draws.chaos, 1_000, 10_000));
        return;
      }
      this.fail("start-failed", `${proc.name} could not start: ${describeError(e, "named")}`);
      return;
    }
    if (proc.dead || proc.state !== "starting") return;
    forwardsTimed = true;
    proc.state = "serving";
    if (!proc.paused && node.net.partition() === undefined) proc.readySince = this.sched.now;
    this.log(proc.name, `serving (lease ${proc.leaseValid() ? "valid" : "not valid"})`);
  }

  /** The changes of a node's lease, through its subscription. */
  #watchLease(proc: SimProcess): void {
    proc.parts.plane?.lease.subscribe({
      changed: (valid, cause) => {
        this.log(proc.name, valid ? "lease valid" : `lease not valid (${cause})`);
        // Its actors are dropped, uploads not waited for: an alarm may fire again.
        if (!valid) this.#alarms.fault(proc);
        if (!valid && cause === "expired" && proc.state === "serving") this.stats.leaseExpiries++;
      },
      lost: (reason) => {
        this.stats.leasesLost++;
        this.log(proc.name, `lease lost (${reason.kind}): stops`);
        proc.state = "stopping";
        proc.readySince = undefined;
      },
    });
  }

  /**
   * What the invariants watch of a node's parts, through the observers each
   * part is built with: its takes and releases, its dispatches (time a kept
   * request handed on), the bound of its kept requests, and the bounds of
   * its forwards once it serves (`forwardsTimed`).
   */
  #observers(proc: SimProcess, forwardsTimed: () => boolean): NodeObservers {
    return {
      ownership: {
        took: (hold) => {
          this.stats.takes++;
          this.log(proc.name, `took ${short(hold.actor)} gen ${hold.generation}`);
        },
        releasing: (hold) => {
          this.stats.releases++;
          this.log(proc.name, `releases ${short(hold.actor)} gen ${hold.generation}`);
        },
      },
      // Its actors are dropped, uploads not waited for: an alarm may fire again.
      host: {
        gaveUp: () => this.#alarms.fault(proc),
        executorReplaced: () => this.#alarms.fault(proc),
        dispatching: (key) => {
          const span = proc.dispatchStarts(actorKeyString(key), this.sched.now);
          return () => void (span.end = this.sched.now);
        },
      },
      alarmTimers: {
        arming: (key, due, source) => {
          if (source === "sweep") this.#alarms.swept(proc, key, due);
        },
      },
      waits: { keeping: (actor) => this.#keeping(proc, actor) },
      forwards: {
        forwarding: (node, actor) =>
          forwardsTimed() ? this.#forwarding(proc, node, actor) : undefined,
      },
    };
  }

  /**
   * A kept request given up must be answered within the wait (the spec:
   * --failover-wait-secs "sets how long a request is kept at most"). A look
   * that asked for the actor here handed the request on, as one that
   * forwards it does (then "the usual" bounds apply): the time its take and
   * event took is not the wait's.
   */
  #keeping(proc: SimProcess, actor: string): (outcome: WaitOutcome, gaveUp: boolean) => void {
    const start = this.sched.now;
    const paused = proc.pausedSoFar(start);
    return (outcome, gaveUp) => {
      this.stats.kept[outcome] = (this.stats.kept[outcome] ?? 0) + 1;
      if (!gaveUp) return;
      const now = this.sched.now;
      const handedOn = proc.dispatchTime(actor, start, now);
      const ms = now - start - (proc.pausedSoFar(now) - paused) - handedOn;
      this.stats.longestGiveUpMs = Math.max(this.stats.longestGiveUpMs, ms);
      if (outcome !== "over_cap" && ms > this.#failoverWaitMs + KEPT_SLACK_MS) {
        this.fail(
          "kept-past-bound",
          `${proc.name} kept a request for ${actor} ${(ms / 1000).toFixed(3)} s before its ` +
            `503 (${outcome}); the wait is ${this.#failoverWaitMs / 1000} s`,
        );
      }
    };
  }

  /**
   * Times a forward against the forwarder's bounds (a connection within
   * 5 s, the answer within 30 s of the write), leaving out the forwarding
   * process's pauses; the variant `forward-resends` sends a request again
   * after it may have been written (the node's planted `resendForwards`).
   */
  #forwarding(proc: SimProcess, node: string, actor: ActorKey): (outcome: ForwardOutcome) => void {
    const bound = CONNECT_TIMEOUT_MS + ANSWER_TIMEOUT_MS + FORWARD_SLACK_MS;
    this.stats.forwards++;
    this.#invariants.forwarding(proc, node, actor);
    const start = this.sched.now;
    const paused = proc.pausedSoFar(start);
    return (outcome) => {
      const ms = this.sched.now - start - (proc.pausedSoFar(this.sched.now) - paused);
      this.stats.longestForwardMs = Math.max(this.stats.longestForwardMs, ms);
      if (outcome.kind === "failed") this.stats.forwardFailures++;
      if (outcome.kind === "not-held") {
        this.stats.notHeld++;
        this.#invariants.notHeld(proc, node, actor);
      }
      if (ms > bound && !this.variant?.resendForwards) {
        this.fail(
          "forward-past-bound",
          `${proc.name} forwarded a request to ${node} for ${(ms / 1000).toFixed(3)} s ` +
            `(the bound is ${bound / 1000} s: a connection in 5 s, the answer in 30 s)`,
        );
      }
    };
  }

  /** A clean stop (SIGTERM): the real node's. */
  async #stop(proc: SimProcess): Promise<void> {
    if (proc.dead || proc.state === "stopping" || proc.state === "exited") return;
    proc.state = "stopping";
    proc.readySince = undefined;
    await proc.wasmkeep.stop();
    this.#stopped(proc, "stop");
  }

  /** The node stopped (cleanly, or after its lease was lost): the process exits. */
  #stopped(proc: SimProcess, why: "stop" | "lost"): void {
    if (proc.dead) return;
    this.log(proc.name, `stopped (${why})`);
    this.#exit(proc);
    this.#scheduleRestart(
      proc.node,
      why === "lost"
        ? between(this.draws.chaos, 1_000, 10_000)
        : between(this.draws.chaos, 1_000, 20_000),
    );
  }

  #crash(proc: SimProcess, restartAfterMs: number): void {
    this.stats.crashes++;
    this.log(proc.name, `crashes (restart in ${(restartAfterMs / 1000).toFixed(1)} s)`);
    this.#exit(proc);
    this.#faults.diskAfterCrash(proc);
    if (proc.node.current === proc) this.#scheduleRestart(proc.node, restartAfterMs);
  }

  #exit(proc: SimProcess): void {
    this.#network.kill(proc);
    proc.executors.killAll();
    proc.dead = true;
    proc.state = "exited";
    proc.readySince = undefined;
    this.procs.delete(proc);
    this.deaths.set(proc.token, proc);
  }

  #scheduleRestart(node: SimNode, delayMs: number): void {
    if (node.restart || node.retired) return;
    node.restart = this.sched.after(delayMs, () => {
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
      sink: (line) => this.log(proc.name, line.slice(line.indexOf(" ") + 1)),
      now: () => proc.clock.now(),
    });
  }

  /** What a process's executors report, checked as it happens. */
  #observer(proc: SimProcess): ActorObserver {
    const who = (generation: number) => `${proc.name} (gen ${generation})`;
    const wake = (actor: ActorKey) => `${proc.token} ${actorKeyString(actor)}`;
    return {
      waking: (actor) => this.#invariants.wakes.set(wake(actor), elapsed(this)),
      restored: (actor, generation, ids, txid) => {
        this.stats.restores++;
        // What a restore reads is the history as of its start: writes
        // acknowledged since (by a newer holder) are not its to hold.
        this.data.saw(
          actorKeyString(actor),
          who(generation),
          `after its restore of ${short(actor)}`,
          ids,
          txid,
          this.#invariants.wakes.get(wake(actor)),
        );
      },
      read: (actor, generation, ids, txid) => {
        this.stats.reads++;
        this.data.saw(
          actorKeyString(actor),
          who(generation),
          `in a read of ${short(actor)}`,
          ids,
          txid,
        );
      },
      committed: (actor, _generation, op) => {
        if (op.kind === "durable") this.stats.durableWrites++;
        else this.stats.plainWrites++;
        this.data.committed(actorKeyString(actor), op);
      },
      alarmFired: (actor, generation, due) => this.#alarms.fired(proc, actor, generation, due),
      ran: (actor, generation, seq) => this.#deploys.ran(proc, actor, generation, seq),
      answered: (actor, generation, seq) => this.#deploys.answered(proc, actor, generation, seq),
      behind: () => void this.stats.behindRefusals++,
      deleted: (actor, generation) => {
        this.#deploys.deleted(actorKeyString(actor));
        this.stats.deletes++;
        this.data.deleted(actorKeyString(actor));
        this.log(proc.name, `${short(actor)} deleted itself (gen ${generation})`);
      },
      runs: (actor, generation) => this.#invariants.statementRuns(proc, actor, generation),
      openFailed: (actor, generation, error, timedOut) => {
        this.stats.restoreFailures++;
        // A restore the event's limit abandoned rejects with the abort's reason.
        if (proc.dead || timedOut) return;
        if (error instanceof HistoryError) {
          this.fail(
            "history-unrestorable",
            `${who(generation)} could not restore ${short(actor)}: ${
              describeError(error, "named")
            }`,
          );
        } else if (
          !(error instanceof RestoreUnavailable || error instanceof ReplicationFailed ||
            error instanceof EventFailure)
        ) {
          this.fail(
            "replica-open-failed",
            `${who(generation)} could not open ${short(actor)}'s replica: ${
              describeError(error, "named")
            }`,
          );
        }
      },
    };
  }

  // ------------------------------------------------------------------ network

  /** The path between two machines now, as the partitions between their nodes make it. */
  #link(from: string, to: string): LinkState {
    if (this.quiet) return { state: "up" };
    const a = from.slice(0, from.indexOf("/"));
    const b = to.slice(0, to.indexOf("/"));
    let silentUntil = -Infinity;
    for (const split of this.#faults.splits) {
      if (split.until <= this.sched.now) continue;
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
    const max = this.swarm.peerLatencyMs;
    const r = this.draws.peers;
    return r.next() < 0.9 ? between(r, 0.02, max) : between(r, max, 20 * max);
  }
}
