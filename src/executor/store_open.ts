/**
 * Opening a woken actor's store (ADR 0005): on a replicated node, the
 * restore from the bucket unless the local file is current, the event
 * waiting meanwhile; on a standalone node, the local file as it is. A
 * restore that cannot go on becomes the event's failure with a status
 * that says whether to retry.
 *
 * @module
 */

import type { ActorKey } from "../actors/key.ts";
import type { ActorDatabase } from "../sqlite/actor_database.ts";
import { type ActorStore, LocalStore, ReplicatedStore } from "../actors/actor_store.ts";
import { ActorReplica, type ReplicaContext } from "../replication/replica.ts";
import { ReplicationFailed, type SnapshotSchedule } from "../replication/uploader.ts";
import { HistoryError } from "../replication/history.ts";
import { RestoreUnavailable } from "../replication/restore.ts";
import { EventFailure } from "../actors/event_failure.ts";

/** What {@linkcode openActorStore} needs of the runtime. */
export interface StoreOpenOptions {
  /** Unset on a standalone node. */
  replication: ReplicaContext | undefined;
  actor: ActorKey;
  path: string;
  generation: number;
  /** Its failed periodic snapshots, remembered while it slept. */
  schedule: SnapshotSchedule | undefined;
  /** Waits within the event's limit, other events running meanwhile. */
  suspend<T>(work: Promise<T>, onTimeout: () => Promise<void>): Promise<T>;
  openDatabase(): ActorDatabase;
  closeDatabase(): void;
  /** An upload failed: the actor is given up. */
  onFailure(error: unknown): void;
  /** Asks the node whether it still holds the actor. */
  checkHold(): Promise<boolean>;
  /** The store closed; its snapshot schedule is to be remembered. */
  onClosed(schedule: SnapshotSchedule): void;
  count(name: string): void;
  /** The open failed; `timedOut` when the event's limit abandoned it. */
  openFailed?(error: unknown, timedOut: boolean): void;
}

/**
 * The actor's store at its generation.
 *
 * @example
 * ```ts
 * import { openActorStore, type StoreOpenOptions } from "./store_open.ts";
 * declare const options: StoreOpenOptions;
 * const store = await openActorStore(options); // replication, actor, path, generation, …
 * ```
 */
export async function openActorStore(o: StoreOpenOptions): Promise<ActorStore> {
  if (!o.replication) return new LocalStore();
  const abort = new AbortController();
  const opening = ActorReplica.open(o.replication, {
    actor: o.actor,
    path: o.path,
    generation: BigInt(o.generation),
    schedule: o.schedule,
    onFailure: o.onFailure,
    openDatabase: o.openDatabase,
    signal: abort.signal,
  });
  let replica;
  try {
    replica = await o.suspend(opening, async () => {
      // The actor's next event must not start a restore beside this one.
      abort.abort(new Error("the event's wall-clock limit passed"));
      const late = await opening.catch(() => undefined);
      late?.abandon();
    });
  } catch (error) {
    o.closeDatabase();
    o.openFailed?.(error, abort.signal.aborted);
    if (error instanceof HistoryError) {
      o.count("wasmkeep_restore_failures_total");
      throw new EventFailure(
        500,
        `the actor's history in the bucket cannot be restored without losing data: ${error.message}`,
      );
    }
    if (error instanceof ReplicationFailed) {
      throw new EventFailure(503, `the bucket did not take the actor's first snapshot; retry`);
    }
    if (error instanceof RestoreUnavailable) {
      o.count("wasmkeep_restore_failures_total");
      throw new EventFailure(503, `the bucket did not answer the actor's restore; retry`);
    }
    throw error;
  }
  return new ReplicatedStore(replica, { checkHold: o.checkHold, onClosed: o.onClosed });
}
