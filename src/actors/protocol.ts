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
  classes: ExecutorClass[];
  logLevel: string;
}

/** Main thread to executor. */
export type ToExecutor =
  | ExecutorInit
  | { type: "event"; seq: number; actor: ActorKey; request: ActorRequest }
  | { type: "drop"; actor: ActorKey }
  | { type: "abandon"; seq: number; actor: ActorKey }
  | { type: "shutdown" };

/** Executor to main thread. */
export type FromExecutor =
  | { type: "ready" }
  | { type: "done"; seq: number; response: ActorResponse }
  | { type: "failed"; seq: number; status: number; message: string }
  | { type: "abandoned"; seq: number }
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
