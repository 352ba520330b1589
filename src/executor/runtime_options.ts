/**
 * What an executor's runtime is made of, and what it tells whoever watches
 * it: the seams the node and the simulator give it (runtime.ts).
 *
 * @module
 */

import type { Logger } from "../log.ts";
import type { ActorKey } from "../actors/key.ts";
import type { ExecutorClass, ExecutorInit, FromExecutor } from "../actors/protocol.ts";
import type { DatabasePool } from "../sqlite/database_pool.ts";
import type { ActorDatabase } from "../sqlite/actor_database.ts";
import type { Clock, Random } from "../time/clock.ts";
import type { Bucket } from "../bucket/bucket.ts";
import type { ActorProgram } from "./program.ts";

/**
 * What happens to actors inside the runtime, for whoever watches it (the
 * simulator's invariants). Called synchronously, as it happens.
 */
export interface RuntimeObserver {
  /** An actor's wake (its store's open, with the restore) begins. */
  waking?(actor: ActorKey, generation: number): void;
  /** Its store opened: the database as the restore left it, and its TXID (replicated). */
  opened?(actor: ActorKey, generation: number, db: ActorDatabase, txid: bigint | undefined): void;
  /** Its store did not open; `timedOut` when the event's limit abandoned it. */
  openFailed?(actor: ActorKey, generation: number, error: unknown, timedOut: boolean): void;
  /** A resident actor closed (hibernation, a new generation, a stop); `landed` its uploads. */
  closed?(actor: ActorKey, path: string, landed: boolean): void;
  /**
   * An instance of the actor is made for an event, under the app's version
   * `deploySeq` (0 without an app): the events that instance runs run that
   * version's code.
   */
  ran?(actor: ActorKey, generation: number, deploySeq: number): void;
}

/** What a runtime is made of. */
export interface RuntimeOptions {
  /** The node's `init` message: settings and classes. */
  init: ExecutorInit;
  /** The programs of the classes, by class name. */
  programs: Map<string, ActorProgram>;
  /**
   * Makes the programs of a new version's classes (a `classes` message);
   * without it the runtime refuses one.
   */
  programsOf?: (classes: ExecutorClass[]) => Promise<ActorProgram[]>;
  /** Sends a message to the node. */
  post(message: FromExecutor): void;
  /** Resolves once every message posted so far left (written to the node). */
  drain(): Promise<void>;
  clock: Clock;
  /** Error ids. */
  random: Random;
  log: Logger;
  /**
   * The bucket: actors replicate to it when `init.replicate`, and their
   * alarms are listed in it (its alarm index) on every node.
   */
  bucket?: Bucket;
  /** Makes the pool of open databases; by default a {@linkcode DatabasePool}. */
  databases?: (
    init: ExecutorInit,
    beforeClose: (path: string, db: ActorDatabase) => void,
  ) => DatabasePool;
  observer?: RuntimeObserver;
  /**
   * Deliberately broken variants for the simulator (sim/variants.ts), each a
   * parameter the real code takes. Absent in `serve`.
   */
  planted?: {
    /** An actor that ran a later version than this executor's is served, not refused. */
    servesBehind?: boolean;
    /** An alarm is stored without its index entry. */
    alarmNotListed?: boolean;
  };
}
