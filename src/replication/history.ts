/**
 * An actor's replicated history as ADR 0002 lays it out under
 * `actors/<tenant>/<class>/<name>/`: the keys, the `base` and `deleted`
 * objects, and the restore walk, as pure functions so the rule can be tested
 * without a bucket. A restore runs them in order: {@linkcode parseHistory} on
 * the listing, {@linkcode basesToRead} (and the `deleted` marker), then
 * {@linkcode planRestore} once the bases are read.
 *
 * @module
 */

import type { ObjectInfo } from "../bucket/bucket.ts";
import { AssertionError } from "../assert.ts";
import type { ActorKey } from "../actor_key.ts";
import { actorPrefix, actorWalPrefix } from "../bucket/keys.ts";
import { CHECKSUM_FLAG } from "../ltx/checksum.ts";
import { formatLtxFilename, formatTxid } from "../ltx/filename.ts";

/**
 * The checksum of an empty database: the flag alone (ADR 0002).
 *
 * @example
 * ```ts
 * import { EMPTY_DATABASE_CHECKSUM } from "./history.ts";
 * console.log(EMPTY_DATABASE_CHECKSUM.toString(16)); // "8000000000000000"
 * ```
 */
export const EMPTY_DATABASE_CHECKSUM = CHECKSUM_FLAG;

/** The version of the `base` and `deleted` JSON objects this code writes and reads. */
const MARKER_VERSION = 1;

const DELETED_NAME = "deleted";

const BASE_NAME = "base";

/** Why a history cannot be restored without losing data. */
export type HistoryErrorKind = "gap" | "corruption" | "malformed";

/**
 * A history that cannot be restored without losing data: a gap in the chain,
 * a checksum that does not match, or an object that is not what its key says.
 * It maps to HTTP 500: trying again will not help, unlike a bucket that does
 * not answer.
 *
 * @example
 * ```ts
 * import { HistoryError } from "./history.ts";
 * const e = new HistoryError("gap", "no file starts at TXID 8");
 * console.log(e.kind, e.status); // "gap" 500
 * ```
 */
export class HistoryError extends Error {
  /** Always `"HistoryError"`, for logs and structured errors. */
  override name = "HistoryError";
  /** The HTTP status this maps to. */
  readonly status = 500;
  /** Which of the three ways the history is broken. */
  readonly kind: HistoryErrorKind;

  /** Describes a broken history; the message names the key or TXID at fault. */
  constructor(kind: HistoryErrorKind, message: string, options: { cause?: unknown } = {}) {
    super(`${kind}: ${message}`, { cause: options.cause });
    this.kind = kind;
  }
}

/** An object of the history: its key and what the listing says about it. */
export interface HistoryObject {
  /** The full key, relative to the bucket's prefix. */
  key: string;
  /** Size in bytes, from the listing. */
  size: number;
  /** When the store wrote it, ms since the epoch (the store's clock). */
  lastModified: number;
}

/** A generation's `base` object, as listed. */
export interface HistoryBase extends HistoryObject {
  /** The generation whose owner wrote it. */
  generation: bigint;
}

/** An LTX file, as listed: `wal/<gen>/<min>-<max>.ltx`. */
export interface HistoryFile extends HistoryObject {
  /** The generation whose owner wrote it. */
  generation: bigint;
  /** First TXID it covers; 1 makes it a snapshot. */
  minTxid: bigint;
  /** Last TXID it covers. */
  maxTxid: bigint;
}

/** An actor's listing, sorted into what ADR 0002 names. */
export interface ActorHistory {
  /** Every generation with a base or a file, ascending. */
  generations: bigint[];
  /** The listed bases, by generation. */
  bases: Map<bigint, HistoryBase>;
  /** The listed LTX files, by generation, then `minTxid`, then `maxTxid`. */
  files: HistoryFile[];
  /** The `deleted` marker, when listed. */
  deleted?: HistoryObject;
  /** Keys under the actor's prefix of no shape the ADR names (logged, never read). */
  ignored: string[];
}

/** The `base` object: where the owner's database stood when it took the actor. */
export interface BaseRecord {
  /** The ownership generation of the hold. */
  generation: bigint;
  /** The TXID of the database when the owner took it. */
  txid: bigint;
  /** Its rolling checksum there. */
  checksum: bigint;
  /** The node that wrote it. */
  node: string;
  /** When, in ms since the epoch (the node's clock). */
  at: number;
}

/** The `deleted` marker: the TXID of a delete and the generation that made it. */
export interface DeletedRecord {
  /** The generation of the owner that deleted the actor. */
  generation: bigint;
  /** The TXID the delete took; the database after it is empty. */
  txid: bigint;
  /** The node that wrote it. */
  node: string;
  /** When, in ms since the epoch (the node's clock). */
  at: number;
}

const HEX64 = /^[0-9a-f]{16}$/;
const BASE_KEY = /^wal\/([0-9a-f]{16})\/base$/;
const FILE_KEY = /^wal\/([0-9a-f]{16})\/([0-9a-f]{16})-([0-9a-f]{16})\.ltx$/;
const MAX_U64 = (1n << 64n) - 1n;

/**
 * A generation as 16 lowercase hex digits, so listings sort by generation.
 * Generations start at 1.
 *
 * @example
 * ```ts
 * import { formatGeneration } from "./history.ts";
 * formatGeneration(3n); // "0000000000000003"
 * ```
 */
export function formatGeneration(generation: bigint): string {
  if (generation < 1n || generation > MAX_U64) {
    throw new RangeError(`not a generation: ${generation}`);
  }
  return formatTxid(generation);
}

/**
 * The prefix of one generation's objects: `actors/<t>/<c>/<n>/wal/<gen>/`.
 *
 * @example
 * ```ts
 * import { generationPrefix } from "./history.ts";
 * generationPrefix({ tenant: "t", class: "c", name: "n" }, 1n);
 * // "actors/t/c/n/wal/0000000000000001/"
 * ```
 */
export function generationPrefix(actor: ActorKey, generation: bigint): string {
  return `${actorWalPrefix(actor)}${formatGeneration(generation)}/`;
}

/**
 * The key of an LTX file: `actors/<t>/<c>/<n>/wal/<gen>/<min>-<max>.ltx`.
 *
 * @example
 * ```ts
 * import { walFileKey } from "./history.ts";
 * walFileKey({ tenant: "t", class: "c", name: "n" }, 1n, 1n, 5n);
 * // "actors/t/c/n/wal/0000000000000001/0000000000000001-0000000000000005.ltx"
 * ```
 */
export function walFileKey(actor: ActorKey, generation: bigint, min: bigint, max: bigint): string {
  if (min < 1n || min > max) throw new RangeError(`not a TXID range: ${min}-${max}`);
  return generationPrefix(actor, generation) + formatLtxFilename(min, max);
}

/**
 * The key of a generation's base: `actors/<t>/<c>/<n>/wal/<gen>/base`.
 *
 * @example
 * ```ts
 * import { baseKey } from "./history.ts";
 * baseKey({ tenant: "t", class: "c", name: "n" }, 2n); // "actors/t/c/n/wal/0000000000000002/base"
 * ```
 */
export function baseKey(actor: ActorKey, generation: bigint): string {
  return generationPrefix(actor, generation) + BASE_NAME;
}

/**
 * The key of the actor's `deleted` marker: `actors/<t>/<c>/<n>/deleted`.
 *
 * @example
 * ```ts
 * import { deletedKey } from "./history.ts";
 * deletedKey({ tenant: "t", class: "c", name: "n" }); // "actors/t/c/n/deleted"
 * ```
 */
export function deletedKey(actor: ActorKey): string {
  return actorPrefix(actor) + DELETED_NAME;
}

/**
 * Sorts an actor's listing (every object under `actorPrefix(actor)`, or
 * only those under `actorWalPrefix(actor)`) into generations, bases, files and
 * the `deleted` marker. Keys of any other shape, generation 0 and TXID ranges
 * that cannot be (`min` 0, `min` > `max`) land in `ignored`.
 *
 * @example
 * ```ts
 * import { parseHistory } from "./history.ts";
 * const actor = { tenant: "t", class: "c", name: "n" };
 * const history = parseHistory([
 *   { key: "actors/t/c/n/wal/0000000000000001/base", etag: '"1"', size: 90, lastModified: 0 },
 * ], actor);
 * history.generations; // [1n]
 * ```
 */
export function parseHistory(objects: Iterable<ObjectInfo>, actor: ActorKey): ActorHistory {
  const prefix = actorPrefix(actor);
  const bases = new Map<bigint, HistoryBase>();
  const files: HistoryFile[] = [];
  const ignored: string[] = [];
  const generations = new Set<bigint>();
  let deleted: HistoryObject | undefined;
  for (const { key, size, lastModified } of objects) {
    const rest = key.startsWith(prefix) ? key.slice(prefix.length) : undefined;
    const object = { key, size, lastModified };
    if (rest === DELETED_NAME) {
      deleted = object;
      continue;
    }
    const base = rest === undefined ? null : BASE_KEY.exec(rest);
    const file = rest === undefined ? null : FILE_KEY.exec(rest);
    const generation = BigInt(`0x${(base ?? file)?.[1] ?? "0"}`);
    if (base && generation > 0n) {
      bases.set(generation, { ...object, generation });
      generations.add(generation);
    } else if (file && generation > 0n) {
      const minTxid = BigInt(`0x${file[2]}`);
      const maxTxid = BigInt(`0x${file[3]}`);
      if (minTxid < 1n || minTxid > maxTxid) {
        ignored.push(key);
        continue;
      }
      files.push({ ...object, generation, minTxid, maxTxid });
      generations.add(generation);
    } else {
      ignored.push(key);
    }
  }
  files.sort((a, b) =>
    compare(a.generation, b.generation) || compare(a.minTxid, b.minTxid) ||
    compare(a.maxTxid, b.maxTxid)
  );
  return { generations: [...generations].sort(compare), bases, files, deleted, ignored };
}

/**
 * The bases a restore must read (step 3 of the walk): every generation's,
 * ascending. Those of generations before a `deleted` marker matter too: a
 * marker a later generation's base starts below was lost (see
 * {@linkcode supersededDelete}), and the history before it stands.
 *
 * @example
 * ```ts
 * import { basesToRead, parseHistory } from "./history.ts";
 * const history = parseHistory([], { tenant: "t", class: "c", name: "n" });
 * basesToRead(history); // []
 * ```
 */
export function basesToRead(history: ActorHistory): HistoryBase[] {
  return [...history.bases.values()].sort((a, b) => compare(a.generation, b.generation));
}

/**
 * Whether the `deleted` marker was lost: the base of a later generation
 * starts below the delete's TXID, or at it with a database that is not
 * empty, so that holder restored the history without the delete (the marker
 * landed late, after it took the actor) and wrote on it. The delete is then
 * lost as a plain write may be, and the walk ignores the marker; following
 * it would leave the later holder's files, acknowledged durable writes among
 * them, out of the chain.
 *
 * @example
 * ```ts
 * import { supersededDelete } from "./history.ts";
 * const bases = new Map([[3n, { generation: 3n, txid: 5n, checksum: 1n, node: "b", at: 0 }]]);
 * supersededDelete(bases, { generation: 2n, txid: 9n }); // true
 * ```
 */
export function supersededDelete(
  bases: Map<bigint, BaseRecord>,
  deleted: Pick<DeletedRecord, "generation" | "txid"> | undefined,
): boolean {
  if (!deleted) return false;
  for (const base of bases.values()) {
    if (base.generation <= deleted.generation) continue;
    if (base.txid < deleted.txid) return true;
    // A holder that saw the delete starts empty at its TXID; one that took
    // at that TXID a database that is not empty did not. Collection may have
    // removed every lower base by then, so this one alone must tell.
    if (base.txid === deleted.txid && base.checksum !== EMPTY_DATABASE_CHECKSUM) return true;
  }
  return false;
}

/**
 * Where a restore starts: every page of a snapshot, or an empty database at a
 * TXID (0, or the TXID of a delete).
 */
export type RestoreStart =
  | { kind: "snapshot"; txid: bigint; file: HistoryFile }
  | { kind: "empty"; txid: bigint };

/** A cleanly closed local database: where it stands. */
export interface LocalPosition {
  /** The last TXID in it. */
  txid: bigint;
  /** Its rolling checksum. */
  checksum: bigint;
}

/**
 * Bringing a local database that lies on the chain up to the target: only
 * the files after it.
 */
export interface ResumePlan {
  /** The local position the files apply to. */
  from: LocalPosition;
  /**
   * The files after it, in order of application. The first one's pre-apply
   * checksum must equal `from.checksum`; if it does not, the local database is
   * not on the chain after all and the restore starts over from the start.
   */
  files: HistoryFile[];
  /**
   * With no files after it: the chain's file that ends at `from.txid`, whose
   * post-apply checksum must equal `from.checksum`. Absent when planning
   * already confirmed it (a base there, or the empty start).
   */
  confirm?: HistoryFile;
}

/** What {@linkcode planRestore} decides. */
export interface RestorePlan {
  /** Where the walk starts. */
  start: RestoreStart;
  /** The files after the start, in order of application (the snapshot not included). */
  files: HistoryFile[];
  /** The TXID the restored database must reach. */
  target: bigint;
  /** TXIDs the walk reaches where a base says what the checksum must be there. */
  checkpoints: Map<bigint, bigint>;
  /** Present when the local database lies on the chain at or after the start. */
  resume?: ResumePlan;
  /** Objects the rule set aside, and why (for the log). */
  dropped: { key: string; reason: string }[];
  /** The highest generation of the listing or the `deleted` marker; 0 when none. */
  highestGeneration: bigint;
}

/**
 * Plans a restore exactly as ADR 0002's walk (steps 2 to 6) says, from the
 * listing, the bases of {@linkcode basesToRead} (by generation) and the
 * `deleted` marker. What needs file contents (each file's pre-apply checksum
 * against the running one, and the checkpoints) is left to whoever applies
 * the plan. Throws {@linkcode HistoryError}: `gap` when the walk stops before
 * the target, `corruption` when two bases the walk reaches disagree or the
 * empty start contradicts a base, `malformed` when a base is not of its
 * generation. A base {@linkcode basesToRead} named but missing from `bases`
 * is the caller's mistake: a `TypeError`.
 *
 * Equal candidates of the walk in one generation (a resend that spanned more
 * commits) are decided by the larger `maxTxid`, so the walk goes further.
 *
 * @example
 * ```ts
 * import { parseHistory, planRestore } from "./history.ts";
 * const actor = { tenant: "t", class: "c", name: "n" };
 * const history = parseHistory([{
 *   key: "actors/t/c/n/wal/0000000000000001/0000000000000001-0000000000000003.ltx",
 *   etag: '"x"', size: 4096, lastModified: 0,
 * }], actor);
 * const plan = planRestore(history, new Map(), undefined);
 * plan.target; // 3n, from the snapshot alone
 * ```
 */
export function planRestore(
  history: ActorHistory,
  bases: Map<bigint, BaseRecord>,
  marker: DeletedRecord | undefined,
  local?: LocalPosition,
): RestorePlan {
  const dropped: { key: string; reason: string }[] = [];
  const deleted = supersededDelete(bases, marker) ? undefined : marker;
  if (marker && !deleted) {
    dropped.push({
      key: history.deleted?.key ?? "deleted",
      reason: `a later generation's base starts below the delete at ${marker.txid}: the delete ` +
        `was lost`,
    });
  }
  for (const [generation, base] of bases) {
    if (base.generation !== generation) {
      throw new HistoryError(
        "malformed",
        `the base of generation ${generation} says generation ${base.generation}`,
      );
    }
  }

  // Step 2: the marker drops what came before the delete.
  let files = history.files.filter((f) => {
    if (!deleted) return true;
    const before = f.generation < deleted.generation ||
      (f.generation === deleted.generation && f.maxTxid <= deleted.txid);
    if (before) dropped.push({ key: f.key, reason: "before the delete" });
    return !before;
  });
  const kept = [...bases.values()]
    .filter((b) => !deleted || b.generation >= deleted.generation)
    .sort((a, b) => compare(a.generation, b.generation));
  for (const listed of basesToRead(history)) {
    if (!bases.has(listed.generation)) {
      throw new AssertionError(`every listed base is given, and ${listed.key} is not`);
    }
  }

  // Step 3: caps, and files that claim to precede their own base.
  const baseOf = new Map(kept.map((b) => [b.generation, b]));
  files = files.filter((f) => {
    const cap = kept.find((b) => b.generation > f.generation)?.txid;
    if (cap !== undefined && f.maxTxid > cap) {
      dropped.push({ key: f.key, reason: `after the cap ${cap} (a late upload)` });
      return false;
    }
    const base = baseOf.get(f.generation);
    if (base && f.minTxid !== 1n && f.minTxid <= base.txid) {
      dropped.push({ key: f.key, reason: `malformed: starts at or before its base ${base.txid}` });
      return false;
    }
    return true;
  });

  // Step 4: the target.
  let target = deleted?.txid ?? 0n;
  for (const f of files) target = max(target, f.maxTxid);
  for (const b of kept) target = max(target, b.txid);

  // Step 5: the start.
  let snapshot: HistoryFile | undefined;
  for (const f of files) {
    if (f.minTxid !== 1n) continue;
    if (
      !snapshot || f.maxTxid > snapshot.maxTxid ||
      (f.maxTxid === snapshot.maxTxid && f.generation > snapshot.generation)
    ) snapshot = f;
  }
  let start: RestoreStart;
  if (deleted && (!snapshot || snapshot.maxTxid <= deleted.txid)) {
    start = { kind: "empty", txid: deleted.txid };
  } else if (snapshot) {
    start = { kind: "snapshot", txid: snapshot.maxTxid, file: snapshot };
  } else {
    start = { kind: "empty", txid: 0n };
  }

  // Step 6: the walk.
  const byMin = new Map<bigint, HistoryFile>();
  for (const f of files) {
    if (f.minTxid === 1n) continue;
    const other = byMin.get(f.minTxid);
    if (
      !other || f.generation > other.generation ||
      (f.generation === other.generation && f.maxTxid > other.maxTxid)
    ) byMin.set(f.minTxid, f);
  }
  const walk: HistoryFile[] = [];
  const positions = [start.txid];
  for (let next = byMin.get(start.txid + 1n); next; next = byMin.get(next.maxTxid + 1n)) {
    walk.push(next);
    positions.push(next.maxTxid);
  }
  const reached = positions[positions.length - 1];
  if (reached < target) {
    throw new HistoryError(
      "gap",
      `the walk from ${describeStart(start)} stops at TXID ${reached}: ` +
        `no file starts at ${reached + 1n}, the target is ${target}`,
    );
  }

  const checkpoints = new Map<bigint, bigint>();
  const onWalk = new Set(positions);
  for (const b of kept) {
    if (!onWalk.has(b.txid)) continue;
    const earlier = checkpoints.get(b.txid);
    if (earlier !== undefined && earlier !== b.checksum) {
      throw new HistoryError(
        "corruption",
        `two bases at TXID ${b.txid} disagree: ${hex(earlier)} and ${hex(b.checksum)}`,
      );
    }
    checkpoints.set(b.txid, b.checksum);
  }
  const atStart = checkpoints.get(start.txid);
  if (start.kind === "empty" && atStart !== undefined && atStart !== EMPTY_DATABASE_CHECKSUM) {
    throw new HistoryError(
      "corruption",
      `the database is empty at TXID ${start.txid} but a base says ${hex(atStart)}`,
    );
  }

  let highestGeneration = deleted?.generation ?? 0n;
  for (const g of history.generations) highestGeneration = max(highestGeneration, g);

  return {
    start,
    files: walk,
    target,
    checkpoints,
    resume: local && resumeFrom(local, start, walk, checkpoints),
    dropped,
    highestGeneration,
  };
}

function resumeFrom(
  local: LocalPosition,
  start: RestoreStart,
  walk: HistoryFile[],
  checkpoints: Map<bigint, bigint>,
): ResumePlan | undefined {
  const index = local.txid === start.txid ? -1 : walk.findIndex((f) => f.maxTxid === local.txid);
  if (local.txid !== start.txid && index < 0) return undefined;
  const known = checkpoints.get(local.txid) ??
    (start.kind === "empty" && local.txid === start.txid ? EMPTY_DATABASE_CHECKSUM : undefined);
  if (known !== undefined && known !== local.checksum) return undefined;
  const files = walk.slice(index + 1);
  if (files.length > 0 || known !== undefined) return { from: local, files };
  const confirm = index >= 0 ? walk[index] : start.kind === "snapshot" ? start.file : undefined;
  return { from: local, files, confirm };
}

/**
 * Encodes a `base` object as ADR 0002's JSON.
 *
 * @example
 * ```ts
 * import { decodeBase, encodeBase } from "./history.ts";
 * const bytes = encodeBase({ generation: 1n, txid: 0n, checksum: 1n << 63n, node: "a", at: 0 });
 * decodeBase(bytes).txid; // 0n
 * ```
 */
export function encodeBase(base: BaseRecord): Uint8Array {
  checkChecksum(base.checksum, "base checksum");
  return encodeMarker(base);
}

/**
 * Decodes and validates a `base` object; throws {@linkcode HistoryError}
 * (`malformed`) for anything but ADR 0002's JSON.
 *
 * @example
 * ```ts
 * import { decodeBase, encodeBase } from "./history.ts";
 * const base = decodeBase(encodeBase({ generation: 2n, txid: 9n, checksum: 1n << 63n, node: "a", at: 1 }));
 * base.generation; // 2n
 * ```
 */
export function decodeBase(bytes: Uint8Array, key = "base"): BaseRecord {
  const m = decodeMarker(bytes, key);
  return { generation: m.generation, txid: m.txid, checksum: m.checksum, node: m.node, at: m.at };
}

/**
 * Encodes a `deleted` marker as ADR 0002's JSON; its checksum is the empty
 * database's, since the database after a delete is empty.
 *
 * @example
 * ```ts
 * import { decodeDeleted, encodeDeleted } from "./history.ts";
 * const bytes = encodeDeleted({ generation: 3n, txid: 12n, node: "a", at: 0 });
 * decodeDeleted(bytes).txid; // 12n
 * ```
 */
export function encodeDeleted(deleted: DeletedRecord): Uint8Array {
  return encodeMarker({ ...deleted, checksum: EMPTY_DATABASE_CHECKSUM });
}

/**
 * Decodes and validates a `deleted` marker; throws {@linkcode HistoryError}
 * (`malformed`) for anything but ADR 0002's JSON with the empty checksum.
 *
 * @example
 * ```ts
 * import { decodeDeleted, encodeDeleted } from "./history.ts";
 * decodeDeleted(encodeDeleted({ generation: 1n, txid: 4n, node: "b", at: 5 })).node; // "b"
 * ```
 */
export function decodeDeleted(bytes: Uint8Array, key = "deleted"): DeletedRecord {
  const m = decodeMarker(bytes, key);
  if (m.checksum !== EMPTY_DATABASE_CHECKSUM) {
    throw new HistoryError(
      "malformed",
      `${key}: checksum ${hex(m.checksum)}, the database after a delete is empty`,
    );
  }
  return { generation: m.generation, txid: m.txid, node: m.node, at: m.at };
}

function encodeMarker(m: BaseRecord): Uint8Array {
  if (typeof m.node !== "string" || m.node === "") throw new TypeError("node must be a name");
  if (!Number.isSafeInteger(m.at) || m.at < 0) throw new RangeError(`not a time: ${m.at}`);
  return new TextEncoder().encode(JSON.stringify({
    version: MARKER_VERSION,
    generation: formatGeneration(m.generation),
    txid: formatTxid(m.txid),
    checksum: formatTxid(m.checksum),
    node: m.node,
    at: m.at,
  }));
}

function decodeMarker(bytes: Uint8Array, key: string): BaseRecord {
  const fail = (why: string): never => {
    throw new HistoryError("malformed", `${key}: ${why}`);
  };
  let json: unknown;
  try {
    json = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (e) {
    throw new HistoryError("malformed", `${key}: not UTF-8 JSON`, { cause: e });
  }
  if (typeof json !== "object" || json === null || Array.isArray(json)) fail("not an object");
  const o = json as Record<string, unknown>;
  if (o.version !== MARKER_VERSION) fail(`version ${JSON.stringify(o.version)}`);
  const u64 = (field: string): bigint => {
    const value = o[field];
    if (typeof value !== "string" || !HEX64.test(value)) {
      return fail(`${field} ${JSON.stringify(value)} is not 16 lowercase hex digits`);
    }
    return BigInt(`0x${value}`);
  };
  const generation = u64("generation");
  if (generation === 0n) fail("generation 0 (generations start at 1)");
  const txid = u64("txid");
  const checksum = u64("checksum");
  if ((checksum & CHECKSUM_FLAG) === 0n) fail(`checksum ${hex(checksum)} lacks the top bit`);
  if (typeof o.node !== "string" || o.node === "") fail("node is not a name");
  if (!Number.isSafeInteger(o.at) || (o.at as number) < 0) fail(`at ${JSON.stringify(o.at)}`);
  return { generation, txid, checksum, node: o.node as string, at: o.at as number };
}

function checkChecksum(checksum: bigint, what: string): void {
  if ((checksum & CHECKSUM_FLAG) === 0n || checksum > MAX_U64) {
    throw new RangeError(`${what} ${checksum.toString(16)} is not a tracked checksum`);
  }
}

function describeStart(start: RestoreStart): string {
  return start.kind === "snapshot"
    ? `the snapshot ${start.file.key}`
    : `the empty database at TXID ${start.txid}`;
}

function hex(n: bigint): string {
  return n.toString(16).padStart(16, "0");
}

function compare(a: bigint, b: bigint): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function max(a: bigint, b: bigint): bigint {
  return a > b ? a : b;
}
