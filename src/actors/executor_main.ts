/**
 * An executor process: instantiates actor components and runs their events,
 * with the actors' SQLite databases. The node kills it (SIGKILL) when an
 * event runs past its wall-clock limit, which ends the loop, the instances
 * and the database connections with their locks at once; a terminated Deno
 * Worker would keep spinning and keep its connections (docs/adr/0001).
 *
 * It connects to the Unix socket the node names in its arguments and
 * exchanges framed messages (frames.ts) on it; its log goes to stderr, which
 * it shares with the node.
 *
 * @module
 */

import { createLogger, type Logger, type LogLevel } from "../log.ts";
import { type ActorKey, actorKeyString } from "./key.ts";
import {
  actorDatabasePath,
  type ActorRequest,
  type CallAnswer,
  type ExecutorClass,
  type ExecutorInit,
  type FromExecutor,
  type ToExecutor,
} from "./protocol.ts";
import { FrameSender, readFrames } from "./frames.ts";
import { bindToNode, executorNodePid } from "./executor_lifeline.ts";
import { waitingChain } from "./call_chain.ts";
import { DatabasePool } from "../sqlite/database_pool.ts";
import { type ActorDatabase, type SqlError, toSqlError } from "../sqlite/actor_database.ts";
import { openBucket } from "../bucket/open.ts";
import { systemClock, systemRandom } from "../time/clock.ts";
import { ActorReplica, type ReplicaContext } from "../replication/replica.ts";
import { type ActorStore, LocalStore, ReplicatedStore } from "./actor_store.ts";
import { ReadLimiter } from "../replication/read_limiter.ts";
import { ReplicationFailed, type SnapshotSchedule } from "../replication/uploader.ts";
import { HistoryError } from "../replication/history.ts";
import { RestoreUnavailable } from "../replication/restore.ts";
import type { Plain } from "./codec.ts";
import {
  type ActorExportCalls,
  type ActorImports,
  GuestError,
  instantiateDirect,
} from "./abi/direct.ts";

/** How often idle databases are looked for. */
const DATABASE_SWEEP_MS = 1000;

/** The meta key holding the code version whose on-init ran. */
const INIT_VERSION_KEY = "init_version";

/**
 * Actors whose failed periodic snapshots are remembered while they sleep
 * (the spec: waking one must not try again early); the least recently
 * touched is forgotten first.
 */
export const REMEMBERED_SNAPSHOT_SCHEDULES = 10_000;

/** Actors given up (an upload failed) remembered, so their queued events get a 503. */
const REMEMBERED_GIVE_UPS = 10_000;

/** Inside a transaction, exec-durable takes only this. */
const COMMIT_STATEMENT = /^\s*(COMMIT|END)(\s+TRANSACTION)?\s*;?\s*$/i;

interface GlueModule {
  instantiate(
    getCoreModule: (name: string) => WebAssembly.Module,
    imports: Record<string, Record<string, unknown>>,
  ): Promise<ActorExportCalls>;
}

interface LoadedClass {
  spec: ExecutorClass;
  /** jco's glue, for a class without the direct bindings. */
  glue?: GlueModule;
  modules: Map<string, WebAssembly.Module>;
}

interface ResidentActor {
  key: ActorKey;
  id: string;
  path: string;
  generation: number;
  /** Unset when the next event must make a new instance (after a trap, or a delete). */
  exports: ActorExportCalls | undefined;
  /** Its database, replicated or local (set once the wake opened it). */
  store: ActorStore;
  /** The event holding the run token for this actor, if any. */
  seq: number;
  /** Discarded: an event suspended in it must not touch its database again. */
  dead: boolean;
  /**
   * The actors waiting on the running event (its caller's chain, then its
   * caller), outermost first: what a call it makes carries, so the node can
   * refuse a call back into any of them.
   */
  chain: string[];
}

/** Raised when an event must fail with a status the actor did not choose. */
class EventFailure extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

function unavailable(feature: string, needs: string): SqlError {
  return {
    code: "WASMKEEP_UNSUPPORTED",
    message: `${feature} is not available in this version of WasmKeep yet (${needs})`,
  };
}

function describe(error: unknown): string {
  if (error instanceof GuestError) {
    return `host error not returned to the actor: ${JSON.stringify(error.payload)}`;
  }
  if (error instanceof Error) return error.stack ?? error.message;
  return String(error);
}

function errorId(): string {
  return Array.from(
    crypto.getRandomValues(new Uint8Array(6)),
    (b) => b.toString(16).padStart(2, "0"),
  ).join("");
}

async function loadClass(spec: ExecutorClass): Promise<LoadedClass> {
  const modules = new Map<string, WebAssembly.Module>();
  for (const [name, bytes] of Object.entries(spec.coreModules)) {
    if (spec.directModule && name !== spec.directModule) continue;
    modules.set(name, new WebAssembly.Module(bytes as Uint8Array<ArrayBuffer>));
  }
  if (spec.directModule) return { spec, modules };
  // The glue is generated at run time, so it is imported from memory: a
  // compiled binary has no source tree to import it from.
  const url = URL.createObjectURL(new Blob([spec.glue], { type: "text/javascript" }));
  try {
    return { spec, glue: await import(url) as GlueModule, modules };
  } finally {
    URL.revokeObjectURL(url);
  }
}

/** The same imports in the nested, camel-cased shape jco's glue asks for. */
function jcoImports(host: ActorImports): Record<string, Record<string, unknown>> {
  return {
    "wasmkeep:actor/storage": {
      exec: host.exec,
      execDurable: host.execDurable,
      inTransaction: host.inTransaction,
      deleteSelf: host.deleteSelf,
    },
    "wasmkeep:actor/actors": { self: host.self, call: host.call },
    "wasmkeep:actor/alarms": { set: host.alarmSet, get: host.alarmGet, delete: host.alarmDelete },
    "wasmkeep:actor/websockets": {
      send: host.wsSend,
      close: host.wsClose,
      connections: host.wsConnections,
    },
    "wasmkeep:actor/config": { get: host.configGet },
    "wasmkeep:actor/log": { log: host.log },
  };
}

/** One executor's state and its events. */
class Executor {
  readonly #classes = new Map<string, LoadedClass>();
  readonly #resident = new Map<string, ResidentActor>();
  readonly #databases: DatabasePool;
  readonly #sender: FrameSender;
  readonly #log: Logger;
  /** Unset on a standalone node: its actors' databases are local only (ADR 0005). */
  readonly #replication: ReplicaContext | undefined;
  /** The tail of each actor's events: one actor's events run one at a time, in order. */
  readonly #chains = new Map<string, Promise<void>>();
  /** Failed periodic snapshots of sleeping actors, least recently touched first. */
  readonly #schedules = new Map<string, SnapshotSchedule>();
  /** Generations given up, by actor: their queued events get a 503. */
  readonly #givenUp = new Map<string, number>();
  /** One event runs at a time; the others wait for it to end or suspend. */
  #running = false;
  readonly #runQueue: (() => void)[] = [];
  readonly #holdChecks = new Map<number, (ok: boolean) => void>();
  #holdSeq = 0;
  /**
   * Counts `discard-all`s: an event received before the last one belongs to
   * a lease that ran out, and never runs (nor does the wake it started).
   */
  #epoch = 0;
  /** What bounds each event under way: the epoch it came in and its lease's end. */
  readonly #eventLimits = new Map<number, { epoch: number; until: number }>();
  /** The resident actors by their database's path (the pool closes databases by path). */
  readonly #residentByPath = new Map<string, ResidentActor>();
  /**
   * Events the node answered (504) and abandoned before they started here:
   * they never run. Only events received and not ended are kept.
   */
  readonly #abandoned = new Set<number>();
  /**
   * The lease's end as the node's last `lease` message in this epoch gave it
   * (0 before one): the lease an event of this epoch was sent under, renewed.
   */
  #leaseUntil = 0;
  /** actors.call sent to the node, by id, until their answer. */
  readonly #calls = new Map<number, (answer: CallAnswer) => void>();
  #callSeq = 0;
  /** When the event holding the run token started (for its wall-clock limit). */
  #eventStartedAt = 0;
  /** Start times of the events under way, by sequence number. */
  readonly #startedAt = new Map<number, number>();

  constructor(readonly init: ExecutorInit, classes: LoadedClass[], sender: FrameSender) {
    this.#sender = sender;
    for (const loaded of classes) this.#classes.set(loaded.spec.className, loaded);
    this.#databases = new DatabasePool(
      init.maxOpenDatabases,
      () => performance.now(),
      init.replicate ? "replicated" : "local",
      (path, db) => this.#beforePoolCloses(path, db),
    );
    // The executor runs no cluster code and has no clock to share: its own
    // timer is fine here. Unref'd, so it never keeps the process alive.
    const sweep = setInterval(
      () => this.#databases.closeIdle(init.databaseIdleMs),
      Math.min(init.databaseIdleMs, DATABASE_SWEEP_MS),
    );
    Deno.unrefTimer(sweep);
    this.#log = createLogger({ level: init.logLevel as LogLevel });
    this.#replication = init.replicate
      ? {
        bucket: openBucket(init.bucketUrl, { clock: systemClock, random: systemRandom }),
        clock: systemClock,
        log: this.#log,
        nodeId: init.nodeId,
        limiter: new ReadLimiter(init.restoreReads, init.restoreBytes),
        historyRetentionMs: init.historyRetentionMs,
        count: (name, by = 1) => this.post({ type: "count", name, by }),
      }
      : undefined;
  }

  post(message: FromExecutor) {
    this.#sender.send(message as unknown as Plain);
  }

  /** Waits for the run token; a resumed event goes before events not started. */
  #acquire(resumed = false): Promise<void> {
    if (!this.#running) {
      this.#running = true;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      if (resumed) this.#runQueue.unshift(resolve);
      else this.#runQueue.push(resolve);
    });
  }

  #release() {
    const next = this.#runQueue.shift();
    if (next) next();
    else this.#running = false;
  }

  /**
   * Lets other actors' events run while this event waits on the bucket. The
   * node is told, so it counts the next event as the one running, and
   * leaves this event's wall-clock limit to the executor: past it the wait
   * ends with a 504 (`onTimeout` may stop the work), and the event's
   * instance unwinds.
   */
  async #suspend<T>(seq: number, work: Promise<T>, onTimeout?: () => Promise<void>): Promise<T> {
    this.post({ type: "suspended", seq });
    // Written before another event can start: one that loops would keep a
    // queued write from ever going out, and the node would count this
    // event, not the loop, as the one running.
    await this.#sender.drain();
    this.#release();
    const controller = new AbortController();
    const remaining = this.#eventStartedAt + this.init.eventTimeoutMs - performance.now();
    const timer = setTimeout(() => controller.abort(), Math.max(0, remaining));
    let stopping: Promise<void> | undefined;
    const timedOut = new Promise<never>((_, reject) =>
      controller.signal.addEventListener("abort", () => {
        // The 504 wins the race before onTimeout stops the work, whose own
        // rejection (the abort) would otherwise be taken for a failure.
        reject(
          new EventFailure(
            504,
            `the actor did not finish its event within ${this.init.eventTimeoutMs / 1000} s`,
          ),
        );
        stopping = onTimeout?.().catch(() => {});
      })
    );
    let result: T;
    try {
      result = await Promise.race([work, timedOut]);
    } finally {
      clearTimeout(timer);
      // The stopped work has ended before anything else of this actor runs.
      await stopping;
      await this.#acquire(true);
      this.#eventStartedAt = this.#startedAt.get(seq) ?? performance.now();
      // Written before the event goes on, for the same reason: the node
      // must count it, not an event waiting for the token, as running.
      this.post({ type: "resumed", seq });
      await this.#sender.drain();
    }
    // Its lease may have run out while it waited: it does nothing more.
    this.#checkLease(seq);
    return result;
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
      this.post({ type: "check-hold", id, actor: actor.key, generation: actor.generation });
    });
  }

  #imports(actor: ResidentActor, spec: ExecutorClass): ActorImports {
    const { key, path } = actor;
    const log = this.#log.with({ actor: actor.id });
    const fail = (error: SqlError | string): never => {
      throw new GuestError(error);
    };
    const alive = () => {
      if (actor.dead) throw new Error("the actor was discarded while its event waited");
    };
    return {
      exec: (sql, params) => {
        alive();
        try {
          return this.#db(path).exec(sql, params);
        } catch (error) {
          if (error instanceof GuestError) throw error;
          throw new GuestError(toSqlError(error));
        }
      },
      execDurable: async (sql, params) => {
        alive();
        const db = this.#db(path);
        if (db.inTransaction && !COMMIT_STATEMENT.test(sql)) {
          fail({
            code: "WASMKEEP_DURABLE_IN_TRANSACTION",
            message: "inside a transaction exec-durable takes only the COMMIT: " +
              "nothing is durable before it; run the other statements with exec",
          });
        }
        const { result, durable } = actor.store.execDurable(db, () => {
          try {
            return db.exec(sql, params);
          } catch (error) {
            throw new GuestError(toSqlError(error));
          }
        });
        if (durable) {
          await this.#suspend(actor.seq, durable);
          alive();
        }
        return result;
      },
      inTransaction: () => this.#databases.peek(path)?.inTransaction ?? false,
      deleteSelf: () => {
        alive();
        const db = this.#db(path);
        if (db.inTransaction) {
          fail({
            code: "WASMKEEP_DELETE_IN_TRANSACTION",
            message: "delete-self cannot run inside a transaction; commit or roll it back first",
          });
        }
        // Replicated, what committed before the delete takes its own TXID,
        // then the delete takes the next one; the marker is uploaded in that
        // order. Local, the wipe is the whole delete.
        actor.store.committed(db);
        this.#databases.wipe(path);
        // A new instance over the emptied database for the next event, and
        // on-init runs again.
        actor.exports = undefined;
        actor.store.deleted();
      },
      self: () => ({ tenant: key.tenant, class: key.class, name: key.name }),
      call: async (className, name, request) => {
        alive();
        const id = ++this.#callSeq;
        const answer = new Promise<CallAnswer>((resolve) => this.#calls.set(id, resolve));
        this.post({
          type: "call",
          id,
          seq: actor.seq,
          caller: key,
          chain: actor.chain,
          target: { tenant: key.tenant, class: className, name },
          request,
        });
        let result: CallAnswer;
        try {
          // Other actors' events run while this one waits (a call to an actor
          // of the same executor needs that); its own wait for the token.
          result = await this.#suspend(actor.seq, answer);
        } finally {
          this.#calls.delete(id);
        }
        alive();
        if (!result.ok) return fail(result.error);
        return result.response;
      },
      alarmSet: () => fail(unavailable("alarms.set", "alarms").message),
      // No alarm can have been set, so "none" is the true answer.
      alarmGet: () => undefined,
      alarmDelete: () => fail(unavailable("alarms.delete", "alarms").message),
      wsSend: () => fail(unavailable("websockets.send", "WebSockets").message),
      wsClose: () => fail(unavailable("websockets.close", "WebSockets").message),
      // No socket can be open, so the empty list is the true answer.
      wsConnections: () => [],
      configGet: (name) => Object.hasOwn(spec.config, name) ? spec.config[name] : undefined,
      log: (level: LogLevel, message) => log[level](message.slice(0, 4096)),
    };
  }

  async #instantiate(loaded: LoadedClass, imports: ActorImports): Promise<ActorExportCalls> {
    const direct = loaded.spec.directModule;
    if (direct) return instantiateDirect(loaded.modules.get(direct)!, imports);
    return await loaded.glue!.instantiate((name) => loaded.modules.get(name)!, jcoImports(imports));
  }

  async #wake(
    seq: number,
    key: ActorKey,
    id: string,
    generation: number,
    chain: string[],
  ): Promise<ResidentActor> {
    const loaded = this.#classes.get(key.class);
    if (!loaded) throw new EventFailure(500, `no class ${key.class} in this executor`);
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
    } as ResidentActor;
    actor.store = await this.#openStore(seq, actor);
    this.#schedules.delete(id);
    // Resident from here, so a failing on-init discards it with its store.
    this.#resident.set(id, actor);
    this.#residentByPath.set(path, actor);
    await this.#instantiateActor(actor);
    return actor;
  }

  /**
   * The actor's database at this generation. Replicated: restored from the
   * bucket unless the local file is current (the event suspends meanwhile),
   * then opened. Local (a standalone node, ADR 0005): the file is the only
   * copy and is opened as it is, at the actor's first statement.
   */
  async #openStore(seq: number, actor: ResidentActor): Promise<ActorStore> {
    const replication = this.#replication;
    if (!replication) return new LocalStore();
    const { key, id, path, generation } = actor;
    const abort = new AbortController();
    const opening = ActorReplica.open(replication, {
      actor: key,
      path,
      generation: BigInt(generation),
      schedule: this.#schedules.get(id),
      onFailure: (error) => this.#giveUp(actor, error),
      openDatabase: () => this.#db(path),
      signal: abort.signal,
    });
    let replica;
    try {
      replica = await this.#suspend(seq, opening, async () => {
        // The actor's next event must not start a restore beside this one.
        abort.abort(new Error("the event's wall-clock limit passed"));
        const late = await opening.catch(() => undefined);
        late?.abandon();
      });
    } catch (error) {
      this.#databases.close(path);
      if (error instanceof HistoryError) {
        this.post({ type: "count", name: "wasmkeep_restore_failures_total", by: 1 });
        throw new EventFailure(
          500,
          `the actor's history in the bucket cannot be restored without losing data: ${error.message}`,
        );
      }
      if (error instanceof ReplicationFailed) {
        throw new EventFailure(503, `the bucket did not take the actor's first snapshot; retry`);
      }
      if (error instanceof RestoreUnavailable) {
        this.post({ type: "count", name: "wasmkeep_restore_failures_total", by: 1 });
        throw new EventFailure(503, `the bucket did not answer the actor's restore; retry`);
      }
      throw error;
    }
    return new ReplicatedStore(replica, {
      checkHold: () => this.#checkHold(actor),
      onClosed: (schedule) => this.#rememberSchedule(id, schedule),
    });
  }

  /** Makes the actor's instance, running on-init once per code version. */
  async #instantiateActor(actor: ResidentActor) {
    const loaded = this.#classes.get(actor.key.class)!;
    const { path } = actor;
    const exports = await this.#instantiate(loaded, this.#imports(actor, loaded.spec));
    actor.exports = exports;
    const db = this.#db(path);
    if (db.getMeta(INIT_VERSION_KEY) === loaded.spec.hash) return;
    try {
      await exports.onInit();
    } catch (error) {
      const payload = (error as { payload?: unknown }).payload;
      if (typeof payload !== "string") throw error;
      throw new EventFailure(500, `the actor's on-init failed: ${payload}`);
    }
    if (this.#db(path).inTransaction) {
      throw new EventFailure(
        500,
        "the actor's on-init ended with a transaction open; it was rolled back",
      );
    }
    this.#db(path).setMeta(INIT_VERSION_KEY, loaded.spec.hash);
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
    this.#rememberGiveUp(actor.id, actor.generation);
    this.post({ type: "give-up", actor: actor.key, generation: actor.generation });
  }

  #rememberGiveUp(id: string, generation: number) {
    this.#givenUp.delete(id);
    this.#givenUp.set(id, generation);
    if (this.#givenUp.size > REMEMBERED_GIVE_UPS) {
      this.#givenUp.delete(this.#givenUp.keys().next().value!);
    }
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
  ) {
    await this.#acquire();
    if (this.#abandoned.delete(seq)) {
      this.#eventLimits.delete(seq);
      this.#release();
      return;
    }
    this.#eventStartedAt = performance.now();
    this.#startedAt.set(seq, this.#eventStartedAt);
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
        // one): its waits and calls are this event's.
        actor.seq = seq;
        actor.chain = chain;
        if (!actor.exports) await this.#instantiateActor(actor);
      }
      const db = () => this.#databases.peek(actor!.path);
      const path = actor.path;
      const before = actor.store.beforeEvent(() => this.#db(path));
      if (before) await this.#suspend(seq, before);
      // A wake that waited on the bucket may end after the lease it began in.
      this.#checkLease(seq, actor);
      // A delete-self during the event unsets the instance it runs in.
      const response = await actor.exports!.onRequest(request);
      if (db()?.inTransaction) {
        throw new EventFailure(500, "the event ended with a transaction open; it was rolled back");
      }
      const open = db();
      if (open && !actor.dead) actor.store.committed(open);
      if (!actor.dead) this.post({ type: "done", seq, response });
      else {this.post({
          type: "failed",
          seq,
          status: 503,
          message: "the actor was given up; retry",
        });}
    } catch (error) {
      actor ??= this.#resident.get(id);
      if (actor && !actor.dead) this.#dropInstance(actor);
      if (error instanceof EventFailure) {
        this.#log.warn("event failed", { actor: id, reason: error.message });
        this.post({ type: "failed", seq, status: error.status, message: error.message });
      } else {
        // A trap or a host failure: the instance may be in any state, so it
        // is discarded and its open transaction rolled back.
        const eid = errorId();
        this.#log.error("actor failed", { actor: id, error_id: eid, error: describe(error) });
        this.post({
          type: "failed",
          seq,
          status: 500,
          message: `the actor failed (error id ${eid})`,
        });
      }
    } finally {
      this.#startedAt.delete(seq);
      this.#eventLimits.delete(seq);
      this.#abandoned.delete(seq);
      this.#release();
    }
  }

  /**
   * Fails the event (503) when the node's lease it was sent under ran out:
   * a `discard-all` came since, or the wall clock passed the lease's end (as
   * the event carried it, or later as a `lease` message renewed it).
   * An actor woken for it at a generation a `discard-all` dropped is given
   * up, so no later event runs at that generation either.
   */
  #checkLease(seq: number, actor?: ResidentActor): void {
    const limit = this.#eventLimits.get(seq);
    if (!limit) return;
    const discarded = limit.epoch !== this.#epoch;
    const until = limit.until === 0 ? 0 : Math.max(limit.until, this.#leaseUntil);
    if (!discarded && (until === 0 || Date.now() < until)) return;
    if (discarded && actor && !actor.dead) {
      this.#discard(actor);
      this.#rememberGiveUp(actor.id, actor.generation);
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
    return landed;
  }

  #rememberSchedule(id: string, schedule: SnapshotSchedule) {
    if (schedule.failures === 0) return;
    this.#schedules.set(id, schedule);
    if (this.#schedules.size > REMEMBERED_SNAPSHOT_SCHEDULES) {
      this.#schedules.delete(this.#schedules.keys().next().value!);
    }
  }

  handle(message: ToExecutor): void {
    switch (message.type) {
      case "event": {
        const id = actorKeyString(message.actor);
        this.#eventLimits.set(message.seq, { epoch: this.#epoch, until: message.until });
        this.#chain(
          id,
          () => this.#runEvent(message.seq, id, message.actor, message.generation, message.request),
        );
        return;
      }
      case "drop": {
        const id = actorKeyString(message.actor);
        this.#chain(id, async () => {
          const actor = this.#resident.get(id);
          const landed = actor ? await this.#close(actor) : true;
          this.post({
            type: "dropped",
            actor: message.actor,
            generation: message.generation,
            landed,
          });
        });
        return;
      }
      case "abandon": {
        if (this.#eventLimits.has(message.seq)) this.#abandoned.add(message.seq);
        const actor = this.#resident.get(actorKeyString(message.actor));
        if (actor) {
          this.#discard(actor);
          this.#rememberGiveUp(actor.id, actor.generation);
          this.post({ type: "give-up", actor: actor.key, generation: actor.generation });
        }
        this.post({ type: "abandoned", seq: message.seq });
        return;
      }
      case "discard-all": {
        this.#epoch++;
        this.#leaseUntil = 0;
        for (const actor of [...this.#resident.values()]) {
          this.#discard(actor);
          // Its generation is over: queued events of it get a 503.
          this.#rememberGiveUp(actor.id, actor.generation);
        }
        return;
      }
      case "lease": {
        this.#leaseUntil = Math.max(this.#leaseUntil, message.until);
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

  /** Closes every actor (uploads land, bounded), then the bucket. */
  async shutdown() {
    await Promise.all([...this.#chains.values()].map((chain) => chain.catch(() => {})));
    await Promise.all([...this.#resident.values()].map((actor) => this.#close(actor)));
    this.#databases.closeAll();
    await this.#replication?.bucket.close();
    this.post({ type: "closed" });
  }
}

/**
 * Runs an executor on the Unix socket at `socketPath` until the node closes
 * it or sends a shutdown message; then the process must exit (the lifeline's
 * Worker keeps it alive). The executor lives and dies with its node, process
 * `nodePid` (its parent when not given): see executor_lifeline.ts.
 *
 * @example
 * ```ts ignore
 * await runExecutor("/tmp/wasmkeep-1234-x/e0.sock", 1234);
 * Deno.exit(0);
 * ```
 */
export async function runExecutor(socketPath: string, nodePid = Deno.ppid): Promise<void> {
  bindToNode(nodePid);
  const conn = await Deno.connect({ transport: "unix", path: socketPath });
  const sender = new FrameSender(conn);
  let executor: Executor | undefined;
  try {
    for await (const frame of readFrames(conn)) {
      const message = frame as unknown as ToExecutor;
      if (message.type === "init") {
        const classes = await Promise.all(message.classes.map(loadClass));
        executor = new Executor(message, classes, sender);
        executor.post({ type: "ready" });
        continue;
      }
      if (!executor) throw new Error("the first message to an executor must be init");
      // Events start in arrival order; one runs at a time, and the next
      // starts only when it ends or waits on the bucket (then the node is
      // told), so the node knows which event is running.
      executor.handle(message);
      if (message.type === "shutdown") {
        await executor.shutdown();
        break;
      }
    }
    await sender.drain();
  } finally {
    conn.close();
  }
}

if (import.meta.main) {
  await runExecutor(Deno.args[0], executorNodePid(Deno.args[1]));
  Deno.exit(0);
}
