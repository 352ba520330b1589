/**
 * The clients of a run: requests for random actors sent to random nodes,
 * reads, plain and durable writes and deletes in the mix the seed draws,
 * through each node's real handler, and what they were told (a durable
 * write answered 200 is acknowledged); every request answered within its
 * bound, each op run at most once; and the final probe, once the quiet
 * phase began, that every actor is served.
 *
 * @module
 */

import type { ActorKey } from "../src/actors/key.ts";
import { NODE_HEADER } from "../src/net/headers.ts";
import { between } from "./bucket.ts";
import { describeError } from "../src/describe_error.ts";
import { exp, type SimActor, type SimContext } from "./context.ts";
import { type Op, type OpKind, opTarget } from "./executor_host.ts";
import type { AlarmSet } from "./alarms.ts";
import { describeRecord, type Invariants } from "./invariants.ts";
import type { SimNode, SimProcess } from "./processes.ts";
import { EPOCH } from "./swarm.ts";

/** No request waits longer for its answer (see `checkUnanswered`). */
const REQUEST_BOUND_MS = 300_000;
/**
 * At the end, after the quiet phase and the settling: a kept GET's 25 s and
 * a forward's 35 s, with room; a request older than this is one that hangs.
 */
const QUIET_REQUEST_BOUND_MS = 90_000;

/** The last part of every run: no new faults, every node back, then every actor asked for. */
export const QUIET_MS = 50_000;

/**
 * The clients of one run.
 *
 * @example
 * ```ts ignore
 * const workload = new Workload(ctx, invariants, quietAt);
 * sched.after(100, () => workload.clientStep());
 * ```
 */
export class Workload {
  /** Client requests not answered yet, by op id: the process asked and when. */
  readonly #unanswered = new Map<number, { proc: SimProcess; at: number; paused: number }>();
  /** The node whose executor ran each client op (by op id): each runs at most once. */
  readonly #ranBy = new Map<number, string>();
  #nextWriteId = 0;

  constructor(
    readonly ctx: SimContext,
    readonly invariants: Invariants,
    readonly quietAt: number,
  ) {}

  /**
   * Every request is answered: none waits past the longest path a request
   * can take (the record and heartbeat read, a take, an event's 30 s, the
   * route again and a forward's 35 s, or a kept GET's 25 s and a forward),
   * rounded up to {@linkcode REQUEST_BOUND_MS}, the asked process's pauses
   * left out; and at the end, after the quiet phase, none is left waiting
   * past {@linkcode QUIET_REQUEST_BOUND_MS}. A
   * request whose process died is over (its client saw the connection end).
   */
  checkUnanswered(final: boolean): void {
    for (const [op, { proc, at, paused }] of this.#unanswered) {
      if (proc.dead) {
        this.#unanswered.delete(op);
        continue;
      }
      const ms = this.ctx.sched.now - at - (proc.pausedSoFar(this.ctx.sched.now) - paused);
      if (ms > (final ? QUIET_REQUEST_BOUND_MS : REQUEST_BOUND_MS)) {
        this.ctx.fail(
          "request-past-bound",
          `op ${op} sent to ${proc.name} at ${((at - EPOCH) / 1000).toFixed(3)} s is not ` +
            `answered ${(ms / 1000).toFixed(3)} s later`,
        );
        return;
      }
    }
  }

  /** A client op reached an executor: each runs at most once, anywhere. */
  opRuns(proc: SimProcess, op: number): void {
    const earlier = this.#ranBy.get(op);
    if (earlier !== undefined) {
      this.ctx.fail(
        "op-ran-twice",
        `op ${op} reached an executor twice: on ${earlier}, then ${proc.name}`,
      );
      return;
    }
    this.#ranBy.set(op, proc.name);
  }

  clientStep(): void {
    if (this.ctx.violation) return;
    if (this.ctx.sched.now < this.quietAt + QUIET_MS / 2) {
      this.ctx.sched.after(
        exp(this.ctx.draws.clients, 1000 / this.ctx.swarm.clientRate),
        () => this.clientStep(),
      );
    }
    const c = this.ctx.draws.clients;
    const actor = this.ctx.actors[Math.floor(c.next() * this.ctx.actors.length)];
    const node = this.ctx.nodes[Math.floor(c.next() * this.ctx.nodes.length)];
    // A tenth of the clients give up on their request after a while.
    const patienceMs = c.next() < 0.1 ? between(c, 500, 40_000) : undefined;
    void this.#request(node, actor, this.#drawOp(), between(c, 0.2, 2), patienceMs);
  }

  /** An alarm set for `actor` at `at`, sent to `node` (an alarm client's); whether it was acknowledged. */
  setAlarmVia(node: SimNode, actor: SimActor, at: number): AlarmSet {
    const op = ++this.#nextWriteId;
    return { op, acked: this.#request(node, actor, { kind: "alarm", id: op, at }, 1) };
  }

  /** A read of `actor` sent to `node` (a socket client's look at its room). */
  readVia(node: SimNode, actor: SimActor): void {
    void this.#request(node, actor, { kind: "read", id: ++this.#nextWriteId }, 1);
  }

  /** A client's request: a read, a plain or durable write, or a delete, as the seed's mix says. */
  #drawOp(): Op {
    const u = this.ctx.draws.ops.next();
    const { read, write, durable } = this.ctx.swarm.ops;
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
    this.ctx.stats.requests++;
    const proc = node.current;
    if (!proc || proc.dead || proc.state !== "serving") {
      this.ctx.stats.refused++;
      return Promise.resolve(false);
    }
    return new Promise((resolve) => {
      this.ctx.sched.after(networkMs, () => {
        this.#ask(proc, actor, op, patienceMs).then(resolve, (e) => {
          this.ctx.fail(
            "request-threw",
            `a request to ${proc.name} threw: ${describeError(e, "named")}`,
          );
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
    this.invariants.expectTakeover(proc, actor.id, op.id);
    this.#unanswered.set(op.id, {
      proc,
      at: this.ctx.sched.now,
      paused: proc.pausedSoFar(this.ctx.sched.now),
    });
    const { method, path } = opTarget(op);
    const url = `http://${proc.authority}/actor/${actor.key.class}/${actor.key.name}${path}`;
    const client = new AbortController();
    // The process learns of it as an event of its own: on resume if paused, never if dead.
    if (patienceMs !== undefined) this.ctx.sched.after(patienceMs, () => client.abort(), proc);
    const response = await proc.parts.handler(new Request(url, { method, signal: client.signal }));
    const text = (await response.text()).trim();
    this.#unanswered.delete(op.id);
    if (client.signal.aborted) {
      this.ctx.stats.clientsLeft++;
      this.ctx.log(proc.name, `${tag}: the client left; answered ${response.status} ${text}`);
      return false;
    }
    const answeredBy = response.headers.get(NODE_HEADER);
    if (response.status !== 200) {
      this.ctx.stats.unavailable++;
      this.ctx.log(proc.name, `${tag}: ${response.status} ${text} (from ${answeredBy})`);
      return false;
    }
    this.ctx.stats.served++;
    if (answeredBy !== proc.node.id) this.ctx.stats.forwarded++;
    const ran = this.#ranBy.get(op.id);
    const ranNode = ran?.slice(0, ran.indexOf("#"));
    if (ranNode !== answeredBy) {
      this.ctx.fail(
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
      this.ctx.stats.durableAcked++;
      this.ctx.data.acked(actor.id, op, txid);
      this.ctx.log(proc.name, `${tag}: durable at TXID ${txid} (ran on ${ran})`);
    }
    if (op.kind === "alarm") this.ctx.log(proc.name, `${tag}: set for ${op.at} (ran on ${ran})`);
    return true;
  }

  /**
   * After the quiet phase: every actor must be served, by the node asked or
   * by the node it forwards to, within 30 s of asking once a second.
   */
  async finalProbe(): Promise<void> {
    this.ctx.log("sim", "final check: every actor must be served");
    const pending = new Map(this.ctx.actors.map((a) => [a.id, a]));
    const last = new Map<string, string>();
    for (let round = 0; round < 30 && pending.size > 0 && !this.ctx.violation; round++) {
      let i = 0;
      for (const actor of pending.values()) {
        const node = this.ctx.nodes[(round + i++) % this.ctx.nodes.length];
        const read = { kind: "read" as const, id: ++this.#nextWriteId };
        void this.#request(node, actor, read, 1).then((served) => {
          if (served) return pending.delete(actor.id);
          const holder = this.invariants.records.get(`owners/${actor.id}`);
          last.set(actor.id, `asked ${node.id}; record ${describeRecord(holder)}`);
        });
      }
      await this.ctx.sched.runUntil(this.ctx.sched.now + 1000, () => this.invariants.check());
    }
    if (pending.size > 0 && !this.ctx.violation) {
      const which = [...pending.values()].map((a) => `${a.short} (${last.get(a.id) ?? "?"})`);
      this.ctx.fail(
        "not-served-at-end",
        `not served 30 s into the final check: ${which.join(", ")}`,
      );
    }
  }
}
