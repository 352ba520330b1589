/**
 * The simulated machines and the node processes on them: a machine's clock,
 * its partitions and data directory; a process's state from its start to
 * its crash or exit, with the real node it runs (src/node/) and what the
 * invariants need to know of its past.
 *
 * @module
 */

import type { ActorKey } from "../src/actors/key.ts";
import type { Hold } from "../src/cluster/ownership.ts";
import type { NodeParts, WasmKeepNode } from "../src/node/mod.ts";
import type { MachineClock, ProcessClock } from "./clocks.ts";
import type { Owner, ScheduledEvent } from "./scheduler.ts";
import type { ProcessBucket, Reachability } from "./bucket.ts";
import type { SimExecutors } from "./executor_host.ts";

/** A machine: its id, clocks, partitions, and the process that runs on it now. */
export class SimNode {
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
export class SimProcess implements Owner {
  dead = false;
  paused = false;
  readonly deferred: ScheduledEvent[] = [];
  state: "starting" | "serving" | "stopping" | "exited" = "starting";
  /** True time since which it has served without a pause or partition. */
  readySince: number | undefined;
  clock!: ProcessClock;
  bucket!: ProcessBucket;
  dataDir!: string;
  /** The real node this process runs, and its parts. */
  wasmkeep!: WasmKeepNode;
  parts!: NodeParts;
  executors!: SimExecutors;
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

  /** Whether its lease is valid now (false before its node exists). */
  leaseValid(): boolean {
    return this.parts?.plane?.valid() ?? false;
  }

  /** The hold it acts on for `actor` now, if it believes it holds it with a valid lease. */
  belief(actor: ActorKey): Hold | undefined {
    if (this.dead || !this.parts || !this.leaseValid()) return undefined;
    return this.parts.host.holdOf(actor) as Hold | undefined;
  }
}
