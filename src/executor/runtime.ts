/**
 * An executor's runtime: what runs actors' events, apart from the process it
 * runs in (main.ts: socket, frames, signals). It holds the run token (one
 * event at a time; a waiting event lets the next run, ADR 0003), makes the
 * host's imports, wakes actors (opening their stores: the restore from the
 * bucket in cluster mode), and bounds every event by the node's lease (an
 * epoch per `discard-all`, the lease's end on the wall clock) and by its
 * wall-clock limit while it waits.
 *
 * Its parts, each a job of its own: the run token and the waits of events
 * (run_token.ts), the version's programs (program_set.ts), a wake's store
 * (store_open.ts), on-init once per code version (actor_init.ts), socket
 * events (socket_event.ts), and what a failed event tells (event_failed.ts).
 *
 * Every clock, random source and bucket it uses is given to it, so the
 * simulator runs this runtime with a program of its own in place of a
 * component (sim/executor_host.ts).
 *
 * @module
 */

import type { Logger } from "../log.ts";
import { assert } from "../assert.ts";
import { type ActorKey, actorKeyString } from "../actors/key.ts";
import {
  actorDatabasePath,
  type ActorRequest,
  type CallAnswer,
  type ExecutorClass,
  type ExecutorInit,
  type FromExecutor,
  type SocketEvent,
  type ToExecutor,
} from "../actors/protocol.ts";
import { waitingChain } from "../actors/call_chain.ts";
import { DatabasePool } from "../sqlite/database_pool.ts";
import { type ActorDatabase, toSqlError } from "../sqlite/actor_database.ts";
import type { Clock, Timer } from "../time/clock.ts";
import { ActorAlarm, storedAlarm } from "../alarms/actor_alarm.ts";
import { AlarmIndex } from "../alarms/alarm_index.ts";
import { EventFailure } from "../actors/event_failure.ts";
import { BehindActor, enterDeploySeq } from "./deploy_seq.ts";
// Where the runtime's users (the simulator) have always found it.
export { EventFailure } from "../actors/event_failure.ts";
import {
  type AlarmCommit,
  commitAlarm,
  deleteEntries,
  runAlarmEvent,
} from "../alarms/alarm_event.ts";
import type { ReplicaContext } from "../replication/replica.ts";
import { type ActorStore, ReplicatedStore } from "../actors/actor_store.ts";
import { ReadLimiter } from "../replication/read_limiter.ts";
import type { SnapshotSchedule } from "../replication/uploader.ts";
import { type ActorExportCalls, GuestError } from "../actors/abi/direct.ts";
import { hostImports, type ImportedActor, type ImportRuntime } from "./host_imports.ts";
import type { ActorProgram } from "./program.ts";
import { LeaseBound } from "./lease_bound.ts";
import { RecentMap } from "../recent_map.ts";
import { randomHex } from "../bucket/random.ts";
import { RunToken } from "./run_token.ts";
import { ProgramSet } from "./program_set.ts";
import { openActorStore } from "./store_open.ts";
import { initOnce } from "./actor_init.ts";
import { runSocketEvent } from "./socket_event.ts";
import { describeFailedEvent } from "./event_failed.ts";
import type { RuntimeOptions } from "./runtime_options.ts";
export type { RuntimeObserver, RuntimeOptions } from "./runtime_options.ts";

/** How often idle databases are looked for. */
const DATABASE_SWEEP_MS = 1000;

/**
 * Actors whose failed periodic snapshots are remembered while they sleep
 * (the spec: waking one must not try again early); the least recently
 * touched is forgotten first.
 */
export const REMEMBERED_SNAPSHOT_SCHEDULES = 10_000;

/** Actors given up (an upload failed) remembered, so their queued events get a 503. */
export const REMEMBERED_GIVE_UPS = 10_000;

interface ResidentActor extends ImportedActor {
  key: ActorKey;
  id: string;
  path: string;
  generation: number;
  /** Unset when the next event must make a new instance (after a trap, or a delete). */
  exports: ActorExportCalls | undefined;
  /** Its database, replicated or local (set once the wake opened it). */
  store: ActorStore;
  seq: number;
  dead: boolean;
  chain: string[];
  sockets: Set<number>;
  /** Its alarm (read from its database at the wake). */
  alarm: ActorAlarm;
  /** The program its instance was made from: a new version or configuration makes another. */
  program: ActorProgram | undefined;
  /** It recorded a new deploy seq that has not landed yet: its next answer waits for it. */
  seqToLand: boolean;
  /** The app's version (`line:seq`) its events last ran under here. */
  enteredVersion: string | undefined;
}

/** What a resident actor stands at, for {@linkcode ExecutorRuntime.inspect}. */
export interface ActorState {
  generation: number;
  /** Its database file. */
  path: string;
  /** An event of it is under way or queued. */
  busy: boolean;
  /** Its database, if open. */
  db: ActorDatabase | undefined;
  /** Replicated: its position, and whether every commit landed in the bucket. */
  txid?: bigint;
  checksum?: bigint;
  landed?: boolean;
}

/**
 * Runs one executor's actors.
 *
 * @example
 * ```ts
 * import { ExecutorRuntime, type RuntimeOptions } from "./runtime.ts";
 * import type { ActorRequest } from "../actors/protocol.ts";
 * declare const o: RuntimeOptions;
 * declare const request: ActorRequest;
 * const { init, programs, post, drain, clock, random, log } = o;
 * const actor = { tenant: "default", class: "counter", name: "a" };
 * const runtime = new ExecutorRuntime({ init, programs, post, drain, clock, random, log });
 * runtime.handle({ type: "event", seq: 1, actor, generation: 1, until: 0, request });
 * ```
 */
export class ExecutorRuntime {
  readonly init: ExecutorInit;
  readonly #o: RuntimeOptions;
  readonly #clock: Clock;
  readonly #resident = new Map<string, ResidentActor>();
  readonly #databases: DatabasePool;
  readonly #log: Logger;
  /** Unset on a standalone node: its actors' databases are local only (ADR 0005). */
  readonly #replication: ReplicaContext | undefined;
  /** The tail of each actor's events: one actor's events run one at a time, in order. */
  readonly #chains = new Map<string, Promise<void>>();
  /** Failed periodic snapshots of sleeping actors, least recently touched first. */
  readonly #schedules = new RecentMap<string, SnapshotSchedule>(REMEMBERED_SNAPSHOT_SCHEDULES);
  /** Generations given up, by actor: their queued events get a 503. */
  readonly #givenUp = new RecentMap<string, number>(REMEMBERED_GIVE_UPS);
  /** One event runs at a time; the others wait for it to end or suspend. */
  readonly #token: RunToken;
  readonly #holdChecks = new Map<number, (ok: boolean) => void>();
  #holdSeq = 0;
  /** The lease each event under way was sent under (lease_bound.ts). */
  readonly #lease: LeaseBound;
  /** The resident actors by their database's path (the pool closes databases by path). */
  readonly #residentByPath = new Map<string, ResidentActor>();
  /**
   * Events the node answered (504) and abandoned before they started here:
   * they never run. Only events received and not ended are kept.
   */
  readonly #abandoned = new Set<number>();
  /** actors.call sent to the node, by id, until their answer. */
  readonly #calls = new Map<number, (answer: CallAnswer) => void>();
  #callSeq = 0;
  #sweep: Timer | undefined;
  readonly #imports: ImportRuntime;
  /** Unset without a bucket (a test's runtime): an alarm cannot be set then. */
  readonly #alarmIndex: AlarmIndex | undefined;
  /** The classes' programs, replaced by a new version's, and its seq. */
  readonly #programs: ProgramSet;

  constructor(options: RuntimeOptions) {
    const { init } = options;
    this.init = init;
    this.#o = options;
    this.#programs = new ProgramSet(options.programs, init.deploySeq, init.deployLine);
    this.#clock = options.clock;
    this.#token = new RunToken({
      clock: options.clock,
      eventTimeoutMs: init.eventTimeoutMs,
      post: options.post,
      drain: options.drain,
      // Its lease may have run out while it waited: it does nothing more.
      resumed: (seq) => this.#checkLease(seq),
    });
    this.#lease = new LeaseBound(options.clock);
    this.#log = options.log;
    const beforeClose = (path: string, db: ActorDatabase) => this.#beforePoolCloses(path, db);
    this.#databases = options.databases?.(init, beforeClose) ??
      new DatabasePool(
        init.maxOpenDatabases,
        () => options.clock.monotonic(),
        init.replicate ? "replicated" : "local",
        beforeClose,
      );
    this.#sweepIdle();
    assert(!init.replicate || options.bucket, "a replicating executor is given its bucket");
    this.#alarmIndex = options.bucket ? new AlarmIndex(options.bucket) : undefined;
    this.#replication = init.replicate
      ? {
        bucket: options.bucket!,
        clock: options.clock,
        log: this.#log,
        nodeId: init.nodeId,
        limiter: new ReadLimiter(init.restoreReads, init.restoreBytes),
        historyRetentionMs: init.historyRetentionMs,
        count: (name, by = 1) => this.#post({ type: "count", name, by }),
      }
      : undefined;
    this.#imports = {
      db: (path) => this.#db(path),
      peek: (path) => this.#databases.peek(path),
      wipe: (path) => this.#databases.wipe(path),
      suspend: (seq, work) => this.#suspend(seq, work),
      call: (actor, target, request) => this.#call(actor, target, request),
      socketSend: (actor, connection, message) =>
        this.#post({ type: "ws-send", actor: actor.key, connection, message }),
      socketClose: (actor, connection, code, reason) =>
        this.#post({ type: "ws-close", actor: actor.key, connection, code, reason }),
      maxSocketMessageBytes: init.maxSocketMessageBytes,
      log: this.#log,
    };
  }

  #post(message: FromExecutor): void {
    this.#o.post(message);
  }

  /** Tells the node the runtime is ready for events (after its classes loaded). */
  ready(): void {
    this.#post({ type: "ready" });
  }

  #sweepIdle(): void {
    const every = Math.min(this.init.databaseIdleMs, DATABASE_SWEEP_MS);
    this.#sweep = this.#clock.setTimer(every, () => {
      this.#databases.closeIdle(this.init.databaseIdleMs);
      this.#sweepIdle();
    });
  }

  /** Lets other actors' events run while this event waits (run_token.ts). */
  #suspend<T>(seq: number, work: Promise<T>, onTimeout?: () => Promise<void>): Promise<T> {
    return this.#token.suspend(seq, work, onTimeout);
  }

  #db(path: string): ActorDatabase {
    try {
      return this.#databases.get(path);
    } catch (error) {
      throw new GuestError(toSqlError(error));
    }
  }

  #checkHold(actor: ResidentActor): Promise<boolean> {
    const id = ++this.#holdSeq;
    return new Promise((resolve) => {
      this.#holdChecks.set(id, resolve);
      this.#post({ type: "check-hold", id, actor: actor.key, generation: actor.generation });
    });
  }

  async #call(actor: ImportedActor, target: ActorKey, request: ActorRequest): Promise<CallAnswer> {
    const id = ++this.#callSeq;
    const answer = new Promise<CallAnswer>((resolve) => this.#calls.set(id, resolve));
    this.#post({
      type: "call",
      id,
      seq: actor.seq,
      caller: actor.key,
      chain: actor.chain,
      target,
      request,
    });
    try {
      // Other actors' events run while this one waits (a call to an actor
      // of the same executor needs that); its own wait for the token.
      return await this.#suspend(actor.seq, answer);
    } finally {
      this.#calls.delete(id);
    }
  }

  async #wake(
    seq: number,
    key: ActorKey,
    id: string,
    generation: number,
    chain: string[],
  ): Promise<ResidentActor> {
    this.#programs.of(key);
    const path = actorDatabasePath(this.init.dataDir, key);
    Deno.mkdirSync(path.slice(0, path.lastIndexOf("/")), { recursive: true });
    const actor = {
      key,
      id,
      path,
      generation,
      seq,
      dead: false,
      chain,
      sockets: new Set<number>(),
      exports: undefined,
      program: undefined,
      seqToLand: false,
      enteredVersion: undefined,
      // A delete-self: its emptied database records the next version anew.
      dropInstance: () => {
        actor.exports = undefined;
        actor.enteredVersion = undefined;
      },
    } as ResidentActor;
    this.#o.observer?.waking?.(key, generation);
    actor.store = await this.#openStore(seq, actor);
    actor.alarm = new ActorAlarm(storedAlarm(this.#db(path)));
    this.#schedules.delete(id);
    // Resident from here, so a failing on-init discards it with its store.
    this.#resident.set(id, actor);
    this.#residentByPath.set(path, actor);
    if (this.#o.observer?.opened) {
      const store = actor.store;
      const txid = store instanceof ReplicatedStore ? store.replica.position.txid : undefined;
      this.#o.observer.opened(key, generation, this.#db(path), txid);
    }
    return actor;
  }

  /**
   * The actor's instance for this event: one made from its class's program
   * now (a new version or configuration drops the one made before, the
   * database kept), after the actor's deploy seq allows it.
   */
  async #instanceFor(actor: ResidentActor): Promise<ActorExportCalls> {
    const program = this.#programs.of(actor.key);
    const { seq, line } = this.#programs;
    // Every version the actor meets is recorded, one that changed only
    // rules too: a node that has not caught up then refuses the actor, so
    // its older rules never reach it either.
    const version = `${line}:${seq}`;
    if (actor.enteredVersion !== version) {
      const servesBehind = this.#o.planted?.servesBehind;
      if (enterDeploySeq(this.#db(actor.path), seq, line, servesBehind)) actor.seqToLand = true;
      actor.enteredVersion = version;
    }
    if (actor.exports && actor.program === program) return actor.exports;
    actor.exports = undefined;
    this.#o.observer?.ran?.(actor.key, actor.generation, seq);
    await this.#instantiateActor(actor, program);
    return actor.exports!;
  }

  /**
   * A new version's classes: from the next event on, each actor's instance
   * is made from them (on-init once per code version).
   */
  async setClasses(seq: number, line: string, classes: ExecutorClass[]): Promise<void> {
    const make = this.#o.programsOf;
    if (!make) throw new Error("this runtime takes no new classes");
    await this.#programs.replace(seq, line, classes, make);
  }

  /** The actor's database at this generation (store_open.ts). */
  #openStore(seq: number, actor: ResidentActor): Promise<ActorStore> {
    const { key, id, path, generation } = actor;
    return openActorStore({
      replication: this.#replication,
      actor: key,
      path,
      generation,
      schedule: this.#schedules.get(id),
      suspend: (work, onTimeout) => this.#suspend(seq, work, onTimeout),
      openDatabase: () => this.#db(path),
      closeDatabase: () => this.#databases.close(path),
      onFailure: (error) => this.#giveUp(actor, error),
      checkHold: () => this.#checkHold(actor),
      onClosed: (schedule) => this.#rememberSchedule(id, schedule),
      count: (name) => this.#post({ type: "count", name, by: 1 }),
      openFailed: (error, timedOut) =>
        this.#o.observer?.openFailed?.(key, generation, error, timedOut),
    });
  }

  /** Makes the actor's instance, running on-init once per code version. */
  async #instantiateActor(actor: ResidentActor, program: ActorProgram) {
    const { path } = actor;
    const exports = await program.instantiate(hostImports(actor, program.spec, this.#imports));
    // Set before on-init runs: a delete-self in it unsets the instance.
    actor.exports = exports;
    actor.program = program;
    await initOnce(exports, program.spec.hash, () => this.#db(path));
  }

  /**
   * After a trap or a failed event: the instance may be in any state, so
   * it goes and its open transaction is rolled back; what its event
   * committed before stays, and is captured like any commit.
   */
  #dropInstance(actor: ResidentActor) {
    actor.exports = undefined;
    const db = this.#databases.peek(actor.path);
    if (!db) return;
    db.rollback();
    try {
      actor.store?.committed(db);
    } catch (error) {
      this.#log.error("capture after a failed event failed", {
        actor: actor.id,
        error: String(error),
      });
      this.#discard(actor);
    }
  }

  /**
   * Drops an actor's instance and its store without waiting for uploads;
   * replicated, its local file is not vouched for, so its next wake restores.
   */
  #discard(actor: ResidentActor) {
    actor.dead = true;
    this.#forgetResident(actor);
    this.#databases.peek(actor.path)?.rollback();
    this.#databases.close(actor.path);
    actor.store?.abandon();
  }

  /** An upload failed: the node gives the actor up (the spec's "Replication"). */
  #giveUp(actor: ResidentActor, error: unknown) {
    if (actor.dead) return;
    this.#log.warn("upload failed; giving the actor up", {
      actor: actor.id,
      error: String((error as Error)?.message ?? error),
    });
    this.#discard(actor);
    this.#givenUp.set(actor.id, actor.generation);
    this.#post({ type: "give-up", actor: actor.key, generation: actor.generation });
  }

  #chain(id: string, task: () => Promise<void>) {
    const previous = this.#chains.get(id);
    const next = previous ? previous.then(task) : task();
    this.#chains.set(id, next);
    next.finally(() => {
      if (this.#chains.get(id) === next) this.#chains.delete(id);
    });
  }

  async #runEvent(
    seq: number,
    id: string,
    key: ActorKey,
    generation: number,
    request: ActorRequest,
    socket: SocketEvent | undefined,
    connections: number[] | undefined,
    alarmDue: number | undefined,
  ) {
    await this.#token.acquire();
    if (this.#abandoned.delete(seq)) {
      this.#lease.ended(seq);
      this.#token.release();
      return;
    }
    this.#token.started(seq);
    let actor = this.#resident.get(id);
    try {
      if ((this.#givenUp.get(id) ?? 0) >= generation) {
        throw new EventFailure(503, "the actor's replication to the bucket failed; retry");
      }
      if (actor && actor.generation !== generation) {
        await this.#suspend(seq, this.#close(actor));
        actor = undefined;
      }
      this.#checkLease(seq);
      const chain = waitingChain(request.headers);
      if (!actor) {
        actor = await this.#wake(seq, key, id, generation, chain);
      } else {
        // Before an on-init that runs again (after a delete-self or a failed
        // one, or under a new version): its waits and calls are this event's.
        actor.seq = seq;
        actor.chain = chain;
      }
      await this.#instanceFor(actor);
      const db = () => this.#databases.peek(actor!.path);
      const path = actor.path;
      const before = actor.store.beforeEvent(() => this.#db(path));
      if (before) await this.#suspend(seq, before);
      // A wake that waited on the bucket may end after the lease it began in.
      this.#checkLease(seq, actor);
      actor.sockets = new Set(connections);
      // A delete-self during the event unsets the instance it runs in.
      const response = alarmDue !== undefined
        ? await runAlarmEvent(actor.exports!, actor.alarm, alarmDue, this.#clock.now())
        : socket
        ? await runSocketEvent(actor.exports!, socket, request)
        : await actor.exports!.onRequest(request);
      if (db()?.inTransaction) {
        throw new EventFailure(500, "the event ended with a transaction open; it was rolled back");
      }
      const alarm = actor.dead ? undefined : await this.#commitAlarm(seq, actor);
      const open = db();
      if (open && !actor.dead) actor.store.committed(open);
      if (alarm && !actor.dead) await this.#alarmLanded(seq, actor, alarm);
      if (actor.seqToLand && !actor.dead) {
        await this.#landed(seq, actor, "the actor's move to the app's new version");
        actor.seqToLand = false;
      }
      if (!actor.dead) {
        this.#post({ type: "done", seq, response, alarm: actor.alarm.stored ?? null });
      } else {
        this.#post({ type: "failed", seq, status: 503, message: "the actor was given up; retry" });
      }
    } catch (error) {
      actor ??= this.#resident.get(id);
      // What the event did to the alarm goes with it.
      actor?.alarm?.discard();
      if (actor && !actor.dead) this.#dropInstance(actor);
      const alarm = actor?.alarm && !actor.dead ? { alarm: actor.alarm.stored ?? null } : {};
      if (error instanceof BehindActor) this.#post({ type: "behind", seq: error.actorSeq });
      // A trap or a host failure discarded the instance above, with its open transaction.
      const failed = describeFailedEvent(error, {
        actorId: id,
        onAlarm: alarmDue !== undefined,
        log: this.#log,
        errorId: () => this.#errorId(),
      });
      this.#post({ type: "failed", seq, ...failed, ...alarm });
    } finally {
      this.#token.ended(seq);
      this.#lease.ended(seq);
      this.#abandoned.delete(seq);
      this.#token.release();
    }
  }

  /**
   * After the commit of an event that changed its alarm: the answer waits
   * until the change is in the bucket (an acknowledged alarm fires whatever
   * node dies), then the entries it made stale are deleted.
   */
  async #alarmLanded(seq: number, actor: ResidentActor, alarm: AlarmCommit): Promise<void> {
    if (!alarm.changed && alarm.stale.length === 0) return;
    const landed = actor.store.landed();
    if (alarm.changed) await this.#landed(seq, actor, "the alarm's change", landed);
    if (alarm.stale.length === 0) return;
    const { key } = actor;
    landed.then(
      () => deleteEntries(this.#alarmIndex, key, alarm.stale, this.#log),
      // A failed upload gave the actor up: its entries stay as its history has them.
      () => {},
    );
  }

  /** The event waits until its commits are in the bucket; `what` names them in its 503. */
  async #landed(
    seq: number,
    actor: ResidentActor,
    what: string,
    landed = actor.store.landed(),
  ): Promise<void> {
    try {
      await this.#suspend(seq, landed);
    } catch (error) {
      if (error instanceof EventFailure) throw error;
      throw new EventFailure(503, `${what} did not reach the bucket; retry`);
    }
  }

  /** Commits the event's alarm change (alarm_event.ts). */
  #commitAlarm(seq: number, actor: ResidentActor): Promise<AlarmCommit> {
    return commitAlarm({
      key: actor.key,
      alarm: actor.alarm,
      index: this.#alarmIndex,
      suspend: (work) => this.#suspend(seq, work),
      db: () => this.#db(actor.path),
      dead: () => actor.dead,
      onSet: () => this.#post({ type: "count", name: "wasmkeep_alarms_set_total", by: 1 }),
      unlisted: this.#o.planted?.alarmNotListed,
    });
  }

  #errorId(): string {
    return randomHex(this.#o.random, 6);
  }

  /**
   * Fails the event (503) when the node's lease it was sent under ran out:
   * a `discard-all` came since, or the wall clock passed the lease's end (as
   * the event carried it, or later as a `lease` message renewed it).
   * An actor woken for it at a generation a `discard-all` dropped is given
   * up, so no later event runs at that generation either.
   */
  #checkLease(seq: number, actor?: ResidentActor): void {
    const verdict = this.#lease.check(seq);
    if (verdict === "valid") return;
    if (verdict === "discarded" && actor && !actor.dead) {
      this.#discard(actor);
      this.#givenUp.set(actor.id, actor.generation);
    }
    throw new EventFailure(503, "the node's lease ran out before the event could run; retry");
  }

  #forgetResident(actor: ResidentActor) {
    if (this.#resident.get(actor.id) === actor) this.#resident.delete(actor.id);
    if (this.#residentByPath.get(actor.path) === actor) this.#residentByPath.delete(actor.path);
  }

  /**
   * Before the pool closes a database to make room or because it sat idle:
   * its actor's commits not yet captured are captured first. SQLite folds
   * the -wal into the file when it closes, so commits of an event that is
   * waiting (on a call, a restore, a snapshot; or an on-init's before one)
   * would otherwise never be uploaded, and a restore would rebuild the
   * database without them.
   */
  #beforePoolCloses(path: string, db: ActorDatabase): void {
    const actor = this.#residentByPath.get(path);
    if (!actor || actor.dead) return;
    try {
      actor.store.committed(db);
    } catch (error) {
      this.#log.error("capture before closing the database failed", {
        actor: actor.id,
        error: String(error),
      });
      // Its local file is not vouched for: the next wake restores.
      this.#discard(actor);
    }
  }

  /** Closes a resident actor: replicated, its uploads land (bounded); then its database closes. */
  async #close(actor: ResidentActor): Promise<boolean> {
    this.#forgetResident(actor);
    if (actor.dead) return false;
    const landed = await actor.store.close(() => this.#databases.close(actor.path));
    actor.dead = true;
    this.#o.observer?.closed?.(actor.key, actor.path, landed);
    return landed;
  }

  #rememberSchedule(id: string, schedule: SnapshotSchedule) {
    if (schedule.failures === 0) return;
    this.#schedules.set(id, schedule);
  }

  /**
   * Takes one message of the node (the first, `init`, is the runtime's
   * making). Events start in arrival order; one runs at a time, and the
   * next starts only when it ends or waits on the bucket (then the node is
   * told), so the node knows which event is running.
   */
  handle(message: Exclude<ToExecutor, ExecutorInit | { type: "classes" }>): void {
    switch (message.type) {
      case "event": {
        const id = actorKeyString(message.actor);
        this.#lease.received(message.seq, message.until);
        this.#chain(
          id,
          () =>
            this.#runEvent(
              message.seq,
              id,
              message.actor,
              message.generation,
              message.request,
              message.socket,
              message.connections,
              message.alarm,
            ),
        );
        return;
      }
      case "drop": {
        const id = actorKeyString(message.actor);
        this.#chain(id, async () => {
          const actor = this.#resident.get(id);
          const landed = actor ? await this.#close(actor) : true;
          this.#post({
            type: "dropped",
            actor: message.actor,
            generation: message.generation,
            landed,
          });
        });
        return;
      }
      case "abandon": {
        if (this.#lease.has(message.seq)) this.#abandoned.add(message.seq);
        const actor = this.#resident.get(actorKeyString(message.actor));
        if (actor) {
          this.#discard(actor);
          this.#givenUp.set(actor.id, actor.generation);
          this.#post({ type: "give-up", actor: actor.key, generation: actor.generation });
        }
        this.#post({ type: "abandoned", seq: message.seq });
        return;
      }
      case "discard-all": {
        this.#lease.discardAll();
        for (const actor of [...this.#resident.values()]) {
          this.#discard(actor);
          // Its generation is over: queued events of it get a 503.
          this.#givenUp.set(actor.id, actor.generation);
        }
        return;
      }
      case "lease": {
        this.#lease.renew(message.until);
        return;
      }
      case "hold": {
        this.#holdChecks.get(message.id)?.(message.ok);
        this.#holdChecks.delete(message.id);
        return;
      }
      case "call-answer": {
        // A call whose event timed out meanwhile is no longer listed.
        this.#calls.get(message.id)?.(message.answer);
        return;
      }
      case "shutdown":
        return;
    }
  }

  /** The resident actors' ids now. */
  residentIds(): string[] {
    return [...this.#resident.keys()];
  }

  /** Where a resident actor stands, or `undefined` when it is not resident. */
  inspect(id: string): ActorState | undefined {
    const actor = this.#resident.get(id);
    if (!actor || actor.dead) return undefined;
    const state: ActorState = {
      generation: actor.generation,
      path: actor.path,
      busy: this.#chains.has(id),
      db: this.#databases.peek(actor.path),
    };
    const store = actor.store;
    if (store instanceof ReplicatedStore) {
      const { replica } = store;
      state.txid = replica.position.txid;
      state.checksum = replica.position.checksum;
      state.landed = !replica.uploader.failed &&
        replica.uploader.landedTxid === replica.position.txid;
    }
    return state;
  }

  /** Closes every actor (uploads land, bounded), then the bucket; tells the node `closed`. */
  async shutdown(): Promise<void> {
    this.#sweep?.cancel();
    await Promise.all([...this.#chains.values()].map((chain) => chain.catch(() => {})));
    await Promise.all([...this.#resident.values()].map((actor) => this.#close(actor)));
    this.#databases.closeAll();
    await this.#o.bucket?.close();
    this.#post({ type: "closed" });
  }
}
