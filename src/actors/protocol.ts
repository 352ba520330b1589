/**
 * Messages between the control plane (main thread) and an executor process.
 * Small and explicit: run this event, event done, drop this actor.
 *
 * @module
 */

import { actorFileStem, type ActorKey } from "./key.ts";

/** An HTTP request as the actor interface carries it (`types.http-request`). */
export interface ActorRequest {
  method: string;
  path: string;
  query: string;
  headers: [string, string][];
  body: Uint8Array;
}

/** An actor's HTTP answer (`types.http-response`). */
export interface ActorResponse {
  status: number;
  headers: [string, string][];
  body: Uint8Array;
}

/** How an actors.call ended: the callee's answer, or the error the caller gets. */
export type CallAnswer =
  | { ok: true; response: ActorResponse }
  | { ok: false; error: string };

/** A class as an executor needs it. */
export interface ExecutorClass {
  className: string;
  hash: string;
  glue: string;
  coreModules: Record<string, Uint8Array>;
  /**
   * The core module to instantiate with the direct bindings (abi/direct.ts),
   * or `undefined` to use jco's glue.
   */
  directModule?: string;
  config: Record<string, string>;
}

/** The first message an executor gets. */
export interface ExecutorInit {
  type: "init";
  dataDir: string;
  /** Databases the executor keeps open at once. */
  maxOpenDatabases: number;
  /** A database unused this long is closed (its actor may stay resident). */
  databaseIdleMs: number;
  /**
   * The wall-clock limit of one event; the executor applies it to events
   * that wait on the bucket (the node to the one running).
   */
  eventTimeoutMs: number;
  classes: ExecutorClass[];
  logLevel: string;
  /**
   * Whether actors' databases are replicated to the bucket (cluster mode);
   * `false` on a standalone node, whose databases are kept on the local disk
   * only (ADR 0005).
   */
  replicate: boolean;
  /** The bucket actors replicate to (the executor opens its own client when `replicate`). */
  bucketUrl: string;
  /** This node's id, written into the `base` of each hold. */
  nodeId: string;
  /** `--history-retention-secs`, in ms. */
  historyRetentionMs: number;
  /** This executor's share of the node's concurrent restore reads. */
  restoreReads: number;
  /** This executor's share of the node's restore bytes read at once. */
  restoreBytes: number;
}

/** Main thread to executor. */
export type ToExecutor =
  | ExecutorInit
  | {
    type: "event";
    seq: number;
    actor: ActorKey;
    /** The generation of the node's hold on the actor. */
    generation: number;
    /**
     * The end of the node's lease, in ms since the epoch on the machine's
     * wall clock (both processes read it); 0 for a node without one. The
     * executor runs nothing of the event past it: a node frozen with its
     * executors may resume them before it sends `discard-all`.
     */
    until: number;
    request: ActorRequest;
  }
  | { type: "drop"; actor: ActorKey; generation: number }
  | { type: "abandon"; seq: number; actor: ActorKey }
  /** Drop every actor at once, uploads not waited for (the node lease ran out). */
  | { type: "discard-all" }
  /**
   * The node's lease was renewed: valid until `until` (wall-clock ms), later
   * than the end its events carry. A `discard-all` comes first after every
   * lapse the node noticed; one it did not notice (its event loop held up)
   * ended without a fence, since the renewing write was conditioned on the
   * lease's ETag.
   */
  | { type: "lease"; until: number }
  /** The answer to a `check-hold`. */
  | { type: "hold"; id: number; ok: boolean }
  /** The answer to a `call`. */
  | { type: "call-answer"; id: number; answer: CallAnswer }
  | { type: "shutdown" };

/** Executor to main thread. */
export type FromExecutor =
  | { type: "ready" }
  | { type: "done"; seq: number; response: ActorResponse }
  | { type: "failed"; seq: number; status: number; message: string }
  | { type: "abandoned"; seq: number }
  /** The event waits on the bucket; the executor runs others meanwhile. */
  | { type: "suspended"; seq: number }
  /** The event goes on after its wait; no other event runs until it ends or waits again. */
  | { type: "resumed"; seq: number }
  /**
   * An actor's actors.call (its event is suspended meanwhile): `chain` are
   * the actors waiting on the calling event, outermost first.
   */
  | {
    type: "call";
    id: number;
    seq: number;
    caller: ActorKey;
    chain: string[];
    target: ActorKey;
    request: ActorRequest;
  }
  /** Does the node still hold the actor at this generation? (A durable write landed.) */
  | { type: "check-hold"; id: number; actor: ActorKey; generation: number }
  /** An upload failed, or an event was abandoned: the node gives the actor up. */
  | { type: "give-up"; actor: ActorKey; generation: number }
  /** A drop finished: `landed` tells whether every upload reached the bucket. */
  | { type: "dropped"; actor: ActorKey; generation: number; landed: boolean }
  /** Adds `by` to the counter `name`. */
  | { type: "count"; name: string; by: number }
  | { type: "closed" };

/**
 * Path of an actor's database under the data directory.
 *
 * @example
 * ```ts
 * import { actorDatabasePath } from "./protocol.ts";
 * actorDatabasePath("/d", { tenant: "default", class: "counter", name: "alice" });
 * // "/d/actors/default/counter/alice.db"
 * ```
 */
export function actorDatabasePath(dataDir: string, actor: ActorKey): string {
  return `${dataDir}/actors/${actor.tenant}/${actor.class}/${actorFileStem(actor.name)}.db`;
}
