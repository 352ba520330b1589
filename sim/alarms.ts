/**
 * Alarms in the simulator (issue 19): clients that set actors' alarms
 * through any node, and what the run's firings must show.
 *
 * - `alarm-early`: an on-alarm runs only once its alarm is due, on the
 *   clock of the node that runs it.
 * - `alarm-fired-twice`: an alarm fires again (on-alarm succeeded twice for
 *   one due time) only when a fault explains it: the process that fired it
 *   first died, or its lease lapsed, or it gave an actor up or lost an
 *   executor, after that firing (its commit may not have reached the
 *   bucket). Each explained one is counted (`alarmRefirings`).
 * - `alarm-swept-early`: a sweep arms only alarms overdue by more than the
 *   lease period plus grace (the spec's "fires alarms overdue by more than a
 *   lease period plus grace"), on the sweeping node's clock: an alarm whose
 *   owner is alive is left to it.
 * - `alarm-not-fired`: after the quiet phase (before the final probe asks
 *   every actor, so an alarm nobody asks for must be found by a sweep), the alarm of the
 *   last acknowledged set to run on its actor fired, unless a delete ran
 *   after it. Sets in flight together run in any order (a kept request may
 *   run after one sent later and forwarded), so the order is the one their
 *   events ran in; a set that ran after it and was not acknowledged may
 *   have committed, so its due time counts as well.
 *
 * @module
 */

import { type ActorKey, actorKeyString } from "../src/actors/key.ts";
import { between } from "./bucket.ts";
import { exp, short, type SimActor, type SimContext } from "./context.ts";
import type { SimNode, SimProcess } from "./processes.ts";

/** The share of alarm sets that go to a sleeper (an actor no client asks for). */
const SLEEPER_SHARE = 0.25;

/** An alarm's first firing. */
interface Firing {
  proc: SimProcess;
  generation: number;
  at: number;
}

/**
 * The alarms of one run: their clients and their checks.
 *
 * @example
 * ```ts ignore
 * const alarms = new SimAlarms(ctx, quietAt, (node, actor, at) => workload.setAlarmVia(node, actor, at));
 * alarms.start();
 * ```
 */
export class SimAlarms {
  readonly #ctx: SimContext;
  readonly #quietAt: number;
  readonly #set: (node: SimNode, actor: SimActor, at: number) => AlarmSet;
  /** First firings, by `actor due`. */
  readonly #fired = new Map<string, Firing>();
  /** The sets and deletes that reached an executor, by actor id, in the order their events ran. */
  readonly #ran = new Map<string, RanOp[]>();
  /** The ops of the sets acknowledged. */
  readonly #acked = new Set<number>();
  readonly #actors = new Map<string, SimActor>();
  /** The latest fault of each process (lease lapse, give-up, executor lost), by token. */
  readonly #faultAt = new Map<string, number>();

  constructor(
    ctx: SimContext,
    quietAt: number,
    set: (node: SimNode, actor: SimActor, at: number) => AlarmSet,
  ) {
    this.#ctx = ctx;
    this.#quietAt = quietAt;
    this.#set = set;
  }

  /** Starts the run's alarm clients, a little apart. */
  start(): void {
    const r = this.#ctx.draws.alarms;
    for (let i = 0; i < this.#ctx.swarm.alarms.setters; i++) {
      this.#ctx.sched.after(between(r, 500, 10_000), () => this.#step());
    }
  }

  /** One set by one client, and the next one after a gap. */
  #step(): void {
    const ctx = this.#ctx;
    if (ctx.violation || ctx.sched.now >= this.#quietAt) return;
    const r = ctx.draws.alarms;
    ctx.sched.after(exp(r, ctx.swarm.alarms.gapMs), () => this.#step());
    const asked = ctx.actors[Math.floor(r.next() * ctx.actors.length)];
    // Drawn apart, so that the rest of the run's alarms are those it had before sleepers.
    const s = ctx.draws.sleepers;
    const actor = ctx.sleepers.length > 0 && s.next() < SLEEPER_SHARE
      ? ctx.sleepers[Math.floor(s.next() * ctx.sleepers.length)]
      : asked;
    const node = ctx.nodes[Math.floor(r.next() * ctx.nodes.length)];
    const due = Math.round(ctx.sched.now + between(r, -5_000, 30_000));
    this.#actors.set(actor.id, actor);
    const { op, acked } = this.#set(node, actor, due);
    void acked.then((yes) => {
      if (!yes) return;
      ctx.stats.alarmsSet++;
      this.#acked.add(op);
    });
  }

  /** An event of a client's set (`due`) or delete (`due` undefined) of `actorId` reached an executor. */
  opRan(actorId: string, op: number, due?: number): void {
    const ops = this.#ran.get(actorId) ?? [];
    ops.push({ op, due });
    this.#ran.set(actorId, ops);
  }

  /** `proc`'s lease lapsed, it gave an actor up, or it lost an executor. */
  fault(proc: SimProcess): void {
    this.#faultAt.set(proc.token, this.#ctx.sched.now);
  }

  /** `proc`'s sweep arms the alarm of `key` due at `due`. */
  swept(proc: SimProcess, key: ActorKey, due: number): void {
    const overdue = proc.clock.now() - due;
    // The timing the nodes run with: a variant that shortens it is caught by the lease invariants.
    const grace = this.#ctx.timing.fenceAfterMs;
    if (overdue >= grace) return;
    this.#ctx.fail(
      "alarm-swept-early",
      `${proc.name}'s sweep arms the alarm of ${short(key)} due ${overdue.toFixed(0)} ms ago ` +
        `on its clock: only alarms overdue by more than ${grace} ms (lease ttl plus grace) ` +
        `are the sweep's`,
    );
  }

  /** An on-alarm of `key` due at `due` ran to its end on `proc`. */
  fired(proc: SimProcess, key: ActorKey, generation: number, due: number): void {
    const ctx = this.#ctx;
    ctx.stats.alarmsFired++;
    const now = proc.clock.now();
    if (now < due) {
      ctx.fail(
        "alarm-early",
        `${proc.name} runs the on-alarm of ${short(key)} ${(due - now).toFixed(0)} ms before ` +
          `its due time, on its own clock`,
      );
      return;
    }
    const id = `${actorKeyString(key)} ${due}`;
    const first = this.#fired.get(id);
    if (!first) {
      this.#fired.set(id, { proc, generation, at: ctx.sched.now });
      return;
    }
    const explained = first.proc.dead ||
      (this.#faultAt.get(first.proc.token) ?? -Infinity) >= first.at;
    if (explained && !(first.proc === proc && first.generation === generation)) {
      ctx.stats.alarmRefirings++;
      ctx.log(proc.name, `alarm of ${short(key)} due ${due} fires again (a fault explains it)`);
      return;
    }
    ctx.fail(
      "alarm-fired-twice",
      `${proc.name} (gen ${generation}) fires the alarm of ${short(key)} due ${due} again; ` +
        `${first.proc.name} (gen ${first.generation}) fired it ` +
        `${((ctx.sched.now - first.at) / 1000).toFixed(3)} s ago, and no fault of it since ` +
        `explains a firing whose commit did not land`,
    );
  }

  /** At the end: the last acknowledged set of each actor, or one that ran after it, fired. */
  checkFired(): void {
    for (const [actorId, ops] of this.#ran) {
      if (this.#ctx.violation) return;
      const last = ops.findLastIndex(({ op }) => this.#acked.has(op));
      if (last < 0) continue;
      const after = ops.slice(last);
      if (after.some(({ due }) => due === undefined)) continue;
      const dues = after.map(({ due }) => due!);
      if (dues.some((due) => due > this.#quietAt + 5_000)) continue;
      if (dues.some((due) => this.#fired.has(`${actorId} ${due}`))) continue;
      const actor = this.#actors.get(actorId)!;
      const due = dues[0];
      this.#ctx.fail(
        "alarm-not-fired",
        `the alarm of ${actor.short} due ${due} (${((due - this.#quietAt) / 1000).toFixed(1)} s ` +
          `from the quiet phase) was acknowledged and never fired` +
          (dues.length > 1
            ? `, nor those of the sets that ran after it (${dues.slice(1).join(", ")})`
            : ""),
      );
    }
  }
}

/** A set or a delete whose event ran. */
interface RanOp {
  op: number;
  /** The alarm's due time; undefined for a delete. */
  due?: number;
}

/** A set sent: its op, and whether it was acknowledged. */
export interface AlarmSet {
  op: number;
  acked: Promise<boolean>;
}
