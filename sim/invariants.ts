/**
 * The invariants of a run (docs/testing.md): what must hold after every
 * event, at every write the bucket applies, at every event an actor runs,
 * and at the end; the chain checks of every actor's history against its
 * owner's database; and the violations of the real code it knows
 * (sim/known.ts), counted instead of failed unless the run is strict.
 *
 * @module
 */

import { type ActorKey, actorKeyString } from "../src/actors/key.ts";
import type { SocketEvent } from "../src/actors/protocol.ts";
import { nodeKey } from "../src/bucket/keys.ts";
import { REQUEST_TIMEOUT_MS } from "../src/bucket/bounds.ts";
import { heartbeatFrees } from "../src/cluster/cluster_plane.ts";
import { decodeHeartbeat, type Heartbeat } from "../src/cluster/heartbeat.ts";
import { decodeOwnerRecord, type Hold, type OwnerRecord } from "../src/cluster/ownership.ts";
import { KNOWN } from "./known.ts";
import {
  type ChainPosition,
  replayChain,
  type Restored,
  restoreFromStore,
  StoreView,
} from "./chain.ts";
import type { SettledActor } from "./executor_host.ts";
import type { SimNode, SimProcess } from "./processes.ts";
import { describeError } from "../src/describe_error.ts";
import { elapsed, short, type SimContext } from "./context.ts";
import type { Violation } from "./swarm.ts";
import type { Weather } from "./weather.ts";

/**
 * A request for an actor whose holder was fenced, at a healthy node in calm
 * weather, leads to its takeover within this long (a record read and a
 * conditional write take milliseconds then).
 */
const TAKEOVER_MS = 10_000;

/**
 * The invariants of one run, fed by the world as things happen.
 *
 * @example
 * ```ts ignore
 * const invariants = new Invariants(ctx, weather);
 * store.onApplied = (key, body, writer) => invariants.applied(key, body, writer);
 * ```
 */
export class Invariants {
  readonly #knownSeen = new Map<string, { count: number; first: Violation }>();
  /**
   * Takes, by actor, that a known bug of the real code let through (sim/known.ts): the
   * generation they wrote and the bug.
   */
  /** Per socket (process, actor, connection), the generation its last event ran at. */
  readonly #socketGenerations = new Map<string, number>();
  readonly #suspectTakes = new Map<string, { generation: bigint; kind: string }[]>();
  /** Pairs of holds already reported as a known violation. */
  readonly #reported = new Set<string>();
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
  /**
   * "Not held" answers each process got, by `token actor`: the node that
   * said so, and the record as the bucket held it then.
   */
  readonly #toldNotHeld = new Map<string, { node: string; record: OwnerRecord | undefined }>();
  /** The ownership records as the bucket holds them, by key. */
  readonly records = new Map<string, OwnerRecord>();
  /** When each process last began to wake each actor (virtual ms), by `token actor`. */
  readonly wakes = new Map<string, number>();
  /** The bound of the spec's "How it works", from the real timings. */
  readonly #deathBound: number;

  constructor(readonly ctx: SimContext, readonly weather: Weather) {
    const base = ctx.baseTiming;
    this.#deathBound = base.fenceAfterMs + base.watchMs + base.periodMs + base.skewMs + 1000;
  }

  /** `proc` got a "not held" answer from `node` for `actor`. */
  notHeld(proc: SimProcess, node: string, actor: ActorKey): void {
    const id = actorKeyString(actor);
    this.#toldNotHeld.set(`${proc.token} ${id}`, {
      node,
      record: this.records.get(`owners/${id}`),
    });
  }

  /**
   * `proc` forwards a request for `actor` to `node`: not one that told it
   * "not held" while the record still names another node as it did then
   * (the spec's routing reads the record again after such an answer).
   */
  forwarding(proc: SimProcess, node: string, actor: ActorKey): void {
    const id = actorKeyString(actor);
    const key = `${proc.token} ${id}`;
    const told = this.#toldNotHeld.get(key);
    if (!told) return;
    const now = this.records.get(`owners/${id}`);
    const unchanged = told.record !== undefined && now === told.record;
    if (!unchanged) {
      this.#toldNotHeld.delete(key);
      return;
    }
    if (told.node === node && told.record!.node !== node) {
      this.ctx.fail(
        "stale-holder-trusted",
        `${proc.name} forwards a request for ${short(actor)} to ${node}, which told it that it ` +
          `does not hold the actor; the record still names ${describeRecord(told.record)}`,
      );
    }
  }

  /** Known violations seen, by kind. */
  known(): Record<string, { count: number; first: Violation }> {
    return Object.fromEntries(this.#knownSeen);
  }

  /**
   * The process that holds `actor` with a valid lease, as its record in the
   * bucket says, and whose executor has it resident with every commit landed
   * and no event under way.
   */
  #settledOwner(
    actor: { key: ActorKey; id: string },
  ): { proc: SimProcess; settled: SettledActor } | undefined {
    const record = this.records.get(`owners/${actor.id}`);
    if (!record || record.state !== "held") return undefined;
    for (const proc of this.ctx.procs) {
      const hold = proc.belief(actor.key);
      if (!hold || record.process !== proc.token || record.generation !== hold.generation) continue;
      const settled = proc.executors.settled(actor.id);
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
  async checkChains(final: boolean): Promise<void> {
    const view = new StoreView(this.ctx.store.shadow);
    const where = final ? "at the end" : "at a checkpoint";
    for (const actor of this.ctx.actors) {
      if (this.ctx.violation) return;
      const owner = this.#settledOwner(actor);
      if (!owner && !final) continue;
      const chain = `${where}, the chain of ${actor.short} in the bucket`;
      this.ctx.stats.chainChecks++;
      let replayed: ChainPosition;
      try {
        replayed = replayChain(view, actor.key);
      } catch (e) {
        this.ctx.fail(
          "history-unrestorable",
          `${chain} cannot be replayed: ${describeError(e, "named")}`,
        );
        return;
      }
      let restored: Restored | undefined;
      if (final) {
        try {
          restored = await restoreFromStore(view, actor.key, this.ctx.disk.scratchPath());
        } catch (e) {
          this.ctx.fail(
            "history-unrestorable",
            `${chain} cannot be restored: ${describeError(e, "named")}`,
          );
          return;
        }
        if (replayed.txid !== restored.txid || replayed.checksum !== restored.checksum) {
          this.ctx.fail(
            "replay-differs",
            `${chain} restores to ${position(restored)}, an independent replay of its files ` +
              `to ${position(replayed)}`,
          );
          return;
        }
        if (!this.ctx.data.saw(actor.id, chain, "restores, but", restored.ids, restored.txid)) {
          return;
        }
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
        !this.ctx.data.wroteAt(actor.id, BigInt(settled.generation)) &&
        this.#chainWhenWoken(view, actor, proc, settled)
      ) {
        // See docs/testing.md: a hold that wrote nothing has no base to cap an
        // earlier generation's late upload.
        this.ctx.stats.lateOverUnwrittenHold++;
        this.ctx.log("sim", `NOTE late upload over a hold that wrote nothing: ${differs}`);
        continue;
      }
      this.ctx.fail("chain-differs", differs);
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
    const mark = this.wakes.get(`${proc.token} ${actor.id}`);
    if (mark === undefined) return false;
    const earlier = new Map<string, Uint8Array>();
    for (const [key, body] of view.objects) {
      if ((this.ctx.data.writtenAt(key) ?? -1) < mark) earlier.set(key, body);
    }
    try {
      const then = replayChain(new StoreView(earlier), actor.key);
      return then.txid === settled.txid && then.checksum === settled.checksum;
    } catch {
      return false;
    }
  }

  /**
   * A violation of an invariant the real code is known to break (sim/known.ts):
   * counted and traced, and the run goes on, unless `strict`.
   */
  #noteKnown(kind: string, message: string): void {
    // A kind sim/known.ts no longer lists was fixed: it showing again fails.
    if (this.ctx.options.strict || !KNOWN[kind]) return this.ctx.fail(kind, message);
    const seen = this.#knownSeen.get(kind);
    if (seen) seen.count++;
    else {this.#knownSeen.set(kind, {
        count: 1,
        first: { kind, message, at: elapsed(this.ctx) },
      });}
    this.ctx.log("sim", `KNOWN ${kind}: ${message}`);
  }

  /** After every event: one holder per actor; dead nodes' actors freed in time. */
  check(): void {
    if (this.ctx.violation) return;
    for (const actor of this.ctx.actors) {
      let first: [SimProcess, Hold] | undefined;
      for (const proc of this.ctx.procs) {
        const hold = proc.belief(actor.key);
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
            this.#noteKnown(known, message);
          }
          continue;
        }
        this.ctx.fail("two-holders", message);
        return;
      }
    }
    this.checkDeaths();
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
      this.ctx.sched.now,
      this.ctx.timing.fenceAfterMs + this.ctx.timing.skewMs,
    );
  }

  expectTakeover(proc: SimProcess, actorId: string, op: number): void {
    if (this.#awaitingTakeover.has(actorId)) return;
    const record = this.records.get(`owners/${actorId}`);
    if (!record || record.state !== "held") return;
    const heartbeat = this.heartbeatIn(record.node);
    if (!heartbeat || !this.#freesEverywhere(heartbeat, record)) return;
    const goneAt = this.#goneAt.get(heartbeat.process);
    const now = this.ctx.sched.now;
    // Every node lists the heartbeats once a period (in calm weather the
    // listing takes milliseconds): by then each has seen it.
    const listed = this.ctx.timing.periodMs + 500;
    if (goneAt === undefined || now < goneAt + listed) return;
    // The node asked has served, and the bucket been calm, for a bucket
    // request's timeout: nothing a storm or a partition left hanging on it
    // holds the takeover up.
    const settled = now - REQUEST_TIMEOUT_MS - 1_000;
    if (!this.healthy(proc) || proc.readySince! > settled || !this.weather.bucketCalm()) return;
    this.ctx.stats.takeoversAwaited++;
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
  healthy(proc: SimProcess): boolean {
    return !proc.dead && proc.state === "serving" && proc.readySince !== undefined &&
      proc.leaseValid() && proc.node.net.partition() === undefined;
  }

  /**
   * Each awaited takeover happens (the record names another process, or is
   * released) within {@linkcode TAKEOVER_MS}, unless the weather or the
   * node asked changed meanwhile (then it is excused).
   */
  #checkTakeovers(): void {
    const now = this.ctx.sched.now;
    for (const [actorId, wait] of this.#awaitingTakeover) {
      const record = this.records.get(`owners/${actorId}`);
      const heartbeat = record && this.heartbeatIn(record.node);
      if (!record || record.state !== "held" || record.process !== wait.holder) {
        this.ctx.stats.takeoversSeen++;
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
      const calm = this.weather.calmSince();
      const excused = !this.healthy(wait.proc) || wait.proc.readySince! > wait.since ||
        calm === undefined || calm > wait.since;
      if (excused) {
        this.#awaitingTakeover.delete(actorId);
        continue;
      }
      if (now - wait.since > TAKEOVER_MS) {
        const name = (token: string) => this.ctx.byToken.get(token)?.name ?? token;
        this.ctx.fail(
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
  actorEvent(proc: SimProcess, key: ActorKey, generation: number): void {
    this.ctx.stats.actorEvents++;
    const id = actorKeyString(key);
    this.ctx.data.eventRuns(id, generation, proc.name);
    const own = proc.parts.host.holdOf(key);
    if (!proc.leaseValid()) {
      this.ctx.fail(
        "event-outside-lease",
        `${proc.name} runs an event of ${short(key)} (gen ${generation}) while its lease is ` +
          `not valid${own ? "" : " (and it does not hold the actor)"}`,
      );
      return;
    }
    for (const other of this.ctx.procs) {
      if (other === proc) continue;
      const hold = other.belief(key);
      if (hold) {
        const message = `${proc.name} runs an event of ${short(key)} (gen ${generation}) while ` +
          `${other.name} holds it (gen ${hold.generation}) with a valid lease`;
        const known = this.#suspectBetween(id, BigInt(generation), hold.generation);
        if (known) {
          this.#noteKnown(known, message);
          return;
        }
        this.ctx.fail(
          "event-while-other-holds",
          `${proc.name} runs an event of ${short(key)} (gen ${generation}) while ${other.name} ` +
            `holds it (gen ${hold.generation}) with a valid lease`,
        );
        return;
      }
    }
  }

  /**
   * A socket event goes to its actor: no socket is served by a node that
   * does not hold its room. Once a socket's event ran at one generation of
   * its node's hold, its next message runs only if no other process took
   * the room in between (generations are taken one after another: any
   * between the two is another hold); otherwise its node must have closed
   * it with 1012. (A client's close is not the socket served on: the room
   * hears it wherever it runs.)
   */
  socketEvent(proc: SimProcess, key: ActorKey, generation: number, socket: SocketEvent): void {
    this.ctx.stats.socketEvents++;
    const id = actorKeyString(key);
    const socketId = `${proc.token} ${id} ${socket.connection}`;
    const last = this.#socketGenerations.get(socketId);
    // A client's close is told to the room wherever it runs now: the socket is not served on.
    if (socket.kind === "close") return void this.#socketGenerations.delete(socketId);
    this.#socketGenerations.set(socketId, generation);
    if (last === undefined || generation <= last + 1) return;
    const others = this.ctx.data.takersBetween(id, BigInt(last + 1), BigInt(generation - 1))
      .filter((token) => token !== proc.token);
    if (others.length === 0) return;
    const names = others.map((token) => this.ctx.byToken.get(token)?.name ?? token);
    this.ctx.fail(
      "socket-after-move",
      `${proc.name} runs the ${socket.kind} event of socket ${socket.connection} of ` +
        `${short(key)} at gen ${generation}; its previous event ran at gen ${last}, and ` +
        `${names.join(", ")} took the room in between: the socket should have closed with 1012`,
    );
  }

  /**
   * An event's statement runs in the executor: the process's lease is valid,
   * and no other process holds the actor with a valid lease (checked again
   * here, not only when the event was sent: it may have waited on the bucket).
   */
  statementRuns(proc: SimProcess, key: ActorKey, generation: number): void {
    if (!proc.leaseValid()) {
      this.ctx.fail(
        "event-outside-lease",
        `${proc.name} runs a statement of ${short(key)} (gen ${generation}) in its executor ` +
          `while its lease is not valid`,
      );
      return;
    }
    for (const other of this.ctx.procs) {
      if (other === proc) continue;
      const hold = other.belief(key);
      if (hold) {
        this.ctx.fail(
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
  checkDeaths(): void {
    const now = this.ctx.sched.now;
    for (const [token, proc] of this.ctx.deaths) {
      const current = this.heartbeatIn(proc.node.id);
      if (!current || current.process !== token || current.lease !== "live") {
        this.ctx.deaths.delete(token);
        continue;
      }
      const lastWrite = this.#lastLiveWrite.get(token);
      if (lastWrite === undefined) continue;
      const reachable = this.#reachableSince(proc.node);
      if (reachable === undefined) continue;
      const due = Math.max(lastWrite, reachable) + this.#deathBound;
      if (now > due) {
        this.ctx.fail(
          "dead-node-not-fenced",
          `${proc.name} is ${proc.paused ? "paused" : "dead"}; its last write landed ${
            ((now - lastWrite) / 1000).toFixed(1)
          } s ago and the bucket was reachable for ${((now - reachable) / 1000).toFixed(1)} s, ` +
            `but its heartbeat is still live (bound ${(this.#deathBound / 1000).toFixed(1)} s)`,
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
    const calm = this.weather.calmSince();
    if (calm === undefined) return undefined;
    let ready: number | undefined;
    for (const proc of this.ctx.procs) {
      if (proc.node === except || proc.readySince === undefined) continue;
      ready = ready === undefined ? proc.readySince : Math.min(ready, proc.readySince);
    }
    return ready === undefined ? undefined : Math.max(calm, ready);
  }

  heartbeatIn(nodeId: string): Heartbeat | undefined {
    const body = this.ctx.store.shadow.get(nodeKey(nodeId));
    if (!body) return undefined;
    try {
      return decodeHeartbeat(body, nodeKey(nodeId));
    } catch {
      return undefined;
    }
  }

  /** Every write the bucket applied. */
  applied(key: string, body: Uint8Array | null, writer: string): void {
    if (key.startsWith("nodes/")) this.#heartbeatWritten(key, body, writer);
    else if (key.startsWith("owners/")) this.#recordWritten(key, body, writer);
    else if (key.startsWith("actors/")) {
      const proc = this.ctx.byName.get(writer);
      this.ctx.data.applied(
        key,
        body,
        writer,
        proc?.token,
        (token) => (token && this.ctx.byToken.get(token)?.name) ?? `process ${token}`,
      );
    }
  }

  #heartbeatWritten(key: string, body: Uint8Array | null, writer: string): void {
    if (!body) {
      this.ctx.log(writer, `${key} deleted`);
      return;
    }
    let heartbeat: Heartbeat;
    try {
      heartbeat = decodeHeartbeat(body, key);
    } catch {
      return;
    }
    const token = heartbeat.process;
    const proc = this.ctx.byToken.get(token);
    const now = this.ctx.sched.now;
    if (heartbeat.lease === "fenced") {
      this.ctx.stats.fences++;
      this.#fenced.add(token);
      this.#goneAt.set(token, now);
      const lastWrite = this.#lastLiveWrite.get(token);
      const age = lastWrite === undefined ? NaN : now - lastWrite;
      this.ctx.log(
        writer,
        `${key} fenced (process ${proc?.name ?? token}, last write ${
          (age / 1000).toFixed(1)
        } s ago)`,
      );
      if (proc && (proc.dead || proc.paused) && lastWrite !== undefined) {
        this.ctx.stats.takeoverDelays.push(age);
        const reachable = this.#reachableSince(proc.node);
        if (reachable !== undefined && reachable <= lastWrite) {
          this.ctx.stats.calmTakeoverDelays.push(age);
        }
      }
      if (proc && !proc.dead && proc.leaseValid()) {
        this.ctx.fail(
          "fenced-while-valid",
          `${writer} fenced ${proc.name} while its lease was valid (last write ${
            (age / 1000).toFixed(3)
          } s ago)`,
        );
        return;
      }
      const window = this.ctx.timing.fenceAfterMs + this.ctx.timing.watchMs +
        this.ctx.timing.periodMs +
        this.ctx.timing.skewMs;
      if (
        proc && !proc.dead && proc.readySince !== undefined && proc.readySince <= now - window &&
        !this.weather.stormy && this.weather.lastStormEnd <= now - window
      ) {
        this.ctx.fail(
          "fenced-healthy-node",
          `${writer} fenced ${proc.name}, which served without a pause or partition for ${
            ((now - proc.readySince) / 1000).toFixed(1)
          } s with no bucket storm (only outages, which every node saw)`,
        );
      }
      return;
    }
    if (this.#fenced.has(token)) {
      this.ctx.fail(
        "heartbeat-after-fence",
        `${writer} wrote its heartbeat (${heartbeat.lease}) after it was fenced`,
      );
      return;
    }
    if (heartbeat.lease === "live") this.#lastLiveWrite.set(token, now);
    else {
      this.#goneAt.set(token, now);
      this.ctx.log(writer, `${key} released`);
    }
  }

  #recordWritten(key: string, body: Uint8Array | null, writer: string): void {
    if (!body) {
      this.ctx.fail("record-deleted", `${writer} deleted ${key}`);
      return;
    }
    let record: OwnerRecord;
    try {
      record = decodeOwnerRecord(body, key);
    } catch (e) {
      this.ctx.fail(
        "record-malformed",
        `${writer} wrote a record that cannot be read: ${describeError(e, "named")}`,
      );
      return;
    }
    const before = this.records.get(key);
    this.records.set(key, record);
    if (record.state === "held") {
      this.ctx.data.took(key.slice("owners/".length), record.generation, record.process);
    }
    const writer_ = this.ctx.byToken.get(record.process);
    if (record.state === "held" && writer_ && !writer_.leaseValid()) {
      // A take landing while its process's lease is not valid: fixed by
      // TakeOptions.mayWrite, so this fails the run if it shows again (a
      // put outliving the lease it was sent under would).
      this.#suspect(key.slice("owners/".length), record.generation, "take-without-lease");
    }
    this.ctx.log(writer, `${key.slice(7 + "default/".length)} ← ${describeRecord(record)}`);
    if (!before) return;
    if (record.generation < before.generation) {
      this.ctx.fail(
        "generation-backwards",
        `${key} went from generation ${before.generation} to ${record.generation}`,
      );
    } else if (record.state === "held" && record.generation === before.generation) {
      this.ctx.fail(
        "generation-reused",
        `${key} held again at generation ${record.generation} (${describeRecord(before)} before)`,
      );
    }
  }
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

/** An ownership record, briefly. */
export function describeRecord(record: OwnerRecord | undefined): string {
  if (!record) return "none";
  return `${record.node}:${record.process.slice(0, 4)} ${record.state} gen ${record.generation}`;
}
