/**
 * The execution plane as the main thread sees it: a few executor processes
 * (executor_main.ts), actors sharded over them by key. The pool enforces the
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
  ActorResponse,
  ExecutorClass,
  FromExecutor,
  ToExecutor,
} from "./protocol.ts";
import { FrameSender, readFrames } from "./frames.ts";
import type { Plain } from "./codec.ts";

/**
 * How long an executor gets to confirm it dropped a timed-out event before
 * it is treated as stuck and killed. A stuck executor cannot answer at all;
 * one whose event awaits the host answers at once.
 */
export const ABANDON_GRACE_MS = 500;

/**
 * How often the oldest event of each executor is checked against the
 * wall-clock limit: an event past it gets its 504 within this much.
 */
export const TIMEOUT_SWEEP_MS = 100;

/**
 * An executor that exits by itself sooner than this after it started counts
 * as a crash at start: the next one starts after a back-off.
 */
export const STABLE_AFTER_MS = 5000;

/** The first back-off after a crash at start; it doubles with each one in a row. */
export const RESPAWN_BACKOFF_MS = 250;

/** The longest back-off between executor starts. */
export const RESPAWN_BACKOFF_MAX_MS = 30_000;

/** How long closing waits for the executors to close their databases. */
export const CLOSE_GRACE_MS = 5000;

/** How an event ended. */
export type EventOutcome =
  | { kind: "response"; response: ActorResponse }
  | { kind: "failed"; status: number; message: string };

/** Options of {@linkcode ExecutorPool}. */
export interface ExecutorPoolOptions {
  /** Number of executor processes (one per core by default). */
  size: number;
  dataDir: string;
  classes: ExecutorClass[];
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
   * The program and arguments that start an executor on `socketPath`; by
   * default this binary (`__executor`) or `deno run` on executor_main.ts.
   */
  command?: (socketPath: string) => { program: string; args: string[] };
  /** Told when an executor was replaced, so the actors it held are no longer resident. */
  onExecutorReplaced?: (index: number) => void;
}

interface PendingEvent {
  seq: number;
  actor: ActorKey;
  request: ActorRequest;
  resolve: (outcome: EventOutcome) => void;
  /** When the event became the oldest of its executor: when it started running. */
  startedAt: number | undefined;
  timedOut: boolean;
}

interface Executor {
  index: number;
  /** Unset while a back-off after crashes delays its start. */
  process?: Deno.ChildProcess;
  /** When it was started, on the clock's monotonic time. */
  startedAt: number;
  /** Set once the executor connected. */
  sender?: FrameSender;
  conn?: Deno.Conn;
  /** Messages posted before it connected. */
  early: ToExecutor[];
  /** Set when the pool killed the process on purpose. */
  killed: boolean;
  pending: Map<number, PendingEvent>;
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
 * ```ts ignore
 * const pool = new ExecutorPool({ size: 2, ... });
 * const outcome = await pool.run(pool.executorOf(actor), actor, request);
 * await pool.close();
 * ```
 */
export class ExecutorPool {
  readonly #options: ExecutorPoolOptions;
  readonly #executors: Executor[] = [];
  /** Where the executors' sockets are; removed by close(). */
  readonly #socketDir: string;
  #spawned = 0;
  /** Crashes at start in a row, per executor index. */
  readonly #crashStreak: number[] = [];
  #seq = 0;
  #closing = false;
  #sweep: Timer | undefined;

  constructor(options: ExecutorPoolOptions) {
    this.#options = options;
    this.#socketDir = Deno.makeTempDirSync({ prefix: "wasmkeep-" });
    for (let index = 0; index < options.size; index++) {
      this.#executors.push(this.#spawn(index, []));
    }
  }

  /** The executor an actor runs on. */
  executorOf(actor: ActorKey): number {
    return shardOf(actorKeyString(actor), this.#executors.length);
  }

  #spawn(index: number, replay: PendingEvent[], delayMs = 0): Executor {
    const executor: Executor = {
      index,
      startedAt: this.#options.clock.monotonic() + delayMs,
      early: [],
      killed: false,
      pending: new Map(),
    };
    this.#write(executor, {
      type: "init",
      dataDir: this.#options.dataDir,
      maxOpenDatabases: Math.max(
        1,
        Math.floor(this.#options.maxOpenDatabases / this.#options.size),
      ),
      databaseIdleMs: this.#options.databaseIdleMs,
      classes: this.#options.classes,
      logLevel: this.#options.logLevel,
    });
    for (const event of replay) this.#send(executor, event);
    const start = () => {
      if (this.#closing || this.#executors[index] !== executor) return;
      const socketPath = `${this.#socketDir}/e${index}-${++this.#spawned}.sock`;
      const listener = Deno.listen({ transport: "unix", path: socketPath });
      const { program, args } = (this.#options.command ?? defaultCommand)(socketPath);
      executor.process = new Deno.Command(program, {
        args,
        stdin: "null",
        stdout: "inherit",
        stderr: "inherit",
      }).spawn();
      this.#connect(executor, listener, socketPath);
    };
    if (delayMs > 0) this.#options.clock.setTimer(delayMs, start);
    else queueMicrotask(start);
    return executor;
  }

  async #connect(executor: Executor, listener: Deno.Listener, socketPath: string) {
    // The process may die before it connects: then accept() would wait
    // forever, so its exit closes the listener.
    executor.process!.status.then(() => listener.close()).catch(() => {});
    try {
      const conn = await listener.accept() as Deno.Conn;
      executor.conn = conn;
      executor.sender = new FrameSender(conn);
      for (const message of executor.early.splice(0)) {
        executor.sender.send(message as unknown as Plain);
      }
      for await (const message of readFrames(conn)) {
        this.#onMessage(executor, message as unknown as FromExecutor);
      }
    } catch (error) {
      if (!executor.killed && !(error instanceof Deno.errors.BadResource)) {
        this.#options.log.error("executor connection failed", {
          executor: executor.index,
          error: String(error),
        });
      }
    } finally {
      try {
        listener.close();
      } catch {
        // Closed when the process exited.
      }
      await Deno.remove(socketPath).catch(() => {});
    }
    try {
      executor.conn?.close();
    } catch {
      // Closed already.
    }
    const status = await executor.process!.status;
    executor.closed?.();
    if (executor.killed || this.#closing) return;
    // It died by itself (a crash, or killed from outside): nothing tells
    // which of its events had started, so none is run again.
    this.#options.log.error("executor exited", {
      executor: executor.index,
      code: status.code,
      signal: status.signal ?? undefined,
    });
    this.#replace(executor, "crashed");
  }

  #write(executor: Executor, message: ToExecutor) {
    if (executor.sender) executor.sender.send(message as unknown as Plain);
    else executor.early.push(message);
  }

  #onMessage(executor: Executor, message: FromExecutor) {
    switch (message.type) {
      case "ready":
      case "closed":
        return;
      case "abandoned":
        executor.pending.delete(message.seq);
        this.#armHead(executor);
        return;
      case "done":
      case "failed": {
        const pending = executor.pending.get(message.seq);
        if (!pending) return;
        executor.pending.delete(message.seq);
        this.#armHead(executor);
        if (pending.timedOut) return;
        pending.resolve(
          message.type === "done"
            ? { kind: "response", response: message.response }
            : { kind: "failed", status: message.status, message: message.message },
        );
      }
    }
  }

  /**
   * An executor runs its events in the order it got them, so the oldest
   * pending one is the one running: the wall-clock limit counts from when an
   * event becomes the oldest, not from when it was queued behind others.
   */
  #armHead(executor: Executor) {
    const head = executor.pending.values().next().value;
    if (!head || head.startedAt !== undefined) return;
    head.startedAt = this.#options.clock.monotonic();
    // One sweep for every executor instead of a timer per event: a timer
    // set and cancelled per event cost 8 µs of the main thread's 100.
    this.#sweep ??= this.#options.clock.setTimer(TIMEOUT_SWEEP_MS, () => this.#sweepTimeouts());
  }

  #sweepTimeouts() {
    this.#sweep = undefined;
    const now = this.#options.clock.monotonic();
    let pending = false;
    for (const executor of this.#executors) {
      const head = executor.pending.values().next().value;
      if (!head) continue;
      pending = true;
      if (!head.timedOut && now - head.startedAt! >= this.#options.eventTimeoutMs) {
        this.#onTimeout(executor.index, head);
      }
    }
    if (pending && !this.#closing) {
      this.#sweep = this.#options.clock.setTimer(TIMEOUT_SWEEP_MS, () => this.#sweepTimeouts());
    }
  }

  #send(executor: Executor, pending: PendingEvent) {
    try {
      this.#write(executor, {
        type: "event",
        seq: pending.seq,
        actor: pending.actor,
        request: pending.request,
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
    pending.startedAt = undefined;
    executor.pending.set(pending.seq, pending);
    this.#armHead(executor);
  }

  #onTimeout(index: number, pending: PendingEvent) {
    const executor = this.#executors[index];
    pending.timedOut = true;
    const seconds = this.#options.eventTimeoutMs / 1000;
    pending.resolve({
      kind: "failed",
      status: 504,
      message: `the actor did not finish its event within ${seconds} s`,
    });
    // An executor that still reads its messages drops the event at once;
    // one stuck in the event cannot, and is killed.
    this.#write(executor, { type: "abandon", seq: pending.seq, actor: pending.actor });
    this.#options.clock.setTimer(ABANDON_GRACE_MS, () => {
      if (this.#executors[index] === executor && executor.pending.has(pending.seq)) {
        this.#options.log.warn("event over its wall-clock limit; replacing its executor", {
          actor: actorKeyString(pending.actor),
        });
        this.#replace(executor, "stuck");
      }
    });
  }

  #replace(executor: Executor, why: "stuck" | "crashed") {
    if (this.#executors[executor.index] !== executor || this.#closing) return;
    executor.killed = true;
    try {
      executor.process?.kill("SIGKILL");
    } catch {
      // Already exited.
    }
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
    const replay: PendingEvent[] = [];
    for (const event of executor.pending.values()) {
      if (event.timedOut) continue;
      // An executor runs one event at a time to its end, and the stuck one
      // has timed out: the others were still waiting in its input, never
      // started, and are safe to run on the new one (issue 4 adds events
      // that wait on the host; those will be failed here instead).
      if (why === "stuck") {
        replay.push(event);
      } else {
        event.resolve({
          kind: "failed",
          status: 503,
          message: "the actor's executor stopped while this event was under way; retry",
        });
      }
    }
    executor.pending.clear();
    this.#executors[executor.index] = this.#spawn(executor.index, replay, delayMs);
    this.#options.onExecutorReplaced?.(executor.index);
  }

  /**
   * Runs one request event on executor `index` (the actor's, from
   * {@linkcode executorOf}, which the caller keeps). Events of one actor run
   * in the order they are given.
   */
  run(index: number, actor: ActorKey, request: ActorRequest): Promise<EventOutcome> {
    const executor = this.#executors[index];
    if (!executor.process && executor.startedAt > this.#options.clock.monotonic()) {
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
        request,
        resolve,
        startedAt: undefined,
        timedOut: false,
      };
      this.#send(executor, pending);
    });
  }

  /** Drops an idle actor's instance and closes its database. */
  drop(actor: ActorKey): void {
    this.#write(this.#executors[this.executorOf(actor)], { type: "drop", actor });
  }

  /**
   * Closes every database and ends the executors. Call once no event is
   * pending; an executor still busy after {@linkcode CLOSE_GRACE_MS} is
   * killed.
   */
  async close(): Promise<void> {
    this.#closing = true;
    this.#sweep?.cancel();
    const closed = Promise.all(this.#executors.map((executor) =>
      new Promise<void>((resolve) => {
        // One that never connected has not had its init: no database to close.
        if (!executor.sender) return resolve();
        executor.closed = resolve;
        this.#write(executor, { type: "shutdown" });
      })
    ));
    const controller = new AbortController();
    const grace = this.#options.clock.sleep(CLOSE_GRACE_MS, controller.signal).catch(() => {});
    await Promise.race([closed, grace]);
    controller.abort();
    for (const executor of this.#executors) {
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
      if (!executor.process) continue;
      try {
        executor.process.kill("SIGKILL");
      } catch {
        // Exited already, as it should have.
      }
      await executor.process.status;
    }
    await Deno.remove(this.#socketDir, { recursive: true }).catch(() => {});
  }
}

/**
 * How to start an executor: the compiled binary runs itself with a hidden
 * command; `deno run` runs the executor module by its URL (a file, or JSR).
 */
function defaultCommand(socketPath: string): { program: string; args: string[] } {
  const program = Deno.execPath();
  const binary = program.split(/[\\/]/).pop()!;
  if (!/^deno(\.exe)?$/.test(binary)) return { program, args: ["__executor", socketPath] };
  const module = new URL("./executor_main.ts", import.meta.url).href;
  return { program, args: ["run", "-A", "--no-prompt", module, socketPath] };
}
