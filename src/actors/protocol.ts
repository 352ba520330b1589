/**
 * Messages between the control plane (main thread) and an execution worker.
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

/** A class as a worker needs it. */
export interface WorkerClass {
  className: string;
  hash: string;
  glue: string;
  coreModules: Record<string, Uint8Array>;
  config: Record<string, string>;
}

/** The first message an execution worker gets. */
export interface ExecutorInit {
  type: "init";
  /** The storage worker's channel. */
  channel: SharedArrayBuffer;
  /**
   * Two int32 slots the worker writes and the main thread reads even while
   * the worker is stuck: the event running synchronously now (0 for none),
   * and the highest event sequence number started.
   */
  progress: SharedArrayBuffer;
  dataDir: string;
  classes: WorkerClass[];
  logLevel: string;
}

/** Main thread to worker. */
export type ToExecutor =
  | ExecutorInit
  | { type: "event"; seq: number; actor: ActorKey; request: ActorRequest }
  | { type: "drop"; actor: ActorKey }
  | { type: "abandon"; seq: number; actor: ActorKey }
  | { type: "shutdown" };

/** Worker to main thread. */
export type FromExecutor =
  | { type: "ready" }
  | { type: "done"; seq: number; response: ActorResponse }
  | { type: "failed"; seq: number; status: number; message: string }
  | { type: "abandoned"; seq: number }
  | { type: "closed" };

/** Index of the "running now" slot in `progress`. */
export const PROGRESS_RUNNING = 0;
/** Index of the "highest started" slot in `progress`. */
export const PROGRESS_STARTED = 1;

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
