/**
 * How an executor keeps a resident actor's database between and after its
 * events: replicated to the bucket in cluster mode ({@linkcode ReplicatedStore},
 * over an `ActorReplica`), or on the local disk only on a standalone node
 * ({@linkcode LocalStore}; ADR 0005). The executor runs events the same way
 * over both.
 *
 * @module
 */

import type { ActorDatabase, ExecResult } from "../sqlite/actor_database.ts";
import type { ActorReplica } from "../replication/replica.ts";
import type { SnapshotSchedule } from "../replication/uploader.ts";
import { GuestError } from "./abi/direct.ts";
import { AssertionError } from "../assert.ts";

/** What `exec-durable` ran, and what its event must wait for before it goes on. */
export interface DurableRun {
  result: ExecResult;
  /**
   * Settles once the write is durable (rejects with a `GuestError` when it
   * cannot be); the event suspends on it (ADR 0003). Unset when the write is
   * durable already.
   */
  durable?: Promise<void>;
}

/** One resident actor's database, as the executor's events use it. */
export interface ActorStore {
  /**
   * Runs `exec-durable`'s statement (`run`, which throws the statement's own
   * failure) and makes what it committed durable, or starts to.
   */
  execDurable(db: ActorDatabase, run: () => ExecResult): DurableRun;
  /**
   * Takes what committed since the last call: at the end of an event, after
   * a failed one's rollback, and before a delete. No transaction open.
   */
  committed(db: ActorDatabase): void;
  /** The actor deleted itself: its local database was just wiped. */
  deleted(): void;
  /**
   * Resolves once everything committed so far is as durable as this store
   * makes it (in the bucket, replicated; at once, local); rejects when it
   * does not get there (the actor is then given up).
   */
  landed(): Promise<void>;
  /** Work that must run before the actor's next event (a periodic snapshot), if any. */
  beforeEvent(db: () => ActorDatabase): Promise<unknown> | undefined;
  /**
   * Closes the database (`closeDatabase`) once what must land landed;
   * resolves whether everything did.
   */
  close(closeDatabase: () => void): Promise<boolean>;
  /** Drops the store without waiting: the executor discards the actor. */
  abandon(): void;
}

/**
 * A standalone node's actor (ADR 0005): its database on the local disk is its
 * only copy, so nothing is captured or uploaded; a durable write returns once
 * fsynced, without suspending; a delete is the wipe of the local database.
 */
export class LocalStore implements ActorStore {
  execDurable(db: ActorDatabase, run: () => ExecResult): DurableRun {
    const result = run();
    // Inside a transaction nothing committed yet: only its COMMIT is durable.
    if (db.inTransaction) return { result };
    try {
      db.syncToDisk();
    } catch (error) {
      // A bug of ours is no disk failure to tell the actor about.
      if (error instanceof AssertionError) throw error;
      throw new GuestError({
        code: "WASMKEEP_NOT_DURABLE",
        message: `the write is committed here but could not be made durable on the local disk: ${
          (error as Error).message
        }`,
      });
    }
    return { result };
  }

  committed(): void {}

  deleted(): void {}

  landed(): Promise<void> {
    return Promise.resolve();
  }

  beforeEvent(): undefined {
    return undefined;
  }

  close(closeDatabase: () => void): Promise<boolean> {
    closeDatabase();
    return Promise.resolve(true);
  }

  abandon(): void {}
}

/** What a {@linkcode ReplicatedStore} needs of its executor. */
export interface ReplicatedStoreHooks {
  /** Whether the node still holds the actor at this generation (after a durable write landed). */
  checkHold: () => Promise<boolean>;
  /** The store closed: its snapshot schedule, to remember while the actor sleeps. */
  onClosed: (schedule: SnapshotSchedule) => void;
}

/**
 * A cluster node's actor: each event's commits are captured and uploaded to
 * the bucket, a durable write waits for its upload and the hold check, a
 * delete is recorded with a marker (docs/replication.md).
 */
export class ReplicatedStore implements ActorStore {
  constructor(readonly replica: ActorReplica, readonly hooks: ReplicatedStoreHooks) {}

  execDurable(db: ActorDatabase, run: () => ExecResult): DurableRun {
    const result = run();
    if (db.inTransaction) return { result };
    const txid = this.replica.capture(db);
    if (txid === undefined) return { result };
    return { result, durable: this.#landed(txid) };
  }

  /** Waits for `txid` to land, then asks the node whether it still held the actor then. */
  async #landed(txid: bigint): Promise<void> {
    try {
      await this.replica.uploaded(txid);
    } catch (error) {
      throw new GuestError({
        code: "WASMKEEP_NOT_DURABLE",
        message: `the write is committed here but did not reach the bucket: ${
          (error as Error).message
        }`,
      });
    }
    if (!await this.hooks.checkHold()) {
      throw new GuestError({
        code: "WASMKEEP_NOT_DURABLE",
        message: "the write reached the bucket, but this node no longer held the actor then",
      });
    }
  }

  committed(db: ActorDatabase): void {
    this.replica.capture(db);
  }

  landed(): Promise<void> {
    return this.replica.uploaded(this.replica.position.txid);
  }

  deleted(): void {
    // The delete takes the TXID after what committed before it.
    this.replica.recordDelete().catch(() => {
      // A failed upload already gave the actor up (onFailure).
    });
  }

  beforeEvent(db: () => ActorDatabase): Promise<unknown> | undefined {
    // A periodic snapshot holds the actor: its next event waits for it.
    return this.replica.snapshotDue() ? this.replica.snapshot(db()) : undefined;
  }

  async close(closeDatabase: () => void): Promise<boolean> {
    const landed = await this.replica.close(closeDatabase);
    this.hooks.onClosed(this.replica.uploader.schedule);
    return landed;
  }

  abandon(): void {
    this.replica.abandon();
  }
}
