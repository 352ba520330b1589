/**
 * The execution plane as the main thread sees it: a few execution workers,
 * each paired with a storage worker, actors sharded over them by key. The
 * pool enforces the wall-clock limit of events: an event past it is answered
 * 504, and a worker stuck in it is terminated and replaced without touching
 * the other workers, the main thread or any SQLite connection.
 *
 * @module
 */

import type { Clock, Timer } from "../time/clock.ts";
import type { Logger } from "../log.ts";
import { type ActorKey, actorKeyString } from "./key.ts";
import {
  type ActorRequest,
  type ActorResponse,
  type FromExecutor,
  PROGRESS_RUNNING,
  PROGRESS_STARTED,
  type ToExecutor,
  type WorkerClass,
} from "./protocol.ts";
import { createSyncChannelBuffer } from "../sqlite/sync_channel.ts";
import type { StorageWorkerInit } from "../sqlite/storage_worker.ts";

/**
 * How long a worker that is not stuck in a timed-out event gets to confirm
 * it dropped that event before it is treated as stuck and replaced.
 */
export const ABANDON_GRACE_MS = 1000;

/** How long closing waits for the workers to close their databases. */
export const CLOSE_GRACE_MS = 5000;

/** How an event ended. */
export type EventOutcome =
  | { kind: "response"; response: ActorResponse }
  | { kind: "failed"; status: number; message: string };

/** Options of {@linkcode ExecutorPool}. */
export interface ExecutorPoolOptions {
  /** Number of execution workers (one per core by default). */
  size: number;
  dataDir: string;
  classes: WorkerClass[];
  /** Databases open at once across the pool (each holds two files). */
  maxOpenDatabases: number;
  /** The wall-clock limit of one event. */
  eventTimeoutMs: number;
  logLevel: string;
  clock: Clock;
  log: Logger;
  /** Told when an executor was replaced, so the actors it held are no longer resident. */
  onExecutorReplaced?: (index: number) => void;
}

interface PendingEvent {
  seq: number;
  actor: ActorKey;
  request: ActorRequest;
  resolve: (outcome: EventOutcome) => void;
  timer: Timer;
  timedOut: boolean;
}

interface Executor {
  index: number;
  worker: Worker;
  storage: Worker;
  channel: SharedArrayBuffer;
  progress: Int32Array;
  progressBuffer: SharedArrayBuffer;
  pending: Map<number, PendingEvent>;
  closed?: () => void;
}

/** The executor index of an actor key string among `size` executors. */
export function shardOf(id: string, size: number): number {
  // FNV-1a: cheap, and stable across runs so an actor keeps its worker.
  let hash = 0x811c9dc5;
  for (let i = 0; i < id.length; i++) {
    hash ^= id.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0) % size;
}

/**
 * Runs actor events on workers.
 *
 * @example
 * ```ts ignore
 * const pool = new ExecutorPool({ size: 2, ... });
 * const outcome = await pool.run(actor, request);
 * await pool.close();
 * ```
 */
export class ExecutorPool {
  readonly #options: ExecutorPoolOptions;
  readonly #executors: Executor[] = [];
  #seq = 0;

  constructor(options: ExecutorPoolOptions) {
    this.#options = options;
    const perStorage = Math.max(1, Math.floor(options.maxOpenDatabases / options.size));
    for (let index = 0; index < options.size; index++) {
      const channel = createSyncChannelBuffer();
      const storage = new Worker(new URL("../sqlite/storage_worker.ts", import.meta.url).href, {
        type: "module",
      });
      storage.postMessage({ channel, maxOpenDatabases: perStorage } satisfies StorageWorkerInit);
      const progressBuffer = new SharedArrayBuffer(8);
      const executor: Executor = {
        index,
        storage,
        channel,
        progressBuffer,
        progress: new Int32Array(progressBuffer),
        pending: new Map(),
        worker: undefined as unknown as Worker,
      };
      this.#startWorker(executor);
      this.#executors.push(executor);
    }
  }

  /** The executor an actor runs on. */
  executorOf(actor: ActorKey): number {
    return shardOf(actorKeyString(actor), this.#executors.length);
  }

  #startWorker(executor: Executor) {
    const worker = new Worker(new URL("./executor_worker.ts", import.meta.url).href, {
      type: "module",
    });
    worker.onmessage = (event: MessageEvent<FromExecutor>) => this.#onMessage(executor, event.data);
    worker.onerror = (event) => {
      event.preventDefault();
      this.#options.log.error("execution worker failed", {
        executor: executor.index,
        error: event.message,
      });
      this.#replace(executor, undefined);
    };
    Atomics.store(executor.progress, PROGRESS_RUNNING, 0);
    Atomics.store(executor.progress, PROGRESS_STARTED, 0);
    const init: ToExecutor = {
      type: "init",
      channel: executor.channel,
      progress: executor.progressBuffer,
      dataDir: this.#options.dataDir,
      classes: this.#options.classes,
      logLevel: this.#options.logLevel,
    };
    worker.postMessage(init);
    executor.worker = worker;
  }

  #onMessage(executor: Executor, message: FromExecutor) {
    switch (message.type) {
      case "ready":
        return;
      case "closed":
        executor.closed?.();
        return;
      case "abandoned":
        executor.pending.delete(message.seq);
        return;
      case "done":
      case "failed": {
        const pending = executor.pending.get(message.seq);
        if (!pending || pending.timedOut) return;
        executor.pending.delete(message.seq);
        pending.timer.cancel();
        pending.resolve(
          message.type === "done"
            ? { kind: "response", response: message.response }
            : { kind: "failed", status: message.status, message: message.message },
        );
      }
    }
  }

  #send(executor: Executor, pending: PendingEvent) {
    pending.timer = this.#options.clock.setTimer(
      this.#options.eventTimeoutMs,
      () => this.#onTimeout(executor, pending),
    );
    executor.pending.set(pending.seq, pending);
    executor.worker.postMessage(
      {
        type: "event",
        seq: pending.seq,
        actor: pending.actor,
        request: pending.request,
      } satisfies ToExecutor,
    );
  }

  #onTimeout(executor: Executor, pending: PendingEvent) {
    pending.timedOut = true;
    const seconds = this.#options.eventTimeoutMs / 1000;
    pending.resolve({
      kind: "failed",
      status: 504,
      message: `the actor did not finish its event within ${seconds} s`,
    });
    const id = actorKeyString(pending.actor);
    if (Atomics.load(executor.progress, PROGRESS_RUNNING) === pending.seq) {
      this.#options.log.warn("event over its wall-clock limit; replacing its worker", {
        actor: id,
      });
      this.#replace(executor, pending.seq);
      return;
    }
    // Not running now: it waits on the host. Drop it, and replace the worker
    // only if the worker turns out to be stuck after all.
    executor.worker.postMessage(
      { type: "abandon", seq: pending.seq, actor: pending.actor } satisfies ToExecutor,
    );
    const worker = executor.worker;
    this.#options.clock.setTimer(ABANDON_GRACE_MS, () => {
      if (executor.worker === worker && executor.pending.has(pending.seq)) {
        this.#options.log.warn("worker did not drop a timed-out event; replacing it", {
          actor: id,
        });
        this.#replace(executor, pending.seq);
      }
    });
  }

  #replace(executor: Executor, stuckSeq: number | undefined) {
    const started = Atomics.load(executor.progress, PROGRESS_STARTED);
    executor.worker.terminate();
    const pending = [...executor.pending.values()];
    executor.pending.clear();
    this.#startWorker(executor);
    this.#options.onExecutorReplaced?.(executor.index);
    for (const event of pending) {
      if (event.timedOut || event.seq === stuckSeq) continue;
      event.timer.cancel();
      if (event.seq > started) {
        // Never started: safe to run on the new worker.
        this.#send(executor, event);
      } else {
        event.resolve({
          kind: "failed",
          status: 503,
          message: "the actor's worker was restarted while this event ran; it may have run in part",
        });
      }
    }
  }

  /** Runs one request event. The caller keeps events of one actor in order. */
  run(actor: ActorKey, request: ActorRequest): Promise<EventOutcome> {
    const executor = this.#executors[this.executorOf(actor)];
    return new Promise((resolve) => {
      const pending: PendingEvent = {
        seq: ++this.#seq,
        actor,
        request,
        resolve,
        timer: { cancel() {} },
        timedOut: false,
      };
      this.#send(executor, pending);
    });
  }

  /** Drops an idle actor's instance and closes its database. */
  drop(actor: ActorKey): void {
    this.#executors[this.executorOf(actor)].worker.postMessage(
      { type: "drop", actor } satisfies ToExecutor,
    );
  }

  /**
   * Closes every database and ends the workers. Call once no event is
   * pending; a worker still stuck after {@linkcode CLOSE_GRACE_MS} is ended
   * anyway (the process is about to exit and its files close with it).
   */
  async close(): Promise<void> {
    const closed = Promise.all(this.#executors.map((executor) =>
      new Promise<void>((resolve) => {
        executor.closed = resolve;
        executor.worker.postMessage({ type: "shutdown" } satisfies ToExecutor);
      })
    ));
    const controller = new AbortController();
    const grace = this.#options.clock.sleep(CLOSE_GRACE_MS, controller.signal).catch(() => {});
    await Promise.race([closed, grace]);
    controller.abort();
    for (const executor of this.#executors) {
      executor.worker.terminate();
      executor.storage.terminate();
    }
  }
}
