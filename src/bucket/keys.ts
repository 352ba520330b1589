/**
 * Where things live in the bucket, relative to its prefix. Every path the
 * cluster writes is built here, so two modules can never disagree on one.
 *
 * Names are percent-encoded (`encodeURIComponent`), so a `/` inside an actor's
 * name cannot reach into another actor's keys.
 *
 * @module
 */

import type { ActorKey } from "../actor_key.ts";

/** Prefix of every node's heartbeat, which is also its lease. */
export const NODES_PREFIX = "nodes/";
/** Prefix of the actors' ownership records. */
export const OWNERS_PREFIX = "owners/";
/** Prefix of the actors' replicated databases. */
export const ACTORS_PREFIX = "actors/";
/** Prefix of the pending alarms, ordered by due time. */
export const ALARMS_PREFIX = "alarms/";
/** Prefix of the deployed apps. */
export const APPS_PREFIX = "apps/";
/** Prefix of the start-up probe's throwaway objects. */
export const PROBE_PREFIX = "probe/";
/** Prefix of the drain requests, one per node being drained (ADR 0014). */
export const DRAINS_PREFIX = "drains/";
/** Prefix of the move requests, one per actor being moved (ADR 0017). */
export const MOVES_PREFIX = "moves/";
/** The random secret that signs calls between nodes. */
export const CLUSTER_SECRET_KEY = "cluster/secret";

/** Digits of a due time in an alarm key: ms since the epoch, zero-padded so keys sort by time. */
const DUE_DIGITS = 15;

/**
 * One path segment: percent-encoded, never empty, `.` or `..`.
 *
 * @example
 * ```ts
 * import { segment } from "./keys.ts";
 * segment("a/b"); // "a%2Fb"
 * ```
 */
export function segment(value: string): string {
  if (value === "" || value === "." || value === "..") {
    throw new TypeError(`not a valid name in a bucket key: ${JSON.stringify(value)}`);
  }
  return encodeURIComponent(value);
}

/**
 * The heartbeat (and lease) of a node: `nodes/<id>`.
 *
 * @example
 * ```ts
 * import { nodeKey } from "./keys.ts";
 * nodeKey("a"); // "nodes/a"
 * ```
 */
export function nodeKey(nodeId: string): string {
  return NODES_PREFIX + segment(nodeId);
}

/**
 * The request that node `nodeId` drain: `drains/<id>` (ADR 0014).
 *
 * @example
 * ```ts
 * import { drainKey } from "./keys.ts";
 * drainKey("b"); // "drains/b"
 * ```
 */
export function drainKey(nodeId: string): string {
  return DRAINS_PREFIX + segment(nodeId);
}

/**
 * The request that an actor move to another node:
 * `moves/<tenant>/<class>/<name>` (ADR 0017).
 *
 * @example
 * ```ts
 * import { moveKey } from "./keys.ts";
 * moveKey({ tenant: "acme", class: "room", name: "lobby" }); // "moves/acme/room/lobby"
 * ```
 */
export function moveKey(actor: ActorKey): string {
  return MOVES_PREFIX + actorPath(actor);
}

function actorPath(actor: ActorKey): string {
  return `${segment(actor.tenant)}/${segment(actor.class)}/${segment(actor.name)}`;
}

/**
 * An actor's ownership record: `owners/<tenant>/<class>/<name>`.
 *
 * @example
 * ```ts
 * import { ownerKey } from "./keys.ts";
 * ownerKey({ tenant: "acme", class: "room", name: "lobby" }); // "owners/acme/room/lobby"
 * ```
 */
export function ownerKey(actor: ActorKey): string {
  return OWNERS_PREFIX + actorPath(actor);
}

/**
 * Everything replicated for one actor: `actors/<tenant>/<class>/<name>/`.
 *
 * @example
 * ```ts
 * import { actorPrefix } from "./keys.ts";
 * actorPrefix({ tenant: "acme", class: "room", name: "lobby" }); // "actors/acme/room/lobby/"
 * ```
 */
export function actorPrefix(actor: ActorKey): string {
  return `${ACTORS_PREFIX}${actorPath(actor)}/`;
}

/**
 * The actor's uploaded LTX files: `actors/<tenant>/<class>/<name>/wal/`.
 *
 * @example
 * ```ts
 * import { actorWalPrefix } from "./keys.ts";
 * actorWalPrefix({ tenant: "acme", class: "room", name: "lobby" }); // "actors/acme/room/lobby/wal/"
 * ```
 */
export function actorWalPrefix(actor: ActorKey): string {
  return `${actorPrefix(actor)}wal/`;
}

/**
 * A pending alarm's entry in the index, `alarms/<tenant>/<due>/<class>/<name>`,
 * with the due time zero-padded so that a listing of a tenant's alarms
 * returns the earliest first and can stop at a time (issue 19).
 *
 * @example
 * ```ts
 * import { alarmKey } from "./keys.ts";
 * alarmKey(1700000000000, { tenant: "acme", class: "room", name: "lobby" });
 * // "alarms/acme/001700000000000/room/lobby"
 * ```
 */
export function alarmKey(dueMs: number, actor: ActorKey): string {
  return `${alarmDuePrefix(actor.tenant, dueMs)}/${segment(actor.class)}/${segment(actor.name)}`;
}

/**
 * A tenant's alarm index: `alarms/<tenant>/`.
 *
 * @example
 * ```ts
 * import { alarmTenantPrefix } from "./keys.ts";
 * alarmTenantPrefix("acme"); // "alarms/acme/"
 * ```
 */
export function alarmTenantPrefix(tenant: string): string {
  return `${ALARMS_PREFIX}${segment(tenant)}/`;
}

/**
 * The part of a tenant's alarm keys that a due time sorts by:
 * `alarms/<tenant>/<due>`. Every key of an alarm due by then sorts before
 * the next millisecond's prefix.
 *
 * @example
 * ```ts
 * import { alarmDuePrefix } from "./keys.ts";
 * alarmDuePrefix("acme", 5); // "alarms/acme/000000000000005"
 * ```
 */
export function alarmDuePrefix(tenant: string, dueMs: number): string {
  if (!Number.isSafeInteger(dueMs) || dueMs < 0 || String(dueMs).length > DUE_DIGITS) {
    throw new RangeError(`not a due time for an alarm key: ${dueMs}`);
  }
  return alarmTenantPrefix(tenant) + String(dueMs).padStart(DUE_DIGITS, "0");
}

/** An alarm index entry, read back from its key. */
export interface AlarmEntry {
  dueMs: number;
  actor: ActorKey;
}

/**
 * The due time and actor of an alarm key, or `undefined` for a key that is
 * not one (written by another version, say: skipped, as the spec's
 * "Formats in the bucket" allows).
 *
 * @example
 * ```ts
 * import { parseAlarmKey } from "./keys.ts";
 * parseAlarmKey("alarms/acme/001700000000000/room/lobby");
 * // { dueMs: 1700000000000, actor: { tenant: "acme", class: "room", name: "lobby" } }
 * ```
 */
export function parseAlarmKey(key: string): AlarmEntry | undefined {
  if (!key.startsWith(ALARMS_PREFIX)) return undefined;
  const parts = key.slice(ALARMS_PREFIX.length).split("/");
  if (parts.length !== 4 || !/^[0-9]+$/.test(parts[1]) || parts[1].length !== DUE_DIGITS) {
    return undefined;
  }
  try {
    const [tenant, , className, name] = parts.map(decodeURIComponent);
    if ([tenant, className, name].some((part) => part === "" || part === "." || part === "..")) {
      return undefined;
    }
    return { dueMs: Number(parts[1]), actor: { tenant, class: className, name } };
  } catch {
    return undefined;
  }
}

/**
 * The deployed version of an app: `apps/<tenant>/<app>/current`.
 *
 * @example
 * ```ts
 * import { appCurrentKey } from "./keys.ts";
 * appCurrentKey("acme", "shop"); // "apps/acme/shop/current"
 * ```
 */
export function appCurrentKey(tenant: string, app: string): string {
  return `${appPrefix(tenant, app)}current`;
}

/**
 * Everything of one app: `apps/<tenant>/<app>/`.
 *
 * @example
 * ```ts
 * import { appPrefix } from "./keys.ts";
 * appPrefix("acme", "shop"); // "apps/acme/shop/"
 * ```
 */
export function appPrefix(tenant: string, app: string): string {
  return `${APPS_PREFIX}${segment(tenant)}/${segment(app)}/`;
}

/**
 * Every app of one tenant: `apps/<tenant>/`.
 *
 * @example
 * ```ts
 * import { appTenantPrefix } from "./keys.ts";
 * appTenantPrefix("acme"); // "apps/acme/"
 * ```
 */
export function appTenantPrefix(tenant: string): string {
  return `${APPS_PREFIX}${segment(tenant)}/`;
}

/**
 * One deployed version's manifest: `apps/<tenant>/<app>/versions/<id>`.
 *
 * @example
 * ```ts
 * import { appVersionKey } from "./keys.ts";
 * appVersionKey("acme", "shop", "9cf4de9152d8dd29"); // "apps/acme/shop/versions/9cf4de9152d8dd29"
 * ```
 */
export function appVersionKey(tenant: string, app: string, id: string): string {
  return `${appPrefix(tenant, app)}versions/${segment(id)}`;
}

/**
 * An app's component by the SHA-256 of its bytes, shared by every version
 * that runs it: `apps/<tenant>/<app>/components/<sha256>.wasm`.
 *
 * @example
 * ```ts
 * import { appComponentKey } from "./keys.ts";
 * appComponentKey("acme", "shop", "ab12"); // "apps/acme/shop/components/ab12.wasm"
 * ```
 */
export function appComponentKey(tenant: string, app: string, sha256: string): string {
  return `${appPrefix(tenant, app)}components/${segment(sha256)}.wasm`;
}

/**
 * A throwaway object for the start-up probe: `probe/<token>`.
 *
 * @example
 * ```ts
 * import { probeKey } from "./keys.ts";
 * probeKey("3f2a"); // "probe/3f2a"
 * ```
 */
export function probeKey(token: string): string {
  return PROBE_PREFIX + segment(token);
}
