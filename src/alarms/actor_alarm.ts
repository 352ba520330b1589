/**
 * An actor's one alarm as its executor keeps it (issue 19): what the
 * actor's database says (its WasmKeep table, so the alarm follows the actor
 * to any node with its history), and what the running event made of it.
 * `alarms.set` and `alarms.delete` change only the event's draft; the draft
 * becomes the alarm with the event's commit (`AlarmCommit` in the runtime),
 * and an event that fails (a trap, an error, a failed listing) leaves the
 * alarm as it was.
 *
 * @module
 */

import type { ActorDatabase } from "../sqlite/actor_database.ts";

/** The key of the alarm's due time among WasmKeep's own facts in the actor's database. */
export const ALARM_META_KEY = "alarm";

/**
 * The latest due time an alarm takes, ms since the epoch: what the index's
 * 15 digits hold (the year 33658).
 */
export const MAX_ALARM_DUE_MS = 999_999_999_999_999;

/**
 * The alarm stored in `db`, if any.
 *
 * @example
 * ```ts
 * import { storedAlarm } from "./actor_alarm.ts";
 * import type { ActorDatabase } from "../sqlite/actor_database.ts";
 * declare const db: ActorDatabase;
 * const due = storedAlarm(db); // 1700000000000, or undefined
 * ```
 */
export function storedAlarm(db: ActorDatabase): number | undefined {
  const value = db.getMeta(ALARM_META_KEY);
  if (value === undefined) return undefined;
  const due = Number(value);
  // Written by this module only (the table is refused to actors).
  if (!Number.isSafeInteger(due) || due < 0) {
    throw new Error(`the actor's stored alarm is not a due time: ${JSON.stringify(value)}`);
  }
  return due;
}

/**
 * Writes `due` (or removes the alarm, `undefined`) into `db`, outside any
 * transaction: it commits on its own, right after the event's last statement.
 */
export function storeAlarm(db: ActorDatabase, due: number | undefined): void {
  if (due === undefined) db.deleteMeta(ALARM_META_KEY);
  else db.setMeta(ALARM_META_KEY, String(due));
}

/** What an event changed: the alarm before it and after it (`undefined`: none). */
export interface AlarmChange {
  from: number | undefined;
  to: number | undefined;
}

/**
 * One resident actor's alarm: the stored one and the running event's draft.
 *
 * @example
 * ```ts
 * import { ActorAlarm } from "./actor_alarm.ts";
 * const alarm = new ActorAlarm(undefined);
 * alarm.set(1_000);
 * alarm.get(); // 1000: the event sees its own change
 * alarm.change(); // { from: undefined, to: 1000 }
 * alarm.discard(); // the event failed
 * alarm.get(); // undefined
 * ```
 */
export class ActorAlarm {
  #stored: number | undefined;
  /** The running event's draft; unset while it changed nothing. */
  #draft: { due: number | undefined } | undefined;
  /** Due times of index entries to delete once the event's commit landed. */
  #orphans: number[] = [];

  constructor(stored: number | undefined) {
    this.#stored = stored;
  }

  /** The alarm as the database has it. */
  get stored(): number | undefined {
    return this.#stored;
  }

  /** What `alarms.get` answers: the event's own change, else the stored alarm. */
  get(): number | undefined {
    return this.#draft ? this.#draft.due : this.#stored;
  }

  /** `alarms.set`: the event's draft is `due`. */
  set(due: number): void {
    this.#draft = { due };
  }

  /** `alarms.delete`. */
  delete(): void {
    this.#draft = { due: undefined };
  }

  /** Whether the running event called `set` or `delete`. */
  drafted(): boolean {
    return this.#draft !== undefined;
  }

  /** The index entry due at `due` is not (or no longer) this alarm's: delete it after the commit. */
  orphan(due: number): void {
    this.#orphans.push(due);
  }

  /** The entries to delete, handed over once. */
  takeOrphans(): number[] {
    const orphans = this.#orphans;
    this.#orphans = [];
    return orphans;
  }

  /** The actor deleted itself (its database is wiped): no alarm, and its entry goes. */
  wiped(): void {
    if (this.#stored !== undefined) this.orphan(this.#stored);
    this.#stored = undefined;
    this.#draft = undefined;
  }

  /** What the event changed, or `undefined` when the alarm stays as stored. */
  change(): AlarmChange | undefined {
    if (!this.#draft || this.#draft.due === this.#stored) return undefined;
    return { from: this.#stored, to: this.#draft.due };
  }

  /** The event failed: its draft goes (entries found stale stay marked). */
  discard(): void {
    this.#draft = undefined;
  }

  /** The event's change was stored: it is the alarm now. */
  committed(due: number | undefined): void {
    this.#stored = due;
    this.#draft = undefined;
  }
}
