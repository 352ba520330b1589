/**
 * Version retention (ADR 0012): after every deploy and rollback, `wasmkeep
 * deploy` deletes the app's old versions.
 *
 * Only versions in the current one's line of previous links are candidates.
 * The current version and the {@linkcode KEPT_BEFORE_CURRENT} before it are
 * kept (as many rollbacks as can be made in a row); an older one is deleted
 * once it stopped being current more than the retention window ago. When it
 * stopped is the bucket's `lastModified` of the version that followed it in
 * the line, compared with the deploying machine's clock (a clock running
 * ahead shortens the window by that much).
 *
 * Never collected, because they are not in the line or cannot be followed:
 * a version a concurrent deploy is still writing, one a failed deploy left,
 * the versions a rollback stepped back from (`rolledBackFrom`), and a version
 * whose manifest cannot be read (the walk stops there, keeping it and what
 * is behind it, which is unknown). Those are small and stay.
 *
 * Components under `components/` are never collected: a concurrent deploy
 * may have found one in the bucket and skipped uploading it, so a component
 * no listed version names may still be about to be named.
 *
 * @module
 */

import { type Bucket, listAll } from "../bucket/bucket.ts";
import { appPrefix, appVersionKey } from "../bucket/keys.ts";
import type { AppName } from "./app_name.ts";
import { readCurrent, readVersion } from "./app_objects.ts";
import { type AppVersion, decodeVersion } from "./manifest.ts";

/** Versions kept before the current one, whatever their age. */
export const KEPT_BEFORE_CURRENT = 5;

/** Default window after which an old version may go: an hour (`--version-retention-secs`). */
export const DEFAULT_VERSION_RETENTION_MS = 3_600_000;

/**
 * Most previous links one walk follows. A longer line only comes from more
 * than this many deploys within the window; what is past the bound is left
 * alone (and, once the end of the walked line is deleted, stays).
 */
export const MAX_LINE_LINKS = 1000;

/** One version of the line, newest (current) first. */
export interface LineEntry {
  id: string;
  version: AppVersion;
}

/** The current version's line and why its walk ended. */
export interface VersionLine {
  /** The current version first, then its previous, and so on. */
  entries: LineEntry[];
  /** The `current` object's etag when the walk began. */
  etag: string;
  /**
   * Why the walk ended before the first version: `"missing"` (the previous
   * is gone: collected by an earlier pass, or deleted by hand),
   * `"unreadable"` (a manifest that cannot be read, named by `unreadable`)
   * or `"bound"` ({@linkcode MAX_LINE_LINKS}); absent when it reached a
   * version without a previous.
   */
  stopped?: "missing" | "unreadable" | "bound";
  /** The version that could not be read, with why. */
  unreadable?: { id: string; problem: string };
}

/**
 * Walks the line of previous links from the current version, at most
 * `maxLinks` of them; `null` when the app has no `current`. A current
 * version that cannot be read throws (there is no line to speak of); a
 * bucket that does not answer throws its error (a walk cut short by an
 * outage must not pass for the whole line).
 *
 * @example
 * ```ts
 * import { readVersionLine } from "./retention.ts";
 * import type { Bucket } from "../bucket/bucket.ts";
 * declare const bucket: Bucket;
 * const line = await readVersionLine(bucket, { tenant: "acme", app: "shop" });
 * line?.entries.map((e) => e.id);
 * ```
 */
export async function readVersionLine(
  bucket: Bucket,
  name: AppName,
  maxLinks = MAX_LINE_LINKS,
): Promise<VersionLine | null> {
  const read = await readCurrent(bucket, name);
  if (!read) return null;
  const entries: LineEntry[] = [
    { id: read.current.version, version: await readVersion(bucket, name, read.current.version) },
  ];
  const line: VersionLine = { entries, etag: read.etag };
  const seen = new Set([read.current.version]);
  for (let previous = entries[0].version.previous; previous !== null;) {
    if (entries.length > maxLinks) {
      line.stopped = "bound";
      break;
    }
    // A loop of links is not a line a deploy writes (ids are hashes); stop as for an unreadable one.
    if (seen.has(previous)) {
      line.stopped = "unreadable";
      line.unreadable = { id: previous, problem: "it is already in the line (a loop)" };
      break;
    }
    const key = appVersionKey(name.tenant, name.app, previous);
    const object = await bucket.get(key);
    if (!object) {
      line.stopped = "missing";
      break;
    }
    let version: AppVersion;
    try {
      version = decodeVersion(object.body, key);
    } catch (error) {
      line.stopped = "unreadable";
      line.unreadable = { id: previous, problem: (error as Error).message };
      break;
    }
    seen.add(previous);
    entries.push({ id: previous, version });
    previous = version.previous;
  }
  return line;
}

/** What a retention pass did. */
export interface RetentionResult {
  /** Ids of the versions deleted, oldest first. */
  deleted: string[];
  /** Versions in the current one's line, as walked (the current one included). */
  lineLength: number;
  /** Why the pass ended early: `current` changed under it; absent otherwise. */
  stopped?: "current-changed";
  /** Why the walk of the line ended before its first version, when it did. */
  walk?: VersionLine["stopped"];
}

/**
 * Deletes the app's old versions as the module says: past the current one
 * and the {@linkcode KEPT_BEFORE_CURRENT} before it, versions of the line
 * that stopped being current more than `retentionMs` before `now` (0: at
 * once), oldest first. The oldest stretch of the line is deleted and the
 * pass stops at the first version too young, so what stays is always one
 * unbroken line (deleting a newer one first would cut the older ones off
 * it for good). Before each delete `current` is read again; the pass stops
 * if it changed. Bucket errors are thrown (what was deleted before stays
 * deleted).
 *
 * @example
 * ```ts
 * import { collectVersions, DEFAULT_VERSION_RETENTION_MS } from "./retention.ts";
 * import type { Bucket } from "../bucket/bucket.ts";
 * declare const bucket: Bucket;
 * const { deleted } = await collectVersions(bucket, { tenant: "acme", app: "shop" },
 *   Date.now(), DEFAULT_VERSION_RETENTION_MS);
 * ```
 */
export async function collectVersions(
  bucket: Bucket,
  name: AppName,
  now: number,
  retentionMs: number,
): Promise<RetentionResult> {
  const line = await readVersionLine(bucket, name);
  if (!line) return { deleted: [], lineLength: 0 };
  const result: RetentionResult = {
    deleted: [],
    lineLength: line.entries.length,
    ...(line.stopped ? { walk: line.stopped } : {}),
  };
  if (line.entries.length <= KEPT_BEFORE_CURRENT + 1) return result;
  const written = new Map<string, number>();
  const versionsPrefix = `${appPrefix(name.tenant, name.app)}versions/`;
  for await (const object of listAll(bucket, versionsPrefix)) {
    written.set(object.key, object.lastModified);
  }
  for (let i = line.entries.length - 1; i > KEPT_BEFORE_CURRENT; i--) {
    const follower = written.get(appVersionKey(name.tenant, name.app, line.entries[i - 1].id));
    // A follower missing from the listing was written after it: too young to tell.
    if (follower === undefined) break;
    const age = now - follower;
    if (retentionMs > 0 && age <= retentionMs) break;
    const read = await readCurrent(bucket, name);
    if (read?.etag !== line.etag) {
      result.stopped = "current-changed";
      break;
    }
    await bucket.delete(appVersionKey(name.tenant, name.app, line.entries[i].id));
    result.deleted.push(line.entries[i].id);
  }
  return result;
}
