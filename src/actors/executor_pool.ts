/**
 * The execution plane as the main thread sees it: a few executor processes
 * (src/executor/), actors sharded over them by key, each started on the
 * first event of an actor of its shard (an idle executor costs about 50 MB:
 * a node that serves one actor runs one; docs/performance.md "Idle
 * memory"). The pool enforces the
 * wall-clock limit of events: an event past it is answered 504, and an
 * executor stuck in it is killed and replaced without touching the other
 * executors or the main thread.
 *
 * @module
 */

import type { Clock, Timer } from "../time/clock.ts";
import type { Logger } from "../log.ts";
import { type ActorKey, actorKeyString } from "./key.ts";
import type {
  ActorRequest,
  CallAnswer,
  EventOutcome,
  ExecutorClass,
  FromExecutor,
  SpecialEvent,
  ToExecutor,
} from "./protocol.ts";
import { PendingEvents } from "./pending_events.ts";
import {
  type ExecutorChannel,
  type ExecutorCommand,
  type ExecutorExit,
  type ExecutorLauncher,
  ProcessLauncher,
} from "./executor_launcher.ts";
import { RESTORE_MAX_READ_BYTES, RESTORE_MAX_READS } from "../replication/read_limiter.ts";
import { assert } from "../assert.ts";
import { MAX_SOCKET_MESSAGE_BYTES } from "../limits.ts";

/**
 * How long an executor gets to confirm it dropped a timed-out event before
 * it is treated as stuck and killed. A stuck executor cannot answer at all;
 * one whose event awaits the host answers at once.
 */
export const ABANDON_GRACE_MS = 500;

/**
 * How long past its wall-clock limit the node waits for an executor to end
 * an event that waits on the bucket, which the executor does itself.
 */
export const SUSPENDED_GRACE_MS = 2000;

/**
 * How often the oldest event of each executor is checked against the
 * wall-clock limit: an event past it gets its 504 within this much.
 */
export const TIMEOUT_SWEEP_MS = 100;

/**
 * How long an executor's start (its process, its modules, its classes
 * compiled) may take before the wall-clock limit of its first event counts:
 * the limit counts from its `ready`, or from this much after the event was
 * sent to it, whichever comes first. An executor starts on its shard's first
 * event, on a machine that may be busy.
 */
export const EXECUTOR_START_MS = 10_000;

/**
 * An executor that exits by itself sooner than this after it started counts
 * as a crash at start: the next one starts after a back-off.
 */
export const STABLE_AFTER_MS = 5000;

/** The first back-off after a crash at start; it doubles with each one in a row. */
export const RESPAWN_BACKOFF_MS = 250;

/** The longest back-off between executor starts. */
export const RESPAWN_BACKOFF_MAX_MS = 30_000;

/**
 * How long closing waits for the executors to close their actors, whose
 * last uploads land first: about the bound of an upload (20 s), which with
 * the 10 s a stop gives events makes the spec's clean stop of about 29 s. An
 * executor still running an event then is not waited for.
 */
export const CLOSE_GRACE_MS = 19_000;

/** Options of {@linkcode ExecutorPool}. */
export interface ExecutorPoolOptions {
  /**
   * Number of executor processes (one per core by default), each started on
   * first use unless `startAll`.
   */
  size: number;
  /**
   * Every executor started with the pool, not on first use: a cluster node's,
   * whose events carry a lease end and whose takeovers should not also wait
   * for a process to start. A standalone node starts them on first use, so an
   * idle one runs only those its actors need.
   */
  startAll?: boolean;
  dataDir: string;
  classes: ExecutorClass[];
  /** The seq of the app's version `classes` are; 0 (the default) without an app. */
  deploySeq?: number;
  /** The line `deploySeq` counts in; "" without one. */
  deployLine?: string;
  /** Databases open at once across the pool (each holds two files). */
  maxOpenDatabases: number;
  /** A database unused this long is closed. */
  databaseIdleMs: number;
  /** The wall-clock limit of one event. */
  eventTimeoutMs: number;
  logLevel: string;
  clock: Clock;
  log: Logger;
  /**
   * The program and arguments that start an executor process on
   * `socketPath`; by default this binary (`__executor`) or `deno run` on
   * src/executor/main.ts.
   */
  command?: ExecutorCommand;
  /** Starts the executors; by default as processes (`command`). */
  launcher?: ExecutorLauncher;
  /**
   * Whether actors' databases are replicated to the bucket: in cluster mode;
   * a standalone node keeps them on its local disk only (ADR 0005).
   */
  replicate: boolean;
  /** The bucket executors replicate to (when `replicate`). */
  bucketUrl: string;
  /** This node's id. */
  nodeId: string;
  /** `--history-retention-secs`, in ms. */
  historyRetentionMs: number;
  /** `--max-socket-message-bytes`; default `MAX_SOCKET_MESSAGE_BYTES`. */
  maxSocketMessageBytes?: number;
}

/**
 * What the pool asks of, and tells, the rest of the node about its
 * executors' events; given to {@linkcode ExecutorPool.start}, once the parts
 * it calls exist.
 */
export interface ExecutorPoolEvents {
  /**
   * Told when an executor was replaced, so the actors it held are no longer
   * resident, with the events it had not started: the caller runs them
   * again (at a new hold) or answers them. Without it they are answered 503.
   */
  onExecutorReplaced?: (index: number, unstarted: UnstartedEvent[]) => void;
  /** Whether the node still holds `actor` at `generation` (after a durable write landed). */
  checkHold?: (actor: ActorKey, generation: number) => Promise<boolean>;
  /**
   * An actor's actors.call: resolves with the callee's answer or the
   * caller's error (never rejects). Calls fail without it.
   */
  onCall?: (call: ActorCall) => Promise<CallAnswer>;
  /** An executor gave an actor up (an upload failed, or an event was abandoned). */
  onGiveUp?: (actor: ActorKey, generation: number) => void;
  /** An executor counted a metric. */
  onCount?: (name: string, by: number) => void;
  /** An executor's bucket requests, by `op area` (bucket/counted.ts). */
  onBucketRequests?: (counts: Record<string, number>) => void;
  /** The open WebSockets of `actor` now, listed in each of its events. */
  socketsOf?: (actor: ActorKey) => number[];
  /**
   * An event of `actor` ended with its alarm at `due` (null: none), as the
   * executor read it from the actor's database or committed it.
   */
  onAlarmSeen?: (actor: ActorKey, due: number | null) => void;
  /** An actor ran the app's version `seq`, later than the executors have: check for it now. */
  onBehind?: (seq: number) => void;
  /** An actor's `websockets.send` or `websockets.close`. */
  onSocketOutput?: (
    message: Extract<FromExecutor, { type: "ws-send" } | { type: "ws-close" }>,
  ) => void;
}

/** An actors.call an actor made, as the node routes it. */
export interface ActorCall {
  caller: ActorKey;
  /** The actors waiting on the caller, outermost first (`actorRef`s of call_chain.ts). */
  chain: string[];
  target: ActorKey;
  request: ActorRequest;
}

/** An event an executor never started, handed back when it was replaced. */
export interface UnstartedEvent {
  actor: ActorKey;
  request: ActorRequest;
  socket?: SpecialEvent;
  resolve: (outcome: EventOutcome) => void;
}

interface PendingEvent {
  seq: number;
  actor: ActorKey;
  generation: number;
  /** The end of the node's lease (wall-clock ms), or 0; see the `event` message. */
  until: number;
  request: ActorRequest;
  /** Set for a WebSocket event or an alarm's. */
  socket?: SpecialEvent;
  resolve: (outcome: EventOutcome) => void;
  /** When the event started running, as far as the node can tell (see #arm). */
  startedAt: number | undefined;
  /** It waits on the bucket; the executor runs other actors' events meanwhile. */
  suspended: boolean;
  timedOut: boolean;
}

interface Executor {
  index: number;
  /** Unset while a back-off after crashes delays its start. */
  channel?: ExecutorChannel;
  /** When it was started, on the clock's monotonic time. */
  startedAt: number;
  /**
   * Messages posted before it was ready, in order: its init goes out when it
   * is launched, the others once it is ready (so that a lease renewed while
   * it started reaches it before the events sent under that lease).
   */
  early: ToExecutor[];
  /** Set when the pool killed the process on purpose. */
  killed: boolean;
  /** Set once it told it is ready: its classes are compiled. */
  ready: boolean;
  pending: PendingEvents<PendingEvent>;
  /** Pending events that said they wait on the bucket. */
  suspended: number;
  /** Drops sent and not answered, by actor key string. */
  drops: Map<string, (landed: boolean) => void>;
  closed?: () => void;
}

/** The executor index of an actor key string among `size` executors. */
export function shardOf(id: string, size: number): number {
  // FNV-1a: cheap, and stable across runs so an actor keeps its executor.
  let hash = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) {
    hash ^= id.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0) % size;
}

/**
 * Runs actor events on executor processes.
 *
 * @example
 * ```ts
 * import { ExecutorPool, type ExecutorPoolOptions } from "./executor_pool.ts";
 * import type { ActorRequest } from "./protocol.ts";
 * declare const options: ExecutorPoolOptions; // size, dataDir, classes, clock, log, ...
 * declare const request: ActorRequest;
 * const actor = { tenant: "default", class: "counter", name: "alice" };
 * const pool = new ExecutorPool(options);
 * pool.start({ checkHold: () => Promise.resolve(true) });
 * const outcome = await pool.run(pool.executorOf(actor), actor, 1, request); // at generation 1
 * await pool.close();
 * ```
 */
export class ExecutorPool {
  readonly #options: ExecutorPoolOptions;
  #events: ExecutorPoolEvents = {};
  /** By index; unset until an actor of its shard has its first event. */
  readonly #executors: (Executor | undefined)[] = [];
  #started = false;
  readonly #launcher: ExecutorLauncher;
  /** Crashes at start in a row, per executor index. */
  readonly #crashStreak: number[] = [];
  #seq = 0;
  #closing = false;
  #sweep: Timer | undefined;
  /** The classes executors run, and the seq of their version: a respawned executor starts with them. */
  #classes: ExecutorClass[];
  #deploySeq: number;
  #deployLine: string;

  /** A pool of `options.size` executors, none started before its first event. */
  constructor(options: ExecutorPoolOptions) {
    this.#options = options;
    this.#classes = options.classes;
    this.#deploySeq = options.deploySeq ?? 0;
    this.#deployLine = options.deployLine ?? "";
    this.#launcher = options.launcher ?? new ProcessLauncher(options.log, options.command);
  }

  /**
   * Opens the pool: from now on an executor is started on the first event
   * of its shard, and tells `events` what it needs and does.
   */
  start(events: ExecutorPoolEvents = {}): void {
    assert(!this.#started, "an executor pool starts once");
    this.#started = true;
    this.#events = events;
    if (this.#options.startAll) {
      for (let index = 0; index < this.#options.size; index++) this.#executorAt(index);
    }
  }

  /**
   * Starts the executor `actor` runs on, if it is not started yet, ahead of
   * an event known to come (an alarm armed), so that event does not wait for
   * a process to start.
   *
   * @example
   * ```ts
   * import type { ExecutorPool } from "./executor_pool.ts";
   * declare const pool: ExecutorPool;
   * pool.warm({ tenant: "default", class: "counter", name: "alice" });
   * ```
   */
  warm(actor: ActorKey): void {
    if (this.#started) this.#executorAt(this.executorOf(actor));
  }

  /** The executors started so far. */
  #running(): Executor[] {
    return this.#executors.filter((executor) => executor !== undefined);
  }

  /** Executor `index`, started now if it was not yet. */
  #executorAt(index: number): Executor {
    assert(this.#started, "an executor pool runs events once started");
    return this.#executors[index] ??= this.#spawn(index);
  }

  /**
   * A new version's classes (seq `seq`): every executor runs them from its
   * next event on, each actor switching at its own; one started later
   * starts with them.
   */
  setClasses(seq: number, line: string, classes: ExecutorClass[]): void {
    assert(
      seq >= this.#deploySeq || line !== this.#deployLine,
      `a version's seq goes back within its line: ${this.#deploySeq} to ${seq}`,
    );
    this.#classes = classes;
    this.#deploySeq = seq;
    this.#deployLine = line;
    for (const executor of this.#running()) {
      this.#write(executor, { type: "classes", seq, line, classes });
    }
  }

  /** The seq of the version the executors run (0 without an app). */
  get deploySeq(): number {
    return this.#deploySeq;
  }

  /** The executor an actor runs on. */
  executorOf(actor: ActorKey): number {
    return shardOf(actorKeyString(actor), this.#options.size);
  }

  #spawn(index: number, delayMs = 0): Executor {
    const executor: Executor = {
      index,
      startedAt: this.#options.clock.monotonic() + delayMs,
      early: [],
      killed: false,
      ready: false,
      pending: new PendingEvents(),
      suspended: 0,
      drops: new Map(),
    };
    this.#write(executor, {
      type: "init",
      dataDir: this.#options.dataDir,
      maxOpenDatabases: Math.max(
        1,
        Math.floor(this.#options.maxOpenDatabases / this.#options.size),
      ),
      databaseIdleMs: this.#options.databaseIdleMs,
      eventTimeoutMs: this.#options.eventTimeoutMs,
      classes: this.#classes,
      deploySeq: this.#deploySeq,
      deployLine: this.#deployLine,
      logLevel: this.#options.logLevel,
      replicate: this.#options.replicate,
      bucketUrl: this.#options.bucketUrl,
      nodeId: this.#options.nodeId,
      historyRetentionMs: this.#options.historyRetentionMs,
      restoreReads: Math.max(1, Math.floor(RESTORE_MAX_READS / this.#options.size)),
      restoreBytes: Math.floor(RESTORE_MAX_READ_BYTES / this.#options.size),
      maxSocketMessageBytes: this.#options.maxSocketMessageBytes ?? MAX_SOCKET_MESSAGE_BYTES,
    });
    const start = () => {
      if (this.#closing || this.#executors[index] !== executor) return;
      let channel: ExecutorChannel;
      try {
        channel = this.#launcher.launch(index, {
          onMessage: (message) => this.#onMessage(executor, message),
          onExit: (exit) => this.#onExit(executor, exit),
        });
      } catch (error) {
        // No socket or no process (out of files, of memory, no program):
        // a crash at start, so the next try waits out the back-off.
        this.#options.log.error("executor could not be started", {
          executor: index,
          error: String(error),
        });
        this.#replace(executor, "crashed");
        return;
      }
      executor.channel = channel;
      channel.send(executor.early.shift()!);
    };
    if (delayMs > 0) this.#options.clock.setTimer(delayMs, start);
    else queueMicrotask(start);
    return executor;
  }

  #onExit(executor: Executor, exit: ExecutorExit) {
    executor.closed?.();
    if (executor.killed || this.#closing) return;
    // It died by itself (a crash, or killed from outside): nothing tells
    // which of its events had started, so none is run again.
    this.#options.log.error("executor exited", {
      executor: executor.index,
      code: exit.code ?? undefined,
      signal: exit.signal,
    });
    this.#replace(executor, "crashed");
  }

  #write(executor: Executor, message: ToExecutor) {
    if (executor.channel && executor.ready) executor.channel.send(message);
    else executor.early.push(message);
  }

  #onMessage(executor: Executor, message: FromExecutor) {
    switch (message.type) {
      case "ready": {
        // No event can have started before the executor was ready: its
        // start-up (a process, the classes compiled) is not the event's time.
        executor.ready = true;
        for (const early of executor.early.splice(0)) executor.channel!.send(early);
        const now = this.#options.clock.monotonic();
        for (const event of executor.pending.values()) {
          if (event.startedAt !== undefined && !event.timedOut) event.startedAt = now;
        }
        return;
      }
      case "closed":
        return;
      case "abandoned":
        this.#settle(executor, message.seq);
        return;
      case "suspended": {
        const pending = executor.pending.get(message.seq);
        if (!pending || pending.suspended) return;
        pending.suspended = true;
        executor.suspended++;
        this.#arm(executor);
        return;
      }
      case "resumed": {
        const pending = executor.pending.get(message.seq);
        if (!pending || !pending.suspended) return;
        pending.suspended = false;
        executor.suspended--;
        // It holds the executor again: every other event that is not
        // waiting on the bucket waits for it, so none of them has started.
        for (const event of executor.pending.values()) {
          if (event !== pending && !event.suspended && !event.timedOut) event.startedAt = undefined;
        }
        this.#arm(executor);
        return;
      }
      case "check-hold": {
        const check = this.#events.checkHold ?? (() => Promise.resolve(false));
        check(message.actor, message.generation).catch(() => false).then((ok) => {
          if (this.#executors[executor.index] === executor) {
            this.#write(executor, { type: "hold", id: message.id, ok });
          }
        });
        return;
      }
      case "call": {
        const { id, caller, chain, target, request } = message;
        const onCall = this.#events.onCall ??
          (() => Promise.resolve<CallAnswer>({ ok: false, error: "actors.call is not available" }));
        onCall({ caller, chain, target, request }).catch((error): CallAnswer => ({
          ok: false,
          error: `the call failed: ${(error as Error)?.message ?? error}`,
        })).then((answer) => {
          // A replaced executor's calls died with it.
          if (this.#executors[executor.index] !== executor) return;
          try {
            this.#write(executor, { type: "call-answer", id, answer });
          } catch (error) {
            // Only a message over the frame limit throws: the callee's
            // answer (which fitted its own frame) and the call's own fields.
            this.#write(executor, {
              type: "call-answer",
              id,
              answer: {
                ok: false,
                error: `the answer does not fit a message to the caller: ${
                  (error as Error).message
                }`,
              },
            });
          }
        });
        return;
      }
      case "give-up":
        this.#events.onGiveUp?.(message.actor, message.generation);
        return;
      case "dropped": {
        const id = actorKeyString(message.actor);
        executor.drops.get(id)?.(message.landed);
        executor.drops.delete(id);
        // Its next event, if any, can start now.
        this.#arm(executor);
        return;
      }
      case "count":
        this.#events.onCount?.(message.name, message.by);
        return;
      case "behind":
        this.#events.onBehind?.(message.seq);
        return;
      case "bucket-requests":
        this.#events.onBucketRequests?.(message.counts);
        return;
      case "ws-send":
      case "ws-close":
        this.#events.onSocketOutput?.(message);
        return;
      case "done":
      case "failed": {
        const pending = this.#settle(executor, message.seq);
        if (!pending) return;
        if (message.alarm !== undefined) this.#events.onAlarmSeen?.(pending.actor, message.alarm);
        if (pending.timedOut) return;
        pending.resolve(
          message.type === "done"
            ? { kind: "response", response: message.response }
            : { kind: "failed", status: message.status, message: message.message },
        );
      }
    }
  }

  #settle(executor: Executor, seq: number): PendingEvent | undefined {
    const pending = executor.pending.delete(seq);
    if (!pending) return undefined;
    if (pending.suspended) executor.suspended--;
    this.#arm(executor);
    return pending;
  }

  /**
   * An executor starts events in the order it got them, one at a time, and
   * the next only when the one running ends or says it waits on the bucket;
   * an actor's events wait for that actor's earlier ones. So the one running
   * is the oldest pending event that is not waiting and whose actor has no
   * earlier pending event: the wall-clock limit counts from when it became
   * that, not from when it was queued behind others.
   */
  #arm(executor: Executor) {
    let running: PendingEvent | undefined;
    if (executor.suspended === 0 && executor.drops.size === 0) {
      running = executor.pending.first();
    } else {
      // Actors with an earlier event pending, by key string. An actor being
      // dropped had none (only an idle one is), and its events wait in the
      // executor behind the drop, which waits for its uploads without
      // holding the executor: they have not started.
      const waiting = new Set<string>();
      for (const event of executor.pending.values()) {
        const id = actorKeyString(event.actor);
        if (!event.suspended && !waiting.has(id) && !executor.drops.has(id)) {
          running = event;
          break;
        }
        waiting.add(id);
      }
    }
    if (!running || running.startedAt !== undefined) return;
    running.startedAt = this.#options.clock.monotonic() +
      (executor.ready ? 0 : EXECUTOR_START_MS);
    // One sweep for every executor instead of a timer per event: a timer
    // set and cancelled per event cost 8 µs of the main thread's 100.
    this.#sweep ??= this.#options.clock.setTimer(TIMEOUT_SWEEP_MS, () => this.#sweepTimeouts());
  }

  #sweepTimeouts() {
    this.#sweep = undefined;
    const now = this.#options.clock.monotonic();
    let pending = false;
    for (const executor of this.#running()) {
      for (const event of executor.pending.values()) {
        pending = true;
        if (event.startedAt === undefined || event.timedOut) continue;
        // The executor ends a waiting event at its limit itself; the node
        // steps in only if it did not (an executor that stopped answering).
        const limit = this.#options.eventTimeoutMs + (event.suspended ? SUSPENDED_GRACE_MS : 0);
        if (now - event.startedAt >= limit) {
          this.#onTimeout(executor.index, event);
        }
        // Only the running and the waiting events have started.
        if (executor.suspended === 0) break;
      }
    }
    if (pending && !this.#closing) {
      this.#sweep = this.#options.clock.setTimer(TIMEOUT_SWEEP_MS, () => this.#sweepTimeouts());
    }
  }

  #send(executor: Executor, pending: PendingEvent) {
    const connections = this.#events.socketsOf?.(pending.actor) ?? [];
    try {
      this.#write(executor, {
        type: "event",
        seq: pending.seq,
        actor: pending.actor,
        generation: pending.generation,
        until: pending.until,
        request: pending.request,
        ...(pending.socket?.kind === "alarm"
          ? { alarm: pending.socket.due }
          : pending.socket
          ? { socket: pending.socket }
          : {}),
        ...(connections.length > 0 ? { connections } : {}),
      });
    } catch (error) {
      // Only a message over the frame limit throws; it never reached the
      // executor, so nothing is pending.
      pending.resolve({
        kind: "failed",
        status: 413,
        message: `the request does not fit a message to the actor: ${(error as Error).message}`,
      });
      return;
    }
    executor.pending.add(pending);
    this.#arm(executor);
  }

  #onTimeout(index: number, pending: PendingEvent) {
    const executor = this.#executors[index]!;
    pending.timedOut = true;
    const seconds = this.#options.eventTimeoutMs / 1000;
    // An executor that never got ready ran nothing of the event: its start
    // took the allowance, a retry may find it (or its replacement) ready.
    pending.resolve(
      executor.ready
        ? {
          kind: "failed",
          status: 504,
          message: `the actor did not finish its event within ${seconds} s`,
        }
        : {
          kind: "failed",
          status: 503,
          message: `the actor's executor did not start within ${
            (EXECUTOR_START_MS + this.#options.eventTimeoutMs) / 1000
          } s; retry`,
        },
    );
    // An executor that still reads its messages drops the event at once;
    // one stuck in the event cannot, and is killed.
    this.#write(executor, { type: "abandon", seq: pending.seq, actor: pending.actor });
    this.#options.clock.setTimer(ABANDON_GRACE_MS, () => {
      if (this.#executors[index] === executor && executor.pending.has(pending.seq)) {
        const what = executor.ready
          ? "event over its wall-clock limit; replacing its executor"
          : "executor did not start within its allowance; replacing it";
        this.#options.log.warn(what, { actor: actorKeyString(pending.actor) });
        this.#replace(executor, "stuck");
      }
    });
  }

  #replace(executor: Executor, why: "stuck" | "crashed") {
    if (this.#executors[executor.index] !== executor || this.#closing) return;
    executor.killed = true;
    executor.channel?.kill();
    // A crash soon after the start is likely to happen again (a broken
    // install, no memory): the next start waits, longer each time in a row.
    const lifetime = this.#options.clock.monotonic() - executor.startedAt;
    const streak = why === "crashed" && lifetime < STABLE_AFTER_MS
      ? (this.#crashStreak[executor.index] ?? 0) + 1
      : 0;
    this.#crashStreak[executor.index] = streak;
    const delayMs = streak <= 1
      ? 0
      : Math.min(RESPAWN_BACKOFF_MS * 2 ** (streak - 2), RESPAWN_BACKOFF_MAX_MS);
    if (delayMs > 0) {
      this.#options.log.warn("executor keeps crashing at start; waiting before the next", {
        executor: executor.index,
        crashes: streak,
        wait_ms: delayMs,
      });
    }
    const unstarted: UnstartedEvent[] = [];
    for (const event of executor.pending.values()) {
      if (event.timedOut) continue;
      // The stuck event has timed out; the events that never started were
      // still waiting in the executor's input and are safe to run again
      // (at a new hold: the caller takes the actor again). Started ones,
      // or any after a crash, may have run.
      if (why === "stuck" && event.startedAt === undefined) {
        unstarted.push({
          actor: event.actor,
          request: event.request,
          socket: event.socket,
          resolve: event.resolve,
        });
      } else {
        event.resolve({
          kind: "failed",
          status: 503,
          message: "the actor's executor stopped while this event was under way; retry",
        });
      }
    }
    executor.pending.clear();
    executor.suspended = 0;
    for (const resolve of executor.drops.values()) resolve(false);
    executor.drops.clear();
    this.#executors[executor.index] = this.#spawn(executor.index, delayMs);
    if (this.#events.onExecutorReplaced) {
      this.#events.onExecutorReplaced(executor.index, unstarted);
    } else {
      for (const event of unstarted) {
        event.resolve({
          kind: "failed",
          status: 503,
          message: "the actor's executor was replaced before this event started; retry",
        });
      }
    }
  }

  /**
   * Runs one request event on executor `index` (the actor's, from
   * {@linkcode executorOf}, which the caller keeps). Events of one actor run
   * in the order they are given.
   */
  run(
    index: number,
    actor: ActorKey,
    generation: number,
    request: ActorRequest,
    until = 0,
    socket?: SpecialEvent,
  ): Promise<EventOutcome> {
    if (this.#closing && !this.#executors[index]) {
      return Promise.resolve({
        kind: "failed",
        status: 503,
        message: "the node stopped before this event ended; retry",
      });
    }
    const executor = this.#executorAt(index);
    if (!executor.channel && executor.startedAt > this.#options.clock.monotonic()) {
      return Promise.resolve({
        kind: "failed",
        status: 503,
        message: "the actor's executor is restarting after repeated crashes; retry",
      });
    }
    return new Promise((resolve) => {
      const pending: PendingEvent = {
        seq: ++this.#seq,
        actor,
        generation,
        until,
        request,
        socket,
        resolve,
        startedAt: undefined,
        suspended: false,
        timedOut: false,
      };
      this.#send(executor, pending);
    });
  }

  /**
   * Drops an idle actor's instance after its events, once its uploads
   * landed, and closes its database. Resolves whether every upload landed
   * (false too when its executor was replaced meanwhile).
   */
  drop(actor: ActorKey, generation: number): Promise<boolean> {
    const executor = this.#executors[this.executorOf(actor)];
    // An executor never started holds no actor: nothing to upload.
    if (!executor) return Promise.resolve(true);
    const id = actorKeyString(actor);
    return new Promise((resolve) => {
      const earlier = executor.drops.get(id);
      executor.drops.set(id, (landed) => {
        earlier?.(landed);
        resolve(landed);
      });
      this.#write(executor, { type: "drop", actor, generation });
    });
  }

  /**
   * Has every executor discard its actors at once (instances, databases,
   * replicas), without waiting for their uploads: their local files are not
   * vouched for, so each is restored at its next wake.
   */
  discardAll(): void {
    for (const executor of this.#running()) this.#write(executor, { type: "discard-all" });
  }

  /**
   * Tells the executors the node's lease, still valid, now ends at `until`
   * (wall-clock ms): an event sent under it may run until then, not only
   * until the end it was sent with. An executor not ready yet is told before
   * the events it has not been sent: right after the last `discard-all` it
   * has not been sent, so that the renewal counts only for the events sent
   * under this lease.
   */
  extendLease(until: number): void {
    for (const executor of this.#running()) {
      if (executor.channel && executor.ready) {
        this.#write(executor, { type: "lease", until });
        continue;
      }
      const discard = executor.early.findLastIndex((message) => message.type === "discard-all");
      // Not before the init of an executor not launched yet.
      const at = Math.max(discard + 1, executor.early[0]?.type === "init" ? 1 : 0);
      // One renewal waits at most: a later one replaces it.
      if (executor.early[at]?.type === "lease") executor.early[at] = { type: "lease", until };
      else executor.early.splice(at, 0, { type: "lease", until });
    }
  }

  /** Whether the executor runs an event now (one waiting on the bucket does not hold it). */
  #runningEvent(executor: Executor): boolean {
    for (const event of executor.pending.values()) {
      if (!event.suspended && event.startedAt !== undefined && !event.timedOut) return true;
    }
    return false;
  }

  /**
   * Closes every database and ends the executors. Call once no event is
   * pending; an executor still busy after {@linkcode CLOSE_GRACE_MS} is
   * killed, and one still running an event at once (it would close its
   * actors only after it, and its events had their time).
   */
  async close(): Promise<void> {
    this.#closing = true;
    this.#sweep?.cancel();
    const executors = this.#running();
    const closed = Promise.all(executors.map((executor) =>
      new Promise<void>((resolve) => {
        // One that never connected has not had its init: no database to close.
        if (!executor.channel?.connected || this.#runningEvent(executor)) return resolve();
        executor.closed = resolve;
        this.#write(executor, { type: "shutdown" });
      })
    ));
    const controller = new AbortController();
    const grace = this.#options.clock.sleep(CLOSE_GRACE_MS, controller.signal).catch(() => {});
    await Promise.race([closed, grace]);
    controller.abort();
    for (const executor of executors) {
      executor.killed = true;
      for (const event of executor.pending.values()) {
        if (event.timedOut) continue;
        event.resolve({
          kind: "failed",
          status: 503,
          message: "the node stopped before this event ended; retry",
        });
      }
      executor.pending.clear();
      if (!executor.channel) continue;
      // Exited already, as it should have, unless its grace ran out.
      executor.channel.kill();
      await executor.channel.exited;
    }
    await this.#launcher.close();
  }
}
