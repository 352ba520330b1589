/**
 * The executors of a simulated node: the real runtime (src/executor/runtime.ts),
 * built as an executor process builds it (src/executor/build_runtime.ts: its
 * bucket requests counted and told to the node), behind the real pool
 * (src/actors/executor_pool.ts), with the process
 * boundary, the one part that cannot be shared, replaced. Messages cross it
 * through the protocol's own checks (encoded and decoded, as frames are), as
 * events of the node's process, so a paused machine pauses them too; a kill
 * cuts the executor's bucket and closes its databases as a crash leaves
 * them. The actor is a fixed program ({@linkcode SimProgram}) instead of a
 * component: each event is a read (`SELECT`), a plain write (`exec`), a
 * durable write (`exec-durable`) or a delete (`delete-self`) of its one
 * table, reported to an {@linkcode ActorObserver} as it happens, for the
 * invariants.
 *
 * The replication variants of sim/variants.ts are views of the bucket the
 * runtime is given (`stale-generation`, `trust-local`) or rewrites of the
 * node's messages (`executor-as-is`: no lease end with events, and a
 * `discard-all` that only drops the resident actors, as the executor was
 * before b0ea67d).
 *
 * @module
 */

import { type ActorKey, actorKeyString } from "../src/actors/key.ts";
import {
  actorDatabasePath,
  type ActorRequest,
  type ActorResponse,
  type ExecutorClass,
  type ExecutorInit,
  type FromExecutor,
  fromExecutorMessage,
  type SocketEvent,
  type ToExecutor,
  toExecutorMessage,
} from "../src/actors/protocol.ts";
import { decodePlain, encodePlain, MessageTooLarge, type Plain } from "../src/actors/codec.ts";
import { MAX_FRAME_BYTES } from "../src/actors/frames.ts";
import type {
  ExecutorChannel,
  ExecutorHandlers,
  ExecutorLauncher,
} from "../src/actors/executor_launcher.ts";
import { type ActorExportCalls, type ActorImports, GuestError } from "../src/actors/abi/direct.ts";
import { describeError } from "../src/describe_error.ts";
import type { Bucket, ListOptions, ListPage } from "../src/bucket/bucket.ts";
import { BucketView } from "../src/bucket/bucket_view.ts";
import { ActorDatabase, type SqlValue } from "../src/sqlite/actor_database.ts";
import { DatabasePool } from "../src/sqlite/database_pool.ts";
import { positionPath } from "../src/replication/replica.ts";
import { decodeBase, decodeDeleted } from "../src/replication/history.ts";
import type { ExecutorRuntime, RuntimeObserver } from "../src/executor/runtime.ts";
import { buildExecutorRuntime } from "../src/executor/build_runtime.ts";
import { serveMessages } from "../src/executor/message_loop.ts";
import type { ActorProgram } from "../src/executor/program.ts";
import type { Clock, Random, Timer } from "../src/time/clock.ts";
import type { Logger } from "../src/log.ts";
import type { Owner, Scheduler } from "./scheduler.ts";
import { crashClose, keepClosedCopy, readIfPresent } from "./disk.ts";

/** The actor's table: one row per write, its id unique in the run. */
const CREATE_TABLE =
  "CREATE TABLE IF NOT EXISTS w (id INTEGER PRIMARY KEY, gen INTEGER, node TEXT)";

/** What a client's event does, in the mix a seed draws. */
export type OpKind = "read" | "write" | "durable" | "delete";

/**
 * One event of the simulated actor: its kind, and the id a write inserts;
 * an `alarm` sets the actor's alarm to `at` (the alarm clients').
 */
export type Op = { kind: OpKind; id: number } | { kind: "alarm"; id: number; at: number };

/**
 * How a client sends `op`: its method, and the path after the actor's with
 * the query (`opOf` reads it back from the event's request).
 *
 * @example
 * ```ts
 * import { opTarget } from "./executor_host.ts";
 * opTarget({ kind: "durable", id: 7 }); // { method: "POST", path: "/durable?id=7" }
 * ```
 */
export function opTarget(op: Op): { method: "GET" | "POST"; path: string } {
  const at = op.kind === "alarm" ? `&at=${op.at}` : "";
  return { method: op.kind === "read" ? "GET" : "POST", path: `/${op.kind}?id=${op.id}${at}` };
}

/** The op a request carries. */
export function opOf(request: ActorRequest): Op {
  const kind = request.path.slice(1);
  const query = new URLSearchParams(request.query);
  const id = Number(query.get("id"));
  if (kind === "alarm") return { kind, id, at: Number(query.get("at")) };
  if (!["read", "write", "durable", "delete"].includes(kind)) {
    throw new Error(`not a simulated op: ${request.path}`);
  }
  return { kind: kind as OpKind, id };
}

/** The simulated actor's class, as the node sends it to its executors. */
export function simClass(className: string): ExecutorClass {
  return { className, hash: "sim-actor-1", glue: "", coreModules: {}, config: {} };
}

/** What the simulated actors and their runtime tell the simulator, as it happens. */
export interface ActorObserver {
  /** A wake (the store's open, with its restore) begins. */
  waking(actor: ActorKey, generation: number): void;
  /** The store opened at `generation`: the ids its database holds, and its TXID. */
  restored(actor: ActorKey, generation: number, ids: Set<number>, txid: bigint): void;
  /** Opening the store failed; `timedOut` when the event's limit passed first. */
  openFailed(actor: ActorKey, generation: number, error: unknown, timedOut: boolean): void;
  /** An event's program begins to run, at `generation`. */
  runs(actor: ActorKey, generation: number): void;
  /** A read ran: the ids it saw, and the TXID the database stood at. */
  read(actor: ActorKey, generation: number, ids: Set<number>, txid: bigint): void;
  /** A write is about to commit locally. */
  committed(actor: ActorKey, generation: number, op: Op): void;
  /** The actor deleted itself. */
  deleted(actor: ActorKey, generation: number): void;
  /** An on-alarm ran to its end for the alarm due at `due` (its commit follows). */
  alarmFired(actor: ActorKey, generation: number, due: number): void;
  /** An instance of the actor is made under the app's version `deploySeq` (the runtime's report). */
  ran(actor: ActorKey, generation: number, deploySeq: number): void;
  /** An event of the actor was answered (`done`), run by an instance made under `deploySeq`. */
  answered(actor: ActorKey, generation: number, deploySeq: number): void;
  /** An event was refused: its actor ran a later version than the executor has (`behind`). */
  behind(): void;
}

/** How a deliberately broken variant changes replication (sim/variants.ts). */
export type ReplicationBreak = "stale-generation" | "trust-local" | "executor-as-is";

/** A quiescent resident actor: every commit landed, no event under way. */
export interface SettledActor {
  generation: number;
  txid: bigint;
  checksum: bigint;
  /** The ids in its database. */
  ids: Set<number>;
}

/** What the executors of one simulated process work with. */
export interface SimExecutorsOptions {
  sched: Scheduler;
  /** The node's process: the executors are paused and crash with it. */
  owner: Owner;
  clock: Clock;
  /** The process's view of the bucket. */
  bucket: Bucket;
  log: Logger;
  /** Error ids. */
  random: Random;
  nodeId: string;
  observer: ActorObserver;
  /** Reads what the store holds at `key` without a call (for `trust-local`). */
  peek: (key: string) => Uint8Array | undefined;
  broken?: ReplicationBreak;
  /** Told of each event as the pool sends it, before the executor gets it (`alarm`: an alarm's). */
  onEvent?: (
    actor: ActorKey,
    generation: number,
    request: ActorRequest,
    socket: SocketEvent | undefined,
    alarm: number | undefined,
  ) => void;
  /** Alarms whose due time is a multiple of this fail their first two firings (a trap). */
  alarmFailEvery?: number;
  /** The planted `serves-behind` (sim/variants.ts): the runtime's `planted.servesBehind`. */
  servesBehind?: boolean;
  /** The planted `alarm-not-listed`: the runtime's `planted.alarmNotListed`. */
  alarmNotListed?: boolean;
}

/**
 * Launches a process's executors in the simulator's own process.
 *
 * @example
 * ```ts ignore
 * const executors = new SimExecutors({ sched, owner: proc, clock, bucket, log, ... });
 * const pool = new ExecutorPool({ ...options, launcher: executors });
 * ```
 */
export class SimExecutors implements ExecutorLauncher {
  readonly #o: SimExecutorsOptions;
  readonly #live = new Set<SimExecutor>();
  /** The node's process died: no executor starts any more. */
  #dead = false;

  constructor(options: SimExecutorsOptions) {
    this.#o = options;
  }

  launch(_index: number, handlers: ExecutorHandlers): ExecutorChannel {
    if (this.#dead) throw new Error("the node's process is gone");
    const executor = new SimExecutor(this.#o, handlers, () => this.#live.delete(executor));
    this.#live.add(executor);
    return executor;
  }

  close(): Promise<void> {
    return Promise.resolve();
  }

  /**
   * The node's process died: every executor with it, at once. Nothing of the
   * dead process learns of it (its pool does not run any more).
   */
  killAll(): void {
    this.#dead = true;
    for (const executor of [...this.#live]) executor.kill(false);
  }

  /** The actor if it is resident and quiescent: every commit landed, nothing under way. */
  settled(id: string): SettledActor | undefined {
    for (const executor of this.#live) {
      const settled = executor.settled(id);
      if (settled) return settled;
    }
    return undefined;
  }
}

/** One executor: the real runtime, its messages carried by the scheduler. */
class SimExecutor implements ExecutorChannel {
  readonly #o: SimExecutorsOptions;
  readonly #handlers: ExecutorHandlers;
  readonly #gone: () => void;
  readonly #inbox = new AsyncQueue<ToExecutor>();
  readonly #bucket: Bucket;
  readonly #clock: GatedClock;
  readonly exited: Promise<void>;
  #exited!: () => void;
  #runtime: ExecutorRuntime | undefined;
  #databases: SimDatabasePool | undefined;
  #killed = false;
  /** The generation of each actor's last wake, for its program's reports. */
  readonly #generations = new Map<string, number>();
  /** The actor of each event sent and not yet ended, by the event's seq. */
  readonly #eventActors = new Map<number, ActorKey>();
  /** The deploy seq and generation each actor's last instance was made under, by actor id. */
  readonly #instanceSeqs = new Map<string, { seq: number; generation: number }>();

  constructor(options: SimExecutorsOptions, handlers: ExecutorHandlers, gone: () => void) {
    this.#o = options;
    this.#handlers = handlers;
    this.#gone = gone;
    this.#bucket = gatedBucket(options.bucket, () => this.#killed);
    this.#clock = new GatedClock(options.clock, () => this.#killed);
    this.exited = new Promise((resolve) => this.#exited = resolve);
    serveMessages(this.#inbox, (init) => this.#start(init)).then(
      () => this.#exit(0),
      (error) => {
        if (this.#killed) return;
        options.log.error("simulated executor failed", { error: String(error) });
        this.kill();
      },
    );
  }

  get connected(): boolean {
    return !this.#killed;
  }

  send(message: ToExecutor): void {
    if (message.type === "event") {
      this.#eventActors.set(message.seq, message.actor);
      this.#o.onEvent?.(
        message.actor,
        message.generation,
        message.request,
        message.socket,
        message.alarm,
      );
    }
    // Checked and copied as a frame would be: nothing is shared across the boundary.
    const copy = toExecutorMessage(acrossTheBoundary(message as unknown as Plain));
    for (const delivered of this.#rewrite(copy)) {
      this.#o.sched.after(0, () => {
        if (!this.#killed) this.#inbox.push(delivered);
      }, this.#o.owner);
    }
  }

  /** The node's messages as the executor gets them: as sent, or as a broken variant changes them. */
  #rewrite(message: ToExecutor): ToExecutor[] {
    if (this.#o.broken !== "executor-as-is") return [message];
    if (message.type === "event") return [{ ...message, until: 0 }];
    if (message.type !== "discard-all") return [message];
    // The resident actors only: one still waking, and its queued events, go on.
    return (this.#runtime?.residentIds() ?? []).map((id) => {
      const [tenant, className, ...name] = id.split("/");
      return {
        type: "abandon",
        seq: -1,
        actor: { tenant, class: className, name: name.join("/") },
      };
    });
  }

  #post(message: FromExecutor): void {
    if (this.#killed) return;
    this.#ended(message);
    const copy = fromExecutorMessage(acrossTheBoundary(message as unknown as Plain));
    this.#o.sched.after(0, () => {
      if (!this.#killed) this.#handlers.onMessage(copy);
    }, this.#o.owner);
  }

  /** What an event's end tells the deploy checks: its answer's version, or a refusal. */
  #ended(message: FromExecutor): void {
    if (message.type === "behind") return this.#o.observer.behind();
    if (message.type !== "done" && message.type !== "failed") return;
    const actor = this.#eventActors.get(message.seq);
    if (!actor) return;
    this.#eventActors.delete(message.seq);
    if (message.type === "failed") return;
    const made = this.#instanceSeqs.get(actorKeyString(actor));
    if (made) this.#o.observer.answered(actor, made.generation, made.seq);
  }

  /** The runtime, made as a real executor process makes it, with the simulator's seams. */
  async #start(init: ExecutorInit): Promise<ExecutorRuntime> {
    const program = new SimProgram(
      this.#o,
      (id) => this.#generations.get(id) ?? 0,
      (id) => this.#runtime?.inspect(id)?.txid ?? 0n,
    );
    const observer: RuntimeObserver = {
      waking: (actor, generation) => {
        this.#generations.set(actorKeyString(actor), generation);
        this.#o.observer.waking(actor, generation);
      },
      opened: (actor, generation, db, txid) =>
        this.#o.observer.restored(actor, generation, idsIn(db), txid ?? 0n),
      openFailed: (actor, generation, error, timedOut) => {
        if (!this.#killed) this.#o.observer.openFailed(actor, generation, error, timedOut);
      },
      closed: (_actor, path, landed) => {
        if (landed && !this.#killed) keepClosedCopy(path);
      },
      ran: (actor, generation, deploySeq) => {
        this.#instanceSeqs.set(actorKeyString(actor), { seq: deploySeq, generation });
        if (!this.#killed) this.#o.observer.ran(actor, generation, deploySeq);
      },
    };
    this.#runtime = await buildExecutorRuntime(init, {
      program: (spec) => Promise.resolve(program.for(spec)),
      post: (message) => this.#post(message),
      drain: () => Promise.resolve(),
      clock: this.#clock,
      random: this.#o.random,
      log: this.#o.log,
      openBucket: ({ dataDir }) => this.#broken(dataDir),
      databases: (settings, beforeClose) => {
        this.#databases = new SimDatabasePool(
          settings.maxOpenDatabases,
          () => this.#clock.monotonic(),
          beforeClose,
          () => this.#killed,
        );
        return this.#databases;
      },
      observer,
      planted: { servesBehind: this.#o.servesBehind, alarmNotListed: this.#o.alarmNotListed },
    });
    return this.#runtime;
  }

  /** The bucket the runtime is given: the process's, or a deliberately broken view of it. */
  #broken(dataDir: string): Bucket {
    if (this.#o.broken === "stale-generation") return staleGenerations(this.#bucket);
    if (this.#o.broken === "trust-local") {
      return new HistoryUpTo(this.#bucket, dataDir, this.#o.peek);
    }
    return this.#bucket;
  }

  /** Ends it at once; `notify`: its pool learns of the exit (not when the whole process died). */
  kill(notify = true): void {
    if (this.#killed) return;
    this.#killed = true;
    this.#inbox.close();
    const databases = this.#databases;
    if (databases) {
      for (const path of databases.openPaths()) crashClose(path, () => databases.closeNow(path));
    }
    this.#exit(null, "SIGKILL", notify);
  }

  #exit(code: number | null, signal?: string, notify = true): void {
    this.#gone();
    this.#exited();
    if (notify) this.#handlers.onExit({ code, signal });
  }

  settled(id: string): SettledActor | undefined {
    if (this.#killed) return undefined;
    const state = this.#runtime?.inspect(id);
    if (!state || state.busy || !state.landed) return undefined;
    return {
      generation: state.generation,
      txid: state.txid!,
      checksum: state.checksum!,
      ids: state.db ? idsIn(state.db) : idsOnDisk(state.path),
    };
  }
}

/**
 * The simulated actor: one table `w(id, gen, node)`, an op per event, each
 * reported as it happens.
 */
class SimProgram {
  /** Failed firings so far, by `actor due`. */
  readonly #alarmFailures = new Map<string, number>();

  constructor(
    readonly o: SimExecutorsOptions,
    readonly generationOf: (id: string) => number,
    readonly txidOf: (id: string) => bigint,
  ) {}

  for(spec: ExecutorClass): ActorProgram {
    return { spec, instantiate: (imports) => Promise.resolve(this.#instance(imports)) };
  }

  #instance(imports: ActorImports): ActorExportCalls {
    const key = imports.self();
    const id = actorKeyString(key);
    const observer = this.o.observer;
    const ids = () => {
      const { rows } = imports.exec("SELECT id FROM w ORDER BY id", []);
      return new Set(rows.map(([v]) => Number((v as { val: bigint }).val)));
    };
    /** A socket event runs its statement, as a request's does (the executor's checks). */
    const socketEvent = () => {
      observer.runs(key, this.generationOf(id));
      imports.exec(CREATE_TABLE, []);
    };
    return {
      onInit: () => Promise.resolve(),
      onAlarm: () => {
        const generation = this.generationOf(id);
        observer.runs(key, generation);
        const due = Number(imports.alarmGet());
        const every = this.o.alarmFailEvery;
        const attempt = `${id} ${due}`;
        const failed = this.#alarmFailures.get(attempt) ?? 0;
        if (every !== undefined && due % every === 0 && failed < 2) {
          this.#alarmFailures.set(attempt, failed + 1);
          // Bounded: only the attempts of alarms still failing are kept.
          if (this.#alarmFailures.size > 10_000) this.#alarmFailures.clear();
          throw new Error(`on-alarm of ${id} fails its attempt ${failed + 1}`);
        }
        observer.alarmFired(key, generation, due);
        return Promise.resolve();
      },
      onWebsocketOpen: () => Promise.resolve(socketEvent()),
      // Each message is echoed on its socket: its client counts what came back.
      onWebsocketMessage: (connection, message) => {
        socketEvent();
        imports.wsSend(connection, message);
        return Promise.resolve();
      },
      onWebsocketClose: () => Promise.resolve(socketEvent()),
      onRequest: async (request: ActorRequest): Promise<ActorResponse> => {
        const op = opOf(request);
        const generation = this.generationOf(id);
        observer.runs(key, generation);
        imports.exec(CREATE_TABLE, []);
        const row: SqlValue[] = [
          { tag: "integer", val: BigInt(op.id) },
          { tag: "integer", val: BigInt(generation) },
          { tag: "text", val: this.o.nodeId },
        ];
        const insert = "INSERT INTO w (id, gen, node) VALUES (?, ?, ?)";
        const headers: [string, string][] = [];
        switch (op.kind) {
          case "read":
            observer.read(key, generation, ids(), this.txidOf(id));
            break;
          case "write":
            observer.committed(key, generation, op);
            imports.exec(insert, row);
            break;
          case "durable":
            // Reported before its upload: the commit is local at once.
            observer.committed(key, generation, op);
            try {
              await imports.execDurable(insert, row);
            } catch (error) {
              // The actor gets the host's error; this one answers with it.
              const text = error instanceof GuestError
                ? JSON.stringify(error.payload)
                : describeError(error, "named");
              return answer(503, `not durable: ${text}`);
            }
            headers.push(["x-sim-txid", String(this.txidOf(id))]);
            break;
          case "delete":
            await imports.deleteSelf();
            observer.deleted(key, generation);
            break;
          case "alarm":
            // Answered once the alarm is in the bucket (the event's commit waits for it).
            imports.alarmSet(BigInt(op.at));
            break;
        }
        return { status: 200, headers, body: new Uint8Array() };
      },
    };
  }
}

/** A frame's buffer, grown as messages need, up to the frame limit. */
let frame = new Uint8Array(64 * 1024);

/**
 * A message as the other side of a process boundary reads it: encoded and
 * decoded as a frame is, so nothing is shared; one over the frame limit
 * throws, as the real sender does.
 */
function acrossTheBoundary(message: Plain): Plain {
  while (true) {
    try {
      const length = encodePlain(message, frame);
      return decodePlain(frame.subarray(0, length));
    } catch (error) {
      if (!(error instanceof MessageTooLarge) || frame.length >= MAX_FRAME_BYTES) throw error;
      frame = new Uint8Array(Math.min(frame.length * 4, MAX_FRAME_BYTES));
    }
  }
}

function answer(status: number, text: string): ActorResponse {
  return { status, headers: [], body: new TextEncoder().encode(text) };
}

/** The ids in the actor's table (none before it exists). */
export function idsIn(db: ActorDatabase): Set<number> {
  const exists = db.exec("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'w'", []);
  if (exists.rows.length === 0) return new Set();
  const { rows } = db.exec("SELECT id FROM w ORDER BY id", []);
  return new Set(rows.map(([v]) => Number((v as { val: bigint }).val)));
}

/** The ids of a database its executor closed: read through a connection of the check's own. */
function idsOnDisk(path: string): Set<number> {
  if (readIfPresent(path) === undefined) return new Set();
  const db = new ActorDatabase(path);
  try {
    return idsIn(db);
  } finally {
    db.close();
  }
}

/** A pool of databases that a killed executor can no longer open, and can close as a crash does. */
class SimDatabasePool extends DatabasePool {
  readonly #killed: () => boolean;

  constructor(
    maxOpen: number,
    now: () => number,
    beforeClose: (path: string, db: ActorDatabase) => void,
    killed: () => boolean,
  ) {
    super(maxOpen, now, "replicated", beforeClose);
    this.#killed = killed;
  }

  override get(path: string): ActorDatabase {
    if (this.#killed()) throw new Error("the executor is gone");
    return super.get(path);
  }

  override close(path: string): void {
    // A killed executor's databases were closed as its crash left them.
    if (!this.#killed()) super.close(path);
  }

  override closeAll(): void {
    if (!this.#killed()) super.closeAll();
  }

  /** Closes one database whatever happened (a crash's close). */
  closeNow(path: string): void {
    super.close(path);
  }
}

/** A killed executor's clock: its timers never fire, its sleeps never end. */
class GatedClock implements Clock {
  constructor(readonly inner: Clock, readonly killed: () => boolean) {}
  now(): number {
    return this.inner.now();
  }
  monotonic(): number {
    return this.inner.monotonic();
  }
  setTimer(ms: number, callback: () => void): Timer {
    return this.inner.setTimer(ms, () => {
      if (!this.killed()) callback();
    });
  }
  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return new Promise((resolve, reject) => {
      this.inner.sleep(ms, signal).then(() => {
        if (!this.killed()) resolve();
      }, (error) => {
        if (!this.killed()) reject(error);
      });
    });
  }
}

/** Messages in order, for {@linkcode serveMessages}. */
class AsyncQueue<T> implements AsyncIterable<T> {
  readonly #items: T[] = [];
  #waiting: ((result: IteratorResult<T>) => void) | undefined;
  #closed = false;

  push(item: T): void {
    if (this.#closed) return;
    const waiting = this.#waiting;
    if (waiting) {
      this.#waiting = undefined;
      waiting({ value: item, done: false });
    } else {
      this.#items.push(item);
    }
  }

  /** Ends the iteration without delivering what is left (the executor was killed). */
  close(): void {
    this.#closed = true;
    this.#items.length = 0;
    // A killed executor's loop never goes on: its awaiting iteration is left pending.
    this.#waiting = undefined;
  }

  [Symbol.asyncIterator](): AsyncIterator<T> {
    return {
      next: () => {
        const item = this.#items.shift();
        if (item !== undefined) return Promise.resolve({ value: item, done: false });
        return new Promise((resolve) => this.#waiting = resolve);
      },
    };
  }
}

/** A process's bucket that a kill cuts: calls made after it never answer; closing does nothing. */
function gatedBucket(inner: Bucket, cut: () => boolean): Bucket {
  return new BucketView(inner, {
    before: (): Promise<void> | void => cut() ? new Promise<void>(() => {}) : undefined,
    // The node's own bucket: the executor's close must not end it.
    close: () => Promise.resolve(),
  });
}

const BASE_KEY = /\/wal\/[0-9a-f]{16}\/base$/;
const GENERATION = /\/wal\/[0-9a-f]{16}\//;
const FILE_KEY = /\/wal\/[0-9a-f]{16}\/[0-9a-f]{16}-([0-9a-f]{16})\.ltx$/;
/** `actors/<tenant>/<class>/<name>/`: the actor a listing is of. */
const ACTOR_OF_KEY = /^actors\/([^/]+)\/([^/]+)\/([^/]+)\//;

/**
 * `stale-generation`: uploads are not fenced by generation. Every hold writes
 * its base and files under the actor's first generation, whatever its own,
 * and without the create-only condition, so a former holder's late upload
 * lands among (or over) the current holder's files.
 */
function staleGenerations(inner: Bucket): Bucket {
  const stale = (key: string) => key.replace(GENERATION, "/wal/0000000000000001/");
  return new BucketView(inner, {
    before: (call) => {
      if (call.op === "get") return { ...call, key: stale(call.key) };
      if (call.op !== "put") return;
      const { ifNoneMatch: _, ...rest } = call.options ?? {};
      return { ...call, key: stale(call.key), options: rest };
    },
  });
}

/**
 * `trust-local`: a restore is shown no history past a cleanly closed local
 * file's TXID (no file, base or delete marker beyond it), as if it used the
 * file as it is without checking it against the bucket's chain.
 */
class HistoryUpTo extends BucketView {
  constructor(
    inner: Bucket,
    readonly dataDir: string,
    readonly peek: (key: string) => Uint8Array | undefined,
  ) {
    super(inner);
  }

  override async list(prefix: string, options?: ListOptions): Promise<ListPage> {
    const page = await super.list(prefix, options);
    const txid = this.#localTxid(prefix);
    if (txid === undefined) return page;
    return { ...page, objects: page.objects.filter((o) => this.#shown(o.key, txid)) };
  }

  /** The TXID the actor's cleanly closed local file stands at, as its `.pos` says. */
  #localTxid(prefix: string): bigint | undefined {
    const match = ACTOR_OF_KEY.exec(prefix);
    if (!match) return undefined;
    const actor = {
      tenant: decodeURIComponent(match[1]),
      class: decodeURIComponent(match[2]),
      name: decodeURIComponent(match[3]),
    };
    const pos = readIfPresent(positionPath(actorDatabasePath(this.dataDir, actor)));
    if (pos === undefined) return undefined;
    try {
      return BigInt(`0x${JSON.parse(new TextDecoder().decode(pos)).txid}`);
    } catch {
      // A .pos that cannot be read: the real restore would not trust it either.
      return undefined;
    }
  }

  #shown(key: string, txid: bigint): boolean {
    const file = FILE_KEY.exec(key);
    if (file) return BigInt(`0x${file[1]}`) <= txid;
    const body = this.peek(key);
    if (!body) return true;
    try {
      if (BASE_KEY.test(key)) return decodeBase(body, key).txid <= txid;
      if (key.endsWith("/deleted")) return decodeDeleted(body, key).txid <= txid;
    } catch {
      // Not ours to judge: shown.
    }
    return true;
  }
}
