/**
 * The alarm index in the bucket (issue 19, the spec's "Pending alarms are
 * listed in the bucket"): one empty object per pending alarm, at
 * `alarms/<tenant>/<due>/<class>/<name>`, so that a listing of a tenant's
 * prefix returns the alarms in due order and a sweep reads only the overdue
 * part, stopping at the first entry not yet due.
 *
 * The actor's own database is what says whether it has an alarm (ADR 0009):
 * an entry is a pointer that may outlive its alarm (the actor moved or
 * deleted it and the entry's delete did not land), never the other way
 * round, since the owner writes the entry before the event that sets the
 * alarm commits, and deletes the old one only once the change is in the
 * bucket. An entry whose actor has no such alarm is ignored and deleted.
 *
 * @module
 */

import type { Bucket, CallOptions } from "../bucket/bucket.ts";
import {
  alarmDuePrefix,
  type AlarmEntry,
  alarmKey,
  alarmTenantPrefix,
  parseAlarmKey,
} from "../bucket/keys.ts";
import type { ActorKey } from "../actor_key.ts";
import { ALARM_SWEEP_MAX_ENTRIES, ALARM_SWEEP_PAGE_KEYS } from "../limits.ts";

export type { AlarmEntry };

const EMPTY = new Uint8Array(0);

/** How much of the index one {@linkcode AlarmIndex.overdue} reads. */
export interface OverdueListing extends CallOptions {
  /** Keys per listing call; default {@linkcode ALARM_SWEEP_PAGE_KEYS}. */
  pageKeys?: number;
  /** Keys read at most (entries and keys skipped); default {@linkcode ALARM_SWEEP_MAX_ENTRIES}. */
  maxEntries?: number;
}

/**
 * Entries of the alarm index.
 *
 * @example
 * ```ts
 * import { MemoryBucket } from "../bucket/memory.ts";
 * import { AlarmIndex } from "./alarm_index.ts";
 * const index = new AlarmIndex(new MemoryBucket());
 * const lobby = { tenant: "acme", class: "room", name: "lobby" };
 * await index.put(1_000, lobby);
 * for await (const entry of index.overdue("acme", 5_000)) console.log(entry.actor.name); // lobby
 * ```
 */
export class AlarmIndex {
  constructor(readonly bucket: Bucket) {}

  /** Lists `actor`'s alarm due at `dueMs`: one write. */
  async put(dueMs: number, actor: ActorKey, options: CallOptions = {}): Promise<void> {
    await this.bucket.put(alarmKey(dueMs, actor), EMPTY, options);
  }

  /** Removes the entry of `actor`'s alarm due at `dueMs`; a missing one is no error. */
  async delete(dueMs: number, actor: ActorKey, options: CallOptions = {}): Promise<void> {
    await this.bucket.delete(alarmKey(dueMs, actor), options);
  }

  /**
   * The tenant's entries due at `untilMs` or before, earliest first, read
   * page by page from the start of the index and stopped at the first
   * entry due later: with nothing overdue, one listing call. Keys that are
   * not alarm entries are skipped.
   */
  async *overdue(
    tenant: string,
    untilMs: number,
    options: OverdueListing = {},
  ): AsyncGenerator<AlarmEntry> {
    const prefix = alarmTenantPrefix(tenant);
    // Every key of an alarm due by untilMs sorts before the next millisecond's prefix.
    const end = alarmDuePrefix(tenant, Math.max(0, Math.floor(untilMs)) + 1);
    const maxEntries = options.maxEntries ?? ALARM_SWEEP_MAX_ENTRIES;
    let read = 0;
    let continuationToken: string | undefined;
    do {
      const page = await this.bucket.list(prefix, {
        maxKeys: Math.min(options.pageKeys ?? ALARM_SWEEP_PAGE_KEYS, maxEntries - read),
        continuationToken,
        signal: options.signal,
      });
      for (const object of page.objects) {
        if (object.key >= end) return;
        read++;
        const entry = parseAlarmKey(object.key);
        if (entry) yield entry;
        if (read >= maxEntries) return;
      }
      continuationToken = page.continuationToken;
    } while (continuationToken !== undefined);
  }
}
