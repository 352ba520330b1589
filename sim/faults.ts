/**
 * The faults of a run, as its seed draws them: every so often one of the
 * kinds the swarm turned on, at a random node (crashes, clean stops, pauses,
 * zombies, partitions from the bucket, partitions between two nodes, bucket
 * storms and outages), and the quiet phase at the end that clears them all.
 * What a fault does to a process (its crash, stop, pause) is the world's;
 * this file decides when and how hard.
 *
 * @module
 */

import { between } from "./bucket.ts";
import { exp, type SimContext } from "./context.ts";
import { losePower } from "./disk.ts";
import type { SimNode, SimProcess } from "./processes.ts";
import type { Swarm } from "./swarm.ts";
import type { Weather } from "./weather.ts";

/** What the faults do to processes: the world's lifecycle of them. */
export interface ProcessControl {
  /** Starts a process of `node` (none runs, or the one running is frozen). */
  start(node: SimNode): void;
  /** A clean stop (SIGTERM). */
  stop(proc: SimProcess): void;
  /** The process is gone at once; the node restarts after `restartAfterMs`. */
  crash(proc: SimProcess, restartAfterMs: number): void;
  /** The process exits for good (its machine leaves the cluster). */
  exit(proc: SimProcess): void;
  /** The newest process of `node` that has not died. */
  alive(node: SimNode): SimProcess | undefined;
}

/** A partition between two nodes: from `a` to `b`, and back unless one way. */
export interface Split {
  a: string;
  b: string;
  mode: "refuse" | "silent";
  oneWay: boolean;
  until: number;
}

/**
 * The faults of one run.
 *
 * @example
 * ```ts ignore
 * const faults = new Faults(ctx, weather, control);
 * sched.after(1000, () => faults.step());
 * ```
 */
export class Faults {
  /** Partitions between two nodes. */
  readonly splits: Split[] = [];

  constructor(
    readonly ctx: SimContext,
    readonly weather: Weather,
    readonly control: ProcessControl,
  ) {}

  /** One fault now, and the next one scheduled. */
  step(): void {
    const ctx = this.ctx;
    if (ctx.quiet || ctx.violation) return;
    ctx.sched.after(exp(ctx.draws.chaos, ctx.swarm.chaosGapMs), () => this.step());
    const f = ctx.swarm.faults;
    const actions = (Object.keys(f) as (keyof Swarm["faults"])[]).filter((k) =>
      f[k] && k !== "retire"
    );
    if (actions.length === 0) return;
    const r = ctx.draws.chaos;
    const action = actions[Math.floor(r.next() * actions.length)];
    const node = ctx.nodes[Math.floor(r.next() * ctx.nodes.length)];
    const proc = node.current;
    switch (action) {
      case "crash":
        if (proc && !proc.dead) this.control.crash(proc, between(r, 200, 30_000));
        break;
      case "stop":
        if (proc && proc.state === "serving" && !proc.paused) {
          ctx.stats.stops++;
          ctx.log(proc.name, "stop requested (SIGTERM)");
          this.control.stop(proc);
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
        this.pause(proc, ms);
        break;
      }
      case "zombie":
        if (!proc || proc.dead || proc.paused || proc.state !== "serving") break;
        // The machine is frozen, and a second process is started with its id meanwhile.
        ctx.stats.zombies++;
        this.pause(proc, between(r, 20_000, 60_000));
        ctx.log(proc.name, "frozen; a new process of the node will start beside it");
        ctx.sched.after(between(r, 500, 5_000), () => this.control.start(node));
        break;
      case "partition": {
        const ms = between(r, 500, 25_000);
        node.partitionUntil = Math.max(node.partitionUntil, ctx.sched.now + ms);
        node.partitionMode = r.next() < 0.5 ? "refuse" : "silent";
        ctx.stats.partitions++;
        ctx.log(
          "sim",
          `node ${node.id} cut off from the bucket for ${
            (ms / 1000).toFixed(1)
          } s (${node.partitionMode})`,
        );
        for (const p of ctx.procs) if (p.node === node) p.readySince = undefined;
        ctx.sched.at(node.partitionUntil, () => this.#partitionEnds(node));
        break;
      }
      case "netsplit": {
        const others = ctx.nodes.filter((n) => n !== node);
        const other = others[Math.floor(r.next() * others.length)];
        // Some outlast the forwarder's 30 s wait for an answer.
        const ms = r.next() < 0.7 ? between(r, 500, 15_000) : between(r, 15_000, 60_000);
        const mode = r.next() < 0.5 ? "refuse" : "silent";
        const oneWay = r.next() < 0.3;
        this.splits.push({ a: node.id, b: other.id, mode, oneWay, until: ctx.sched.now + ms });
        ctx.stats.netsplits++;
        ctx.log(
          "sim",
          `network ${node.id} ${oneWay ? "->" : "<->"} ${other.id} cut for ${
            (ms / 1000).toFixed(1)
          } s (${mode})`,
        );
        break;
      }
      case "storm":
        if (this.weather.beginStorm(between(r, 5_000, 40_000), r)) ctx.stats.storms++;
        break;
      case "outage": {
        const ms = between(r, 500, 30_000);
        this.weather.outage(ms);
        ctx.stats.outages++;
        ctx.log("sim", `bucket outage for ${(ms / 1000).toFixed(1)} s`);
        break;
      }
    }
  }

  /**
   * What a crash left on the machine's disk: its files as they were, or,
   * as the seed draws, an empty data directory (a new disk) or a power loss.
   * Only the directory its node's processes use now, and none another
   * process still has open.
   */
  diskAfterCrash(proc: SimProcess): void {
    const ctx = this.ctx;
    const node = proc.node;
    if (proc.dataDir !== node.dataDir || this.control.alive(node)) return;
    const r = ctx.draws.disk.next();
    if (r < ctx.swarm.disk.emptyDir) {
      ctx.stats.emptyDirs++;
      ctx.disk.wipe(node.dataDir);
      ctx.log("sim", `node ${node.id} restarts with an empty data directory`);
    } else if (r < ctx.swarm.disk.emptyDir + ctx.swarm.disk.powerLoss) {
      ctx.stats.powerLosses++;
      const effects = losePower(node.dataDir, ctx.draws.disk);
      const list = [...effects].map(([path, effect]) => `${path} ${effect}`).join(", ");
      ctx.log("sim", `node ${node.id} lost its power: ${list || "no database"}`);
    }
  }

  /** The machine is frozen for `ms` (SIGSTOP-like): its process's timers and events wait. */
  pause(proc: SimProcess, ms: number): void {
    const ctx = this.ctx;
    ctx.stats.pauses++;
    proc.paused = true;
    proc.pausedAt = ctx.sched.now;
    proc.readySince = undefined;
    ctx.deaths.set(proc.token, proc);
    ctx.log(proc.name, `paused for ${(ms / 1000).toFixed(1)} s`);
    ctx.sched.after(ms, () => this.resume(proc));
  }

  resume(proc: SimProcess): void {
    const ctx = this.ctx;
    if (proc.dead || !proc.paused) return;
    proc.paused = false;
    proc.pausedMs += ctx.sched.now - proc.pausedAt;
    ctx.deaths.delete(proc.token);
    ctx.log(proc.name, "resumes");
    if (proc.state === "serving" && proc.node.net.partition() === undefined) {
      proc.readySince = ctx.sched.now;
    }
    ctx.sched.resume(proc);
  }

  #partitionEnds(node: SimNode): void {
    const ctx = this.ctx;
    if (ctx.sched.now < node.partitionUntil) return;
    ctx.log("sim", `node ${node.id} reaches the bucket again`);
    for (const p of ctx.procs) {
      if (p.node === node && p.state === "serving" && !p.paused) p.readySince = ctx.sched.now;
    }
  }

  /** No new faults: the weather clears, frozen processes resume, every node comes back. */
  beginQuiet(): void {
    const ctx = this.ctx;
    ctx.quiet = true;
    ctx.log("sim", "quiet phase: no more faults; every node comes back");
    if (ctx.swarm.faults.retire) {
      const node = ctx.nodes[Math.floor(ctx.draws.chaos.next() * ctx.nodes.length)];
      node.retired = true;
      if (node.restart) ctx.sched.cancel(node.restart);
      node.restart = undefined;
      ctx.log("sim", `node ${node.id} leaves the cluster for good`);
      for (const proc of [...ctx.procs]) if (proc.node === node) this.control.exit(proc);
    }
    this.weather.endStorm(true);
    this.weather.endOutages();
    for (const node of ctx.nodes) {
      if (node.partitionUntil > ctx.sched.now) {
        node.partitionUntil = ctx.sched.now;
        this.#partitionEnds(node);
      }
    }
    for (const proc of [...ctx.procs]) if (proc.paused) this.resume(proc);
    for (const node of ctx.nodes) {
      if (!node.retired && (!node.current || node.current.dead)) {
        if (node.restart) ctx.sched.cancel(node.restart);
        node.restart = undefined;
        const older = this.control.alive(node);
        if (older) node.current = older;
        else this.control.start(node);
      }
    }
  }
}
