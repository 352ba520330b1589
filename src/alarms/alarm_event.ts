/**
 * The executor's part of an actor's alarm (issue 19): an alarm's event,
 * which runs `on-alarm` if the actor's own alarm is due, and the commit of
 * what an event did to the alarm.
 *
 * The order of a commit is what keeps an alarm from being lost: the new
 * entry is written to the index before the database stores the alarm (so
 * any history in the bucket that has the alarm has its entry), and an old
 * entry is deleted only once the change landed (so a restore that goes
 * back to the old alarm still finds its entry). A crash in between leaves
 * an extra entry, which fires nothing: an alarm's event checks the actor's
 * own alarm and deletes an entry that is not it. An event that changed the
 * alarm is answered once its commit is in the bucket (as an exec-durable
 * write is): an alarm acknowledged fires whatever node dies after.
 *
 * @module
 */

import type { ActorKey } from "../actor_key.ts";
import type { ActorExportCalls } from "../actors/abi/direct.ts";
import type { ActorResponse } from "../actors/protocol.ts";
import type { ActorDatabase } from "../sqlite/actor_database.ts";
import type { Logger } from "../log.ts";
import type { ActorAlarm } from "./actor_alarm.ts";
import { storeAlarm } from "./actor_alarm.ts";
import type { AlarmIndex } from "./alarm_index.ts";
import { EventFailure } from "../actors/event_failure.ts";
import { actorKeyString } from "../actors/key.ts";

/** An alarm's event ran `on-alarm`, which succeeded. */
export const ALARM_FIRED_STATUS = 200;
/** An alarm's event found the actor's alarm not due (or gone): nothing ran. */
export const ALARM_NOT_DUE_STATUS = 204;

const empty = (status: number): ActorResponse => ({ status, headers: [], body: new Uint8Array(0) });

/**
 * Runs an alarm's event for an entry due at `entryDue`: `on-alarm` if the
 * actor's alarm is due at `nowMs`; on success the alarm is deleted with the
 * event's commit, unless `on-alarm` set or deleted it itself. An entry that
 * is not the actor's alarm is marked for deletion. An `on-alarm` that
 * returns an error or traps rejects (the node retries it), its alarm kept.
 */
export async function runAlarmEvent(
  exports: ActorExportCalls,
  alarm: ActorAlarm,
  entryDue: number,
  nowMs: number,
): Promise<ActorResponse> {
  const due = alarm.get();
  if (entryDue !== due) alarm.orphan(entryDue);
  if (due === undefined || due > nowMs) return empty(ALARM_NOT_DUE_STATUS);
  await exports.onAlarm();
  if (!alarm.drafted()) alarm.delete();
  return empty(ALARM_FIRED_STATUS);
}

/** What {@linkcode commitAlarm} works with. */
export interface AlarmCommitContext {
  key: ActorKey;
  alarm: ActorAlarm;
  /** Unset when the executor has no bucket (a test's): setting an alarm then fails. */
  index: AlarmIndex | undefined;
  /** Waits on the bucket within the event's limit, other events running meanwhile. */
  suspend<T>(work: Promise<T>): Promise<T>;
  /** The actor's open database. */
  db(): ActorDatabase;
  /** Whether the actor was given up meanwhile. */
  dead(): boolean;
  /** Told when the event set or moved the alarm (for its metric). */
  onSet?: () => void;
  /**
   * The simulator's planted `alarm-not-listed` (sim/variants.ts): the alarm
   * is stored without its index entry, so no sweep ever finds it.
   */
  unlisted?: boolean;
}

/** What {@linkcode commitAlarm} did. */
export interface AlarmCommit {
  /** Whether the alarm changed (its event's answer waits until the change landed). */
  changed: boolean;
  /** Due times of the index entries to delete once the event's commit landed. */
  stale: number[];
}

/**
 * Commits what the running event did to the alarm (after its last
 * statement, no transaction open): the new entry listed, then the alarm
 * stored. Rejects with {@linkcode EventFailure} when the entry could
 * not be written (the alarm is then as it was).
 */
export async function commitAlarm(context: AlarmCommitContext): Promise<AlarmCommit> {
  const { alarm } = context;
  const change = alarm.change();
  if (change?.to !== undefined && !context.unlisted) {
    if (!context.index) {
      throw new EventFailure(500, "this executor has no bucket to list the alarm in");
    }
    const listing = context.index.put(change.to, context.key).catch(() => {
      throw new EventFailure(
        503,
        "the bucket did not take the alarm's index entry; the alarm is unchanged; retry",
      );
    });
    // The event's own limit (a 504) passes through as it is.
    await context.suspend(listing);
    if (context.dead()) {
      throw new EventFailure(503, "the actor was given up while its alarm was listed; retry");
    }
  }
  if (change) {
    storeAlarm(context.db(), change.to);
    alarm.committed(change.to);
    if (change.to !== undefined) context.onSet?.();
    if (change.from !== undefined) alarm.orphan(change.from);
  } else {
    alarm.discard();
  }
  return { changed: change !== undefined, stale: alarm.takeOrphans() };
}

/**
 * Deletes the index entries of `key` due at `dues`, each once; a failure
 * leaves an entry that fires nothing and is deleted when it comes due.
 */
export function deleteEntries(
  index: AlarmIndex | undefined,
  key: ActorKey,
  dues: number[],
  log: Logger,
): void {
  if (!index) return;
  for (const due of new Set(dues)) {
    index.delete(due, key).catch((error) =>
      log.warn("could not delete an alarm's old index entry; it is deleted when it comes due", {
        actor: actorKeyString(key),
        due,
        error: String((error as Error)?.message ?? error),
      })
    );
  }
}
