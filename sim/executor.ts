/**
 * A simulated executor: what `src/actors/executor_main.ts` does with an
 * actor's database in cluster mode, run in the simulator's process on its
 * clock and its bucket. For each event the node sends, it opens the actor's
 * replica at the hold's generation (`ActorReplica.open`: the restore unless
 * the local file is current, the same calls as executor_main), runs the
 * event's statement on a real SQLite database (`ActorDatabase` through a
 * `DatabasePool`), captures and uploads what it committed
 * (`ReplicatedStore`), waits for a durable write's upload and the node's
 * hold check, and gives the actor up when an upload fails.
 *
 * The actor itself is a fixed program instead of a Wasm component: each event
 * is a read (`SELECT`), a plain write (`exec`), a durable write
 * (`exec-durable`) or a delete (`delete-self`) of its one table. What it does
 * is reported to an {@linkcode ExecutorObserver} as it happens, for the
 * invariants.
 *
 * What the simulator found executor_main doing before b0ea67d, and what it
 * does since (the variant `executor-as-is` keeps the old behaviour, and is
 * caught): it ran events on a node whose lease was not valid. Its
 * `discard-all` (the lease ran out) discarded the resident actors only, so an
 * actor whose wake (restore) was under way, and the events queued behind it,
 * woke at the dropped generation and ran once a restore landed; and it ran
 * every event the node sent, however late, also once the lease had run out
 * (after a freeze, before the node's lease timer sent `discard-all`). Here
 * `discardAll` also gives up every actor with events under way, an event
 * checks once its wake returns that its actor was not given up meanwhile, and
 * a statement runs only while the node's lease is valid (`canRun`; the real
 * executor gets the lease's end with each event).
 *
 * Not simulated: the run token (events of different actors interleave only at
 * bucket waits here too, and take no virtual time), instances and on-init,
 * timeouts of events that do not wait on the bucket (none here), executor
 * crashes of their own.
 *
 * @module
 */

import type { ActorKey } from "../src/actors/key.ts";
import { actorKeyString } from "../src/actors/key.ts";
import { actorDatabasePath, type ActorRequest } from "../src/actors/protocol.ts";
import type { EventOutcome } from "../src/actors/protocol.ts";
import { ReplicatedStore } from "../src/actors/actor_store.ts";
import type {
  Bucket,
  CallOptions,
  DeleteOptions,
  ListOptions,
  ListPage,
  ObjectInfo,
  PutOptions,
  StoredObject,
} from "../src/bucket/bucket.ts";
import { DatabasePool } from "../src/sqlite/database_pool.ts";
import type { ActorDatabase } from "../src/sqlite/actor_database.ts";
import { ActorReplica, positionPath } from "../src/replication/replica.ts";
import { ReadLimiter } from "../src/replication/read_limiter.ts";
import { ReplicationFailed, type SnapshotSchedule } from "../src/replication/uploader.ts";
import { decodeBase, decodeDeleted, HistoryError } from "../src/replication/history.ts";
import { RestoreUnavailable } from "../src/replication/restore.ts";
import type { Clock } from "../src/time/clock.ts";
import type { Logger } from "../src/log.ts";
import { crashClose, keepClosedCopy, readIfPresent } from "./disk.ts";

/** An event's wall-clock limit (`--event-timeout-secs`' default): a wait past it answers 504. */
export const EVENT_TIMEOUT_MS = 30_000;

/** How long a clean stop waits for the executor to close its actors before it is killed. */
export const CLOSE_GRACE_MS = 5_000;

/** Databases one simulated executor keeps open (far more than a run's actors). */
const MAX_OPEN_DATABASES = 64;

/** Actors given up whose queued events get a 503, remembered (as executor_main). */
const REMEMBERED_GIVE_UPS = 10_000;

/** The actor's table: one row per write, its id unique in the run. */
const CREATE_TABLE =
  "CREATE TABLE IF NOT EXISTS w (id INTEGER PRIMARY KEY, gen INTEGER, node TEXT)";

/** What an event does. */
export type OpKind = "read" | "write" | "durable" | "delete";

/** One event of the simulated actor: its kind, and the id a write inserts. */
export interface Op {
  kind: OpKind;
  id: number;
}

/**
 * How a client sends `op`: its method, and the path after the actor's with
 * the query (`opOf` reads it back from the event's request).
 *
 * @example
 * ```ts
 * import { opTarget } from "./executor.ts";
 * opTarget({ kind: "durable", id: 7 }); // { method: "POST", path: "/durable?id=7" }
 * ```
 */
export function opTarget(op: Op): { method: "GET" | "POST"; path: string } {
  return { method: op.kind === "read" ? "GET" : "POST", path: `/${op.kind}?id=${op.id}` };
}

/** The op a request carries. */
export function opOf(request: ActorRequest): Op {
  const kind = request.path.slice(1) as OpKind;
  if (!["read", "write", "durable", "delete"].includes(kind)) {
    throw new Error(`not a simulated op: ${request.path}`);
  }
  return { kind, id: Number(request.query.slice("id=".length)) };
}

/** What the executor tells the simulator, as it happens (synchronously). */
export interface ExecutorObserver {
  /** A wake (the replica's open, with its restore) begins; returns a mark for `restored`. */
  waking(actor: ActorKey, generation: number): number;
  /**
   * The replica opened at `generation`: the ids its database holds, and its
   * TXID; `mark` is what `waking` returned.
   */
  restored(actor: ActorKey, generation: number, ids: Set<number>, txid: bigint, mark: number): void;
  /** A read ran: the ids it saw, and the TXID the database stood at. */
  read(actor: ActorKey, generation: number, ids: Set<number>, txid: bigint): void;
  /** A write committed locally; a durable one with the TXID it took. */
  committed(actor: ActorKey, generation: number, op: Op, txid: bigint | undefined): void;
  /** The actor deleted itself. */
  deleted(actor: ActorKey, generation: number): void;
  /** An event's statement is about to run, at `generation`. */
  runs(actor: ActorKey, generation: number): void;
  /**
   * Opening the replica failed (the event answers 500 or 503); `timedOut`
   * when the event's limit passed first and abandoned the restore.
   */
  openFailed(actor: ActorKey, generation: number, error: unknown, timedOut: boolean): void;
}

/** How a deliberately broken variant changes replication (sim/variants.ts). */
export type ReplicationBreak = "stale-generation" | "trust-local" | "executor-as-is";

/** What a {@linkcode SimExecutor} needs. */
export interface SimExecutorOptions {
  dataDir: string;
  nodeId: string;
  bucket: Bucket;
  clock: Clock;
  log: Logger;
  historyRetentionMs: number;
  /** As src/node.ts: the lease valid, and the record unchanged since the take. */
  checkHold: (actor: ActorKey, generation: number) => Promise<boolean>;
  /** As src/node.ts: `ActorHost.gaveUp`. */
  gaveUp: (actor: ActorKey, generation: number) => void;
  /** Whether the node's lease is valid now (a statement runs only then). */
  canRun: () => boolean;
  observer: ExecutorObserver;
  /** Reads what the store holds at `key` without a call (for `trust-local`). */
  peek: (key: string) => Uint8Array | undefined;
  broken?: ReplicationBreak;
}

/** A quiescent resident actor: every commit landed, no event under way. */
export interface SettledActor {
  generation: number;
  txid: bigint;
  checksum: bigint;
  /** The ids in its database. */
  ids: Set<number>;
}

interface Resident {
  key: ActorKey;
  id: string;
  path: string;
  generation: number;
  store: ReplicatedStore;
  dead: boolean;
}

/** Raised when an event must fail with a status the actor did not choose (a 504 past its limit). */
export class EventFailure extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

/**
 * One process's executor, in the shape `ActorHost` expects of an
 * `ExecutorPool` (one executor, index 0).
 *
 * @example
 * ```ts ignore
 * const executor = new SimExecutor({ dataDir, nodeId: "a", bucket, clock, log, ... });
 * const outcome = await executor.run(0, actor, 3, {
 *   method: "GET",
 *   path: "/read",
 *   query: "id=0",
 *   headers: [],
 *   body: new Uint8Array(),
 * });
 * ```
 */
export class SimExecutor {
  readonly #o: SimExecutorOptions;
  readonly #pool: DatabasePool;
  readonly #bucket: GatedBucket;
  readonly #limiter = new ReadLimiter();
  readonly #resident = new Map<string, Resident>();
  readonly #chains = new Map<string, Promise<unknown>>();
  readonly #schedules = new Map<string, SnapshotSchedule>();
  readonly #givenUp = new Map<string, number>();
  /** The generation of each actor's last event received, while it has events under way. */
  readonly #underWay = new Map<string, number>();
  /** Every database path opened, for a crash's close. */
  readonly #opened = new Set<string>();
  #killed = false;

  /** Whether the executor was killed (its process crashed, or a stop's grace ran out). */
  get killed(): boolean {
    return this.#killed;
  }

  constructor(options: SimExecutorOptions) {
    this.#o = options;
    this.#pool = new DatabasePool(MAX_OPEN_DATABASES, () => options.clock.monotonic());
    this.#bucket = new GatedBucket(options.bucket);
  }

  /** One executor: every actor's. */
  executorOf(_actor: ActorKey): number {
    return 0;
  }

  /** Runs one event after the actor's earlier ones. */
  run(
    _executor: number,
    key: ActorKey,
    generation: number,
    request: ActorRequest,
  ): Promise<EventOutcome> {
    const id = actorKeyString(key);
    const op = opOf(request);
    this.#underWay.set(id, generation);
    return this.#chain(id, () => this.#runEvent(key, id, generation, op));
  }

  /** Hibernation: the actor closes once its uploads landed; resolves whether they did. */
  drop(key: ActorKey, _generation: number): Promise<boolean> {
    const id = actorKeyString(key);
    return this.#chain(id, async () => {
      const actor = this.#resident.get(id);
      return actor ? await this.#close(actor) : true;
    });
  }

  /** The lease ran out: every actor discarded at once, its queued events answered 503. */
  discardAll(): void {
    for (const actor of [...this.#resident.values()]) {
      this.#discard(actor);
      this.#rememberGiveUp(actor.id, actor.generation);
    }
    if (this.#o.broken === "executor-as-is") return;
    // Actors still waking, and events queued behind them, are of the dropped hold too.
    for (const id of this.#chains.keys()) {
      const generation = this.#underWay.get(id);
      if (generation !== undefined && (this.#givenUp.get(id) ?? 0) < generation) {
        this.#rememberGiveUp(id, generation);
      }
    }
  }

  /**
   * A clean stop: every actor closes once its uploads landed, within
   * {@linkcode CLOSE_GRACE_MS}; past it the executor is killed.
   */
  async close(): Promise<void> {
    const done = (async () => {
      await Promise.all([...this.#chains.values()].map((c) => c.catch(() => {})));
      await Promise.all([...this.#resident.values()].map((actor) => this.#close(actor)));
    })();
    let timer: { cancel(): void } | undefined;
    const grace = new Promise<"grace">((resolve) => {
      timer = this.#o.clock.setTimer(CLOSE_GRACE_MS, () => resolve("grace"));
    });
    const first = await Promise.race([done, grace]);
    timer?.cancel();
    if (first === "grace") {
      this.#o.log.warn("executor still closing its actors after the grace period: killed");
      this.kill();
      return;
    }
    this.#pool.closeAll();
  }

  /**
   * The executor's process ends at once (a crash, or a kill): its databases
   * keep what they had on disk, nothing more reaches the bucket, and nothing
   * of it runs again.
   */
  kill(): void {
    if (this.#killed) return;
    this.#killed = true;
    this.#bucket.cut();
    for (const actor of this.#resident.values()) actor.dead = true;
    this.#resident.clear();
    for (const path of this.#opened) {
      const db = this.#pool.peek(path);
      if (db) crashClose(path, () => this.#pool.close(path));
    }
  }

  /** The actor if it is resident and quiescent: every commit landed, nothing under way. */
  settled(id: string): SettledActor | undefined {
    const actor = this.#resident.get(id);
    if (!actor || actor.dead || this.#chains.has(id) || this.#killed) return undefined;
    const replica = actor.store.replica;
    if (replica.uploader.failed || replica.uploader.landedTxid !== replica.position.txid) {
      return undefined;
    }
    const db = this.#pool.peek(actor.path);
    return {
      generation: actor.generation,
      txid: replica.position.txid,
      checksum: replica.position.checksum,
      ids: db ? idsIn(db) : new Set(),
    };
  }

  // ------------------------------------------------------------- events

  #chain<T>(id: string, task: () => Promise<T>): Promise<T> {
    const previous = this.#chains.get(id);
    const next = previous ? previous.then(task, task) : task();
    this.#chains.set(id, next);
    next.finally(() => {
      if (this.#chains.get(id) !== next) return;
      this.#chains.delete(id);
      this.#underWay.delete(id);
    }).catch(() => {});
    return next;
  }

  async #runEvent(key: ActorKey, id: string, generation: number, op: Op): Promise<EventOutcome> {
    const startedAt = this.#o.clock.monotonic();
    let actor = this.#resident.get(id);
    try {
      if (this.#killed) throw new EventFailure(503, "the executor is gone");
      if (this.#isGivenUp(id, generation)) {
        throw new EventFailure(503, "the actor's replication to the bucket failed; retry");
      }
      if (actor && actor.generation !== generation) {
        await this.#suspend(startedAt, this.#close(actor));
        actor = undefined;
      }
      if (!actor) {
        actor = await this.#wake(startedAt, key, id, generation);
        if (this.#o.broken !== "executor-as-is" && this.#isGivenUp(id, generation)) {
          // The node dropped the hold while the actor woke.
          this.#discard(actor);
          throw new EventFailure(503, "the node gave the actor up while it woke; retry");
        }
      }
      const path = actor.path;
      const before = actor.store.beforeEvent(() => this.#db(path));
      if (before) await this.#suspend(startedAt, before);
      this.#alive(actor);
      const txid = await this.#apply(actor, op, startedAt);
      const open = this.#pool.peek(path);
      if (open && !actor.dead) actor.store.committed(open);
      if (actor.dead) return failed(503, "the actor was given up; retry");
      return {
        kind: "response",
        response: {
          status: 200,
          headers: txid === undefined ? [] : [["x-sim-txid", String(txid)]],
          body: new Uint8Array(),
        },
      };
    } catch (error) {
      actor ??= this.#resident.get(id);
      if (actor && !actor.dead && !this.#killed) this.#dropInstance(actor);
      if (error instanceof EventFailure) return failed(error.status, error.message);
      this.#o.log.error("actor failed", { actor: id, error: describe(error) });
      return failed(500, `the actor failed: ${describe(error)}`);
    }
  }

  #isGivenUp(id: string, generation: number): boolean {
    return (this.#givenUp.get(id) ?? 0) >= generation;
  }

  /** Runs the event's statement; returns the TXID a durable write took. */
  async #apply(actor: Resident, op: Op, startedAt: number): Promise<bigint | undefined> {
    const { key, generation, path } = actor;
    if (this.#o.broken !== "executor-as-is" && !this.#o.canRun()) {
      throw new EventFailure(503, "this node's lease is not valid; retry");
    }
    this.#o.observer.runs(key, generation);
    const db = this.#db(path);
    db.exec(CREATE_TABLE, []);
    const row = () =>
      db.exec("INSERT INTO w (id, gen, node) VALUES (?, ?, ?)", [
        { tag: "integer", val: BigInt(op.id) },
        { tag: "integer", val: BigInt(generation) },
        { tag: "text", val: this.#o.nodeId },
      ]);
    switch (op.kind) {
      case "read":
        this.#o.observer.read(key, generation, idsIn(db), actor.store.replica.position.txid);
        return undefined;
      case "write":
        row();
        this.#o.observer.committed(key, generation, op, undefined);
        return undefined;
      case "durable": {
        const { durable } = actor.store.execDurable(db, row);
        const txid = actor.store.replica.position.txid;
        this.#o.observer.committed(key, generation, op, txid);
        if (durable) {
          try {
            await this.#suspend(startedAt, durable);
          } catch (error) {
            if (error instanceof EventFailure) throw error;
            // The actor would get the host's error; this one answers with it.
            throw new EventFailure(503, `not durable: ${describe(error)}`);
          }
          this.#alive(actor);
        }
        return txid;
      }
      case "delete":
        // As executor_main's deleteSelf: what committed first takes its own TXID.
        actor.store.committed(db);
        this.#pool.wipe(path);
        actor.store.deleted();
        this.#o.observer.deleted(key, generation);
        return undefined;
    }
  }

  /**
   * Waits for bucket work within the event's wall-clock limit; past it the
   * event answers 504 (`onTimeout` may stop the work first).
   */
  async #suspend<T>(
    startedAt: number,
    work: Promise<T>,
    onTimeout?: () => Promise<void>,
  ): Promise<T> {
    const remaining = startedAt + EVENT_TIMEOUT_MS - this.#o.clock.monotonic();
    let timer: { cancel(): void } | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = this.#o.clock.setTimer(Math.max(0, remaining), async () => {
        await onTimeout?.();
        reject(
          new EventFailure(504, `the actor did not finish its event within ${EVENT_TIMEOUT_MS} ms`),
        );
      });
    });
    try {
      return await Promise.race([work, timedOut]);
    } finally {
      timer?.cancel();
    }
  }

  #alive(actor: Resident): void {
    if (actor.dead) throw new EventFailure(503, "the actor was discarded while its event waited");
  }

  #db(path: string): ActorDatabase {
    if (this.#killed) throw new Error("the executor is gone");
    this.#opened.add(path);
    return this.#pool.get(path);
  }

  async #wake(
    startedAt: number,
    key: ActorKey,
    id: string,
    generation: number,
  ): Promise<Resident> {
    const path = actorDatabasePath(this.#o.dataDir, key);
    Deno.mkdirSync(path.slice(0, path.lastIndexOf("/")), { recursive: true });
    const actor = { key, id, path, generation, dead: false } as Resident;
    const mark = this.#o.observer.waking(key, generation);
    actor.store = await this.#openStore(startedAt, actor);
    this.#schedules.delete(id);
    this.#resident.set(id, actor);
    const db = this.#db(path);
    this.#o.observer.restored(
      key,
      generation,
      idsIn(db),
      actor.store.replica.position.txid,
      mark,
    );
    return actor;
  }

  /** As executor_main's #openStore. */
  async #openStore(startedAt: number, actor: Resident): Promise<ReplicatedStore> {
    const { key, id, path, generation } = actor;
    const abort = new AbortController();
    const opening = ActorReplica.open({
      bucket: this.#broken(path),
      clock: this.#o.clock,
      log: this.#o.log,
      nodeId: this.#o.nodeId,
      limiter: this.#limiter,
      historyRetentionMs: this.#o.historyRetentionMs,
      count: () => {},
    }, {
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
      replica = await this.#suspend(startedAt, opening, async () => {
        abort.abort(new Error("the event's wall-clock limit passed"));
        const late = await opening.catch(() => undefined);
        late?.abandon();
      });
    } catch (error) {
      if (!this.#killed) this.#pool.close(path);
      this.#o.observer.openFailed(key, generation, error, abort.signal.aborted);
      if (error instanceof HistoryError) {
        throw new EventFailure(
          500,
          `the actor's history in the bucket cannot be restored without losing data: ${error.message}`,
        );
      }
      if (error instanceof ReplicationFailed) {
        throw new EventFailure(503, "the bucket did not take the actor's first snapshot; retry");
      }
      if (error instanceof RestoreUnavailable) {
        throw new EventFailure(503, "the bucket did not answer the actor's restore; retry");
      }
      throw error;
    }
    return new ReplicatedStore(replica, {
      checkHold: () => this.#o.checkHold(key, generation),
      onClosed: (schedule) => {
        if (schedule.failures > 0) this.#schedules.set(id, schedule);
      },
    });
  }

  /** The bucket a replica is given: the process's, or a deliberately broken view of it. */
  #broken(path: string): Bucket {
    if (this.#o.broken === "stale-generation") return new StaleGenerationBucket(this.#bucket);
    if (this.#o.broken === "trust-local") {
      const pos = readIfPresent(positionPath(path));
      if (pos !== undefined) {
        try {
          const txid = BigInt(`0x${JSON.parse(new TextDecoder().decode(pos)).txid}`);
          return new HistoryUpTo(this.#bucket, txid, this.#o.peek);
        } catch {
          // A .pos that cannot be read: the real restore would not trust it either.
        }
      }
    }
    return this.#bucket;
  }

  /** After a failed event: its open transaction goes, what it committed stays and is captured. */
  #dropInstance(actor: Resident): void {
    const db = this.#pool.peek(actor.path);
    if (!db) return;
    db.rollback();
    try {
      actor.store?.committed(db);
    } catch (error) {
      this.#o.log.error("capture after a failed event failed", {
        actor: actor.id,
        error: describe(error),
      });
      this.#discard(actor);
    }
  }

  #discard(actor: Resident): void {
    actor.dead = true;
    if (this.#resident.get(actor.id) === actor) this.#resident.delete(actor.id);
    if (this.#killed) return;
    this.#pool.peek(actor.path)?.rollback();
    this.#pool.close(actor.path);
    // Unset while its replica opens (a failed adoption gives it up from there).
    actor.store?.abandon();
  }

  #giveUp(actor: Resident, error: unknown): void {
    if (actor.dead || this.#killed) return;
    this.#o.log.warn("upload failed; giving the actor up", {
      actor: actor.id,
      error: describe(error),
    });
    this.#discard(actor);
    this.#rememberGiveUp(actor.id, actor.generation);
    this.#o.gaveUp(actor.key, actor.generation);
  }

  #rememberGiveUp(id: string, generation: number): void {
    this.#givenUp.delete(id);
    this.#givenUp.set(id, generation);
    if (this.#givenUp.size > REMEMBERED_GIVE_UPS) {
      this.#givenUp.delete(this.#givenUp.keys().next().value!);
    }
  }

  async #close(actor: Resident): Promise<boolean> {
    if (this.#resident.get(actor.id) === actor) this.#resident.delete(actor.id);
    if (actor.dead) return false;
    const landed = await actor.store.close(() => this.#pool.close(actor.path));
    actor.dead = true;
    if (landed && !this.#killed) keepClosedCopy(actor.path);
    return landed;
  }
}

function failed(status: number, message: string): EventOutcome {
  return { kind: "failed", status, message };
}

/** The ids in the actor's table (none before it exists). */
export function idsIn(db: ActorDatabase): Set<number> {
  const exists = db.exec("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'w'", []);
  if (exists.rows.length === 0) return new Set();
  const { rows } = db.exec("SELECT id FROM w ORDER BY id", []);
  return new Set(rows.map(([v]) => Number((v as { val: bigint }).val)));
}

function describe(error: unknown): string {
  if (error instanceof Error) return `${error.name}: ${error.message}`;
  const payload = (error as { payload?: unknown })?.payload;
  return payload !== undefined ? JSON.stringify(payload) : String(error);
}

/** A process's bucket that a kill cuts: calls made after it never answer. */
class GatedBucket implements Bucket {
  #cut = false;
  constructor(readonly inner: Bucket) {}

  /** Nothing more reaches the bucket. */
  cut(): void {
    this.#cut = true;
  }

  #gate<T>(call: () => Promise<T>): Promise<T> {
    return this.#cut ? new Promise<T>(() => {}) : call();
  }

  get(key: string, options?: CallOptions): Promise<StoredObject | null> {
    return this.#gate(() => this.inner.get(key, options));
  }
  head(key: string, options?: CallOptions): Promise<ObjectInfo | null> {
    return this.#gate(() => this.inner.head(key, options));
  }
  put(key: string, body: Uint8Array, options?: PutOptions): Promise<{ etag: string }> {
    return this.#gate(() => this.inner.put(key, body, options));
  }
  delete(key: string, options?: DeleteOptions): Promise<void> {
    return this.#gate(() => this.inner.delete(key, options));
  }
  list(prefix: string, options?: ListOptions): Promise<ListPage> {
    return this.#gate(() => this.inner.list(prefix, options));
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

/** Passes every call through except those `filter` answers itself. */
abstract class BucketView implements Bucket {
  constructor(readonly inner: Bucket) {}
  get(key: string, options?: CallOptions): Promise<StoredObject | null> {
    return this.inner.get(key, options);
  }
  head(key: string, options?: CallOptions): Promise<ObjectInfo | null> {
    return this.inner.head(key, options);
  }
  put(key: string, body: Uint8Array, options?: PutOptions): Promise<{ etag: string }> {
    return this.inner.put(key, body, options);
  }
  delete(key: string, options?: DeleteOptions): Promise<void> {
    return this.inner.delete(key, options);
  }
  list(prefix: string, options?: ListOptions): Promise<ListPage> {
    return this.inner.list(prefix, options);
  }
  close(): Promise<void> {
    return Promise.resolve();
  }
}

const BASE_KEY = /\/wal\/[0-9a-f]{16}\/base$/;
const GENERATION = /\/wal\/[0-9a-f]{16}\//;
const FILE_KEY = /\/wal\/[0-9a-f]{16}\/[0-9a-f]{16}-([0-9a-f]{16})\.ltx$/;

/**
 * `stale-generation`: uploads are not fenced by generation. Every hold writes
 * its base and files under the actor's first generation, whatever its own,
 * and without the create-only condition, so a former holder's late upload
 * lands among (or over) the current holder's files.
 */
class StaleGenerationBucket extends BucketView {
  #stale(key: string): string {
    return key.replace(GENERATION, "/wal/0000000000000001/");
  }
  override get(key: string, options?: CallOptions): Promise<StoredObject | null> {
    return super.get(this.#stale(key), options);
  }
  override put(key: string, body: Uint8Array, options?: PutOptions): Promise<{ etag: string }> {
    const { ifNoneMatch: _, ...rest } = options ?? {};
    return super.put(this.#stale(key), body, rest);
  }
}

/**
 * `trust-local`: the restore is shown no history past a cleanly closed local
 * file's TXID (no file, base or delete marker beyond it), as if it used the
 * file as it is without checking it against the bucket's chain.
 */
class HistoryUpTo extends BucketView {
  constructor(
    inner: Bucket,
    readonly txid: bigint,
    readonly peek: (key: string) => Uint8Array | undefined,
  ) {
    super(inner);
  }

  override async list(prefix: string, options?: ListOptions): Promise<ListPage> {
    const page = await super.list(prefix, options);
    return { ...page, objects: page.objects.filter((o) => this.#shown(o.key)) };
  }

  #shown(key: string): boolean {
    const file = FILE_KEY.exec(key);
    if (file) return BigInt(`0x${file[1]}`) <= this.txid;
    const body = this.peek(key);
    if (!body) return true;
    try {
      if (BASE_KEY.test(key)) return decodeBase(body, key).txid <= this.txid;
      if (key.endsWith("/deleted")) return decodeDeleted(body, key).txid <= this.txid;
    } catch {
      // Not ours to judge: shown.
    }
    return true;
  }
}
