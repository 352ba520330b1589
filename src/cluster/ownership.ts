/**
 * Ownership records: the object `owners/<tenant>/<class>/<name>` that names
 * the node (and its process) holding an actor, with a generation of its own
 * for every hold (ADR 0002). A node writes it when it takes the actor and
 * when it gives it up; there are no renewals while the actor stays in memory.
 *
 * Every write is conditional on what was read (`If-None-Match: *` or
 * `If-Match`), so two nodes can never both believe a take succeeded: the one
 * whose write lands second is refused and reads again. Generations strictly
 * increase with every hold, so a record's ETag never comes back and "the ETag
 * is still the one my take wrote" means "nobody wrote since".
 *
 * @module
 */

import type { Bucket } from "../bucket/bucket.ts";
import { BucketRequestError, BucketUnavailable, PreconditionFailed } from "../bucket/errors.ts";
import type { ActorKey } from "../actors/key.ts";
import { ownerKey } from "../bucket/keys.ts";
import { DeadlineExceeded } from "../bucket/timers.ts";
import { uploadWithAttempts } from "../bucket/upload.ts";
import type { Logger } from "../log.ts";
import { describeError } from "../describe_error.ts";
import type { Clock, Timer } from "../time/clock.ts";

/**
 * The record format this code reads and writes.
 *
 * @example
 * ```ts
 * import { OWNER_RECORD_VERSION } from "./ownership.ts";
 * console.log(OWNER_RECORD_VERSION); // 1
 * ```
 */
export const OWNER_RECORD_VERSION = 1;

/**
 * How many times a take whose write was refused (another writer landed
 * between its read and its write) reads again and decides again before it
 * gives up with {@linkcode HeldElsewhere} (3).
 *
 * @example
 * ```ts
 * import { TAKE_MAX_RACES } from "./ownership.ts";
 * console.log(TAKE_MAX_RACES); // 3
 * ```
 */
export const TAKE_MAX_RACES = 3;

/**
 * Pause before the first background retry of a release that did not land
 * (1 s); each later retry waits twice as long, up to
 * {@linkcode RELEASE_RETRY_MAX_MS}.
 *
 * @example
 * ```ts
 * import { RELEASE_RETRY_FIRST_MS } from "./ownership.ts";
 * console.log(RELEASE_RETRY_FIRST_MS); // 1000
 * ```
 */
export const RELEASE_RETRY_FIRST_MS = 1_000;

/**
 * Longest pause between two background retries of a release (30 s).
 *
 * @example
 * ```ts
 * import { RELEASE_RETRY_MAX_MS } from "./ownership.ts";
 * console.log(RELEASE_RETRY_MAX_MS); // 30000
 * ```
 */
export const RELEASE_RETRY_MAX_MS = 30_000;

/**
 * Most releases waiting for a background retry at once (10,000): past it the
 * oldest is dropped (logged), so a long outage cannot grow memory without
 * bound. A dropped release leaves the record naming this node until the node
 * takes the actor again or its released heartbeat frees it.
 *
 * @example
 * ```ts
 * import { RELEASE_MAX_PENDING } from "./ownership.ts";
 * console.log(RELEASE_MAX_PENDING); // 10000
 * ```
 */
export const RELEASE_MAX_PENDING = 10_000;

/** Largest generation the 16 hex digits can carry. */
const MAX_GENERATION = 0xffff_ffff_ffff_ffffn;
/** The exact shape of a generation in a record. */
const GENERATION_PATTERN = /^[0-9a-f]{16}$/;
const HEX_DIGITS = 16;

/** An ownership record, decoded. */
export interface OwnerRecord {
  /** Always {@linkcode OWNER_RECORD_VERSION}. */
  version: 1;
  /** The id of the node that holds (or last held) the actor. */
  node: string;
  /** The token of that node's process, new at every start. */
  process: string;
  /** The generation of the hold, 1 or more. */
  generation: bigint;
  /** `held` while the node has the actor; `released` once it gave it up. */
  state: "held" | "released";
  /** When the record was written, in ms since the epoch (the writer's clock). */
  at: number;
}

/** One hold of an actor: what {@linkcode OwnershipRecords.take} wrote. */
export interface Hold {
  /** The actor held. */
  readonly actor: ActorKey;
  /** The generation of this hold. */
  readonly generation: bigint;
  /** The ETag of the record the take wrote: the hold lasts while the record keeps it. */
  readonly etag: string;
  /** The `at` the take wrote, in ms since the epoch. */
  readonly takenAt: number;
  /**
   * Whose record the take replaced (the hold of the generation before), or
   * undefined for the actor's first take: a node with sockets of the actor
   * open learns from it whether another process held it since its own hold.
   */
  readonly previous?: { readonly node: string; readonly process: string };
}

/**
 * The actor is held by another node that may not be taken from, or the take
 * lost {@linkcode TAKE_MAX_RACES} races in a row; `record` is the record read
 * last.
 *
 * @example
 * ```ts
 * import { HeldElsewhere } from "./ownership.ts";
 * const e = new HeldElsewhere("owners/t/c/n", {
 *   version: 1, node: "b", process: "p", generation: 3n, state: "held", at: 0,
 * });
 * console.log(e.node, e.generation); // "b" 3n
 * ```
 */
export class HeldElsewhere extends Error {
  /** Always `"HeldElsewhere"`, for logs and structured errors. */
  override name = "HeldElsewhere";
  /** The ownership record's key. */
  readonly key: string;
  /** The record read last. */
  readonly record: OwnerRecord;
  /** Writes of this take that another writer beat. */
  readonly races: number;

  /** Describes `record` at `key` as the reason a take did not happen. */
  constructor(key: string, record: OwnerRecord, races = 0) {
    super(
      `${key}: held by node ${record.node} (process ${record.process}) at generation ` +
        `${record.generation}, state ${record.state}` +
        (races > 0 ? ` (after ${races} lost races)` : ""),
    );
    this.key = key;
    this.record = record;
    this.races = races;
  }

  /** The node the record names. */
  get node(): string {
    return this.record.node;
  }

  /** The process the record names. */
  get process(): string {
    return this.record.process;
  }

  /** The generation of the record. */
  get generation(): bigint {
    return this.record.generation;
  }
}

/**
 * An ownership record this code cannot read. It is never overwritten: a
 * record a newer version wrote, or a damaged one, needs a person, not a
 * guess that could give one actor two owners.
 *
 * @example
 * ```ts
 * import { MalformedRecord } from "./ownership.ts";
 * const e = new MalformedRecord("owners/t/c/n", "not JSON");
 * console.log(e.message); // "owners/t/c/n: malformed ownership record: not JSON"
 * ```
 */
export class MalformedRecord extends Error {
  /** Always `"MalformedRecord"`, for logs and structured errors. */
  override name = "MalformedRecord";
  /** The record's key, when known. */
  readonly key: string | undefined;
  /** What is wrong with it. */
  readonly problem: string;

  /** Describes the `problem` of the record at `key`. */
  constructor(key: string | undefined, problem: string) {
    super(`${key ?? "(unknown key)"}: malformed ownership record: ${problem}`);
    this.key = key;
    this.problem = problem;
  }
}

/**
 * The bytes of a record: JSON in UTF-8, the generation as 16 lowercase hex
 * digits (it may exceed 2^53).
 *
 * @example
 * ```ts
 * import { encodeOwnerRecord } from "./ownership.ts";
 * const bytes = encodeOwnerRecord({
 *   version: 1, node: "a", process: "p1", generation: 1n, state: "held", at: 1700000000000,
 * });
 * console.log(new TextDecoder().decode(bytes).includes('"0000000000000001"')); // true
 * ```
 */
export function encodeOwnerRecord(record: OwnerRecord): Uint8Array {
  if (record.generation < 1n || record.generation > MAX_GENERATION) {
    throw new RangeError(`not a generation of an ownership record: ${record.generation}`);
  }
  return new TextEncoder().encode(JSON.stringify({
    version: record.version,
    node: record.node,
    process: record.process,
    generation: record.generation.toString(16).padStart(HEX_DIGITS, "0"),
    state: record.state,
    at: record.at,
  }));
}

/**
 * Reads a record's bytes; throws {@linkcode MalformedRecord} (naming `key`)
 * for anything but a version-1 record with every field well formed. Fields
 * it does not know are ignored.
 *
 * @example
 * ```ts
 * import { decodeOwnerRecord, encodeOwnerRecord } from "./ownership.ts";
 * const record = decodeOwnerRecord(encodeOwnerRecord({
 *   version: 1, node: "a", process: "p1", generation: 2n, state: "released", at: 0,
 * }));
 * console.log(record.generation); // 2n
 * ```
 */
export function decodeOwnerRecord(bytes: Uint8Array, key?: string): OwnerRecord {
  const bad = (problem: string) => new MalformedRecord(key, problem);
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw bad("not UTF-8");
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw bad("not JSON");
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw bad("not a JSON object");
  }
  const fields = value as Record<string, unknown>;
  if (fields.version !== OWNER_RECORD_VERSION) {
    throw bad(`version ${JSON.stringify(fields.version)}, expected ${OWNER_RECORD_VERSION}`);
  }
  if (typeof fields.node !== "string" || fields.node === "") throw bad("no node id");
  if (typeof fields.process !== "string" || fields.process === "") {
    throw bad("no process token");
  }
  const generation = fields.generation;
  if (typeof generation !== "string" || !GENERATION_PATTERN.test(generation)) {
    throw bad(`generation ${JSON.stringify(generation)} is not 16 lowercase hex digits`);
  }
  const parsed = BigInt(`0x${generation}`);
  if (parsed < 1n) throw bad("generation 0 (generations start at 1)");
  if (fields.state !== "held" && fields.state !== "released") {
    throw bad(`state ${JSON.stringify(fields.state)}, expected "held" or "released"`);
  }
  if (typeof fields.at !== "number" || !Number.isFinite(fields.at)) {
    throw bad(`at ${JSON.stringify(fields.at)} is not a time`);
  }
  return {
    version: OWNER_RECORD_VERSION,
    node: fields.node,
    process: fields.process,
    generation: parsed,
    state: fields.state,
    at: fields.at,
  };
}

/** What {@linkcode OwnershipRecords} works with. */
export interface OwnershipRecordsOptions {
  /** The shared bucket. */
  bucket: Bucket;
  /** Stamps records and times the background retries of releases. */
  clock: Clock;
  /** This node's id, written into every record it takes. */
  nodeId: string;
  /** This process's token, new at every start of the node. */
  processToken: string;
  /** Told about releases retried, landed late or dropped. */
  log: Logger;
  /** Cap on pending background releases; default {@linkcode RELEASE_MAX_PENDING} (for tests). */
  maxPendingReleases?: number;
  /** Told of each take that landed and each release begun (the simulator's invariants). */
  observer?: OwnershipObserver;
}

/**
 * What this node's holds do, for whoever watches them (the simulator).
 * Called synchronously, as it happens.
 *
 * @example
 * ```ts
 * import type { OwnershipObserver } from "./ownership.ts";
 * const observer: OwnershipObserver = {
 *   took: (hold) => console.log("took", hold.actor.name, hold.generation),
 *   releasing: (hold) => console.log("releases", hold.actor.name),
 * };
 * ```
 */
export interface OwnershipObserver {
  /** A take landed: this node holds `hold.actor` now (before the taker learns it). */
  took?(hold: Hold): void;
  /** A release of `hold` begins (whether it lands or not). */
  releasing?(hold: Hold): void;
}

/** How {@linkcode OwnershipRecords.take} decides. */
export interface TakeOptions {
  /**
   * Whether a record another node holds may be taken over (its node is
   * fenced, stopped, …). Not asked for a released record or one naming this
   * node.
   */
  canTakeFrom: (record: OwnerRecord) => boolean | Promise<boolean>;
  /** Abandons the take: it rejects with the signal's reason. */
  signal?: AbortSignal;
  /**
   * Asked right before each write of the record: false abandons the take
   * with `TakeNotAllowed`. A cluster node answers whether its lease is
   * valid, so a process that paused with a take in flight, and was replaced
   * meanwhile by a new process of its node id, does not supersede the new
   * process's hold when it resumes.
   */
  mayWrite?: () => boolean;
}

/**
 * A take abandoned before its write because `TakeOptions.mayWrite` said no.
 *
 * @example
 * ```ts
 * import { TakeNotAllowed } from "./ownership.ts";
 * const e = new TakeNotAllowed("owners/t/c/n");
 * console.log(e.name); // "TakeNotAllowed"
 * ```
 */
export class TakeNotAllowed extends Error {
  override name = "TakeNotAllowed";
  /** @param key The record the take would have written. */
  constructor(key: string) {
    super(
      `${key}: not taken: this node may not write ownership records now (its lease is not valid)`,
    );
  }
}

/** A release that did not land, waiting for its next background try. */
interface PendingRelease {
  hold: Hold;
  body: Uint8Array;
  /** Pause before the next try. */
  delayMs: number;
  timer?: Timer;
  /** A try is running: whoever re-arms must leave the timer to it. */
  inFlight: boolean;
}

/**
 * Takes, checks and releases this node's holds of actors through their
 * ownership records.
 *
 * @example Taking an actor, checking the hold, giving it up
 * ```ts
 * import { OwnershipRecords } from "./ownership.ts";
 * import { MemoryBucket } from "../bucket/memory.ts";
 * import { systemClock } from "../time/clock.ts";
 * import { createLogger } from "../log.ts";
 * const records = new OwnershipRecords({
 *   bucket: new MemoryBucket(), clock: systemClock, nodeId: "a", processToken: "p1",
 *   log: createLogger(),
 * });
 * const actor = { tenant: "acme", class: "room", name: "lobby" };
 * const hold = await records.take(actor, { canTakeFrom: () => false });
 * console.log(hold.generation, await records.stillHolds(hold)); // 1n true
 * await records.release(hold);
 * records.close();
 * ```
 */
export class OwnershipRecords {
  readonly #bucket: Bucket;
  readonly #clock: Clock;
  readonly #nodeId: string;
  readonly #processToken: string;
  readonly #log: Logger;
  readonly #maxPending: number;
  readonly #observer: OwnershipObserver | undefined;
  /** By record key, oldest first (a Map keeps insertion order). */
  readonly #pending = new Map<string, PendingRelease>();
  /** Aborts background tries still running at `close`. */
  readonly #closing = new AbortController();

  /** Records for node `nodeId`, process `processToken`. */
  constructor(options: OwnershipRecordsOptions) {
    this.#bucket = options.bucket;
    this.#clock = options.clock;
    this.#nodeId = options.nodeId;
    this.#processToken = options.processToken;
    this.#log = options.log;
    this.#maxPending = options.maxPendingReleases ?? RELEASE_MAX_PENDING;
    this.#observer = options.observer;
  }

  /**
   * Releases waiting for a background retry.
   *
   * @example
   * ```ts
   * import { OwnershipRecords } from "./ownership.ts";
   * import { MemoryBucket } from "../bucket/memory.ts";
   * import { systemClock } from "../time/clock.ts";
   * import { createLogger } from "../log.ts";
   * const records = new OwnershipRecords({
   *   bucket: new MemoryBucket(), clock: systemClock, nodeId: "a", processToken: "p1",
   *   log: createLogger(),
   * });
   * console.log(records.pendingReleases); // 0
   * ```
   */
  get pendingReleases(): number {
    return this.#pending.size;
  }

  /**
   * Takes `actor`: creates its record at generation 1, or replaces a record
   * that is released, names this node (a restarted process taking back its
   * own), or that `canTakeFrom` allows, at the next generation. Any earlier
   * hold of this node is over once it returns.
   *
   * Throws {@linkcode HeldElsewhere} when another node holds it and may not
   * be taken from, or after {@linkcode TAKE_MAX_RACES} lost races;
   * {@linkcode MalformedRecord} for a record it cannot read (left as it is);
   * `BucketUnavailable` or `BucketRequestError` from the bucket.
   *
   * @example
   * ```ts
   * import { HeldElsewhere, OwnershipRecords } from "./ownership.ts";
   * import { MemoryBucket } from "../bucket/memory.ts";
   * import { systemClock } from "../time/clock.ts";
   * import { createLogger } from "../log.ts";
   * const bucket = new MemoryBucket();
   * const log = createLogger();
   * const clock = systemClock;
   * const a = new OwnershipRecords({ bucket, clock, nodeId: "a", processToken: "1", log });
   * const b = new OwnershipRecords({ bucket, clock, nodeId: "b", processToken: "2", log });
   * const actor = { tenant: "t", class: "c", name: "n" };
   * await a.take(actor, { canTakeFrom: () => false });
   * const refused = await b.take(actor, { canTakeFrom: () => false }).catch((e) => e);
   * console.log(refused instanceof HeldElsewhere); // true
   * ```
   */
  async take(actor: ActorKey, options: TakeOptions): Promise<Hold> {
    const key = ownerKey(actor);
    // The take supersedes a release of this actor still being retried: stop
    // its timer so the two do not trade writes; it resumes if the take fails.
    const pending = this.#pending.get(key);
    if (pending) {
      pending.timer?.cancel();
      pending.timer = undefined;
      this.#pending.delete(key);
    }
    try {
      const hold = await this.#take(key, actor, options);
      if (pending) {
        this.#log.debug("take superseded a pending release", {
          key,
          released: pending.hold.generation,
          generation: hold.generation,
        });
      }
      this.#observer?.took?.(hold);
      return hold;
    } catch (e) {
      if (pending && !this.#closing.signal.aborted && !this.#pending.has(key)) {
        this.#admit(key, pending);
        if (!pending.inFlight) this.#arm(key, pending);
      }
      throw e;
    }
  }

  async #take(key: string, actor: ActorKey, options: TakeOptions): Promise<Hold> {
    const { canTakeFrom, signal, mayWrite } = options;
    const beforeAttempt = mayWrite
      ? () => {
        if (!mayWrite()) throw new TakeNotAllowed(key);
      }
      : undefined;
    let lastRecord: OwnerRecord | undefined;
    for (let races = 0;; races++) {
      signal?.throwIfAborted();
      const current = await this.#bucket.get(key, { signal });
      const record = current ? decodeOwnerRecord(current.body, key) : undefined;
      if (record) {
        lastRecord = record;
        const takeable = record.state === "released" || record.node === this.#nodeId ||
          await canTakeFrom(record);
        if (!takeable) throw new HeldElsewhere(key, record, races);
      }
      if (races === TAKE_MAX_RACES) {
        if (lastRecord) throw new HeldElsewhere(key, record ?? lastRecord, races);
        // Only a delete between a refused create and the reads after it gets
        // here, and nothing deletes ownership records.
        throw new Error(`${key}: the ownership record vanished after ${races} refused creates`);
      }
      const generation = record ? record.generation + 1n : 1n;
      const at = this.#clock.now();
      const body = encodeOwnerRecord({
        version: OWNER_RECORD_VERSION,
        node: this.#nodeId,
        process: this.#processToken,
        generation,
        state: "held",
        at,
      });
      const conditions = current ? { ifMatch: current.etag } : { ifNoneMatch: "*" as const };
      try {
        const { etag } = await uploadWithAttempts(
          this.#bucket,
          key,
          body,
          { ...conditions, signal, beforeAttempt },
          this.#clock,
        );
        const previous = record && { node: record.node, process: record.process };
        return { actor, generation, etag, takenAt: at, ...(previous ? { previous } : {}) };
      } catch (e) {
        if (!(e instanceof PreconditionFailed)) throw e;
        // Another writer landed between our read and our write: decide again on what it wrote.
      }
    }
  }

  /**
   * Whether `hold` still stands: one `head` of the record, true only when its
   * ETag is the one the take wrote (nothing was written since). Throws
   * `BucketUnavailable` when the bucket does not answer: that is not a no.
   *
   * @example
   * ```ts
   * import { OwnershipRecords } from "./ownership.ts";
   * import { MemoryBucket } from "../bucket/memory.ts";
   * import { systemClock } from "../time/clock.ts";
   * import { createLogger } from "../log.ts";
   * const records = new OwnershipRecords({
   *   bucket: new MemoryBucket(), clock: systemClock, nodeId: "a", processToken: "p1",
   *   log: createLogger(),
   * });
   * const actor = { tenant: "t", class: "c", name: "n" };
   * const hold = await records.take(actor, { canTakeFrom: () => false });
   * console.log(await records.stillHolds(hold)); // true
   * ```
   */
  async stillHolds(hold: Hold, options: { signal?: AbortSignal } = {}): Promise<boolean> {
    const info = await this.#bucket.head(ownerKey(hold.actor), options);
    return info !== null && info.etag === hold.etag;
  }

  /**
   * Reads an actor's record, to route a request for it: `undefined` when it
   * has none. Throws `MalformedRecord` for one that cannot be read.
   *
   * @example
   * ```ts
   * import { OwnershipRecords } from "./ownership.ts";
   * import { MemoryBucket } from "../bucket/memory.ts";
   * import { systemClock } from "../time/clock.ts";
   * import { createLogger } from "../log.ts";
   * const records = new OwnershipRecords({
   *   bucket: new MemoryBucket(), clock: systemClock, nodeId: "a", processToken: "p1",
   *   log: createLogger(),
   * });
   * await records.read({ tenant: "t", class: "c", name: "n" }); // undefined
   * ```
   */
  async read(
    actor: ActorKey,
    options: { signal?: AbortSignal } = {},
  ): Promise<OwnerRecord | undefined> {
    const key = ownerKey(actor);
    const current = await this.#bucket.get(key, options);
    return current ? decodeOwnerRecord(current.body, key) : undefined;
  }

  /**
   * Gives `hold` up: writes the record `released` at the same generation, on
   * condition that it is still the one the take wrote. A refusal means
   * another take already replaced it: nothing is left to release. A release
   * that fails otherwise resolves all the same and is retried in the
   * background (1 s, doubling to 30 s) until it lands, is superseded by a
   * take of the same actor, or `close` is called; until then the record
   * keeps naming this node.
   *
   * @example
   * ```ts
   * import { OwnershipRecords } from "./ownership.ts";
   * import { MemoryBucket } from "../bucket/memory.ts";
   * import { systemClock } from "../time/clock.ts";
   * import { createLogger } from "../log.ts";
   * const records = new OwnershipRecords({
   *   bucket: new MemoryBucket(), clock: systemClock, nodeId: "a", processToken: "p1",
   *   log: createLogger(),
   * });
   * const actor = { tenant: "t", class: "c", name: "n" };
   * const hold = await records.take(actor, { canTakeFrom: () => false });
   * await records.release(hold);
   * records.close();
   * ```
   */
  async release(hold: Hold): Promise<void> {
    this.#observer?.releasing?.(hold);
    const key = ownerKey(hold.actor);
    const body = encodeOwnerRecord({
      version: OWNER_RECORD_VERSION,
      node: this.#nodeId,
      process: this.#processToken,
      generation: hold.generation,
      state: "released",
      at: this.#clock.now(),
    });
    // A newer release of the same actor replaces an older one still pending.
    const older = this.#pending.get(key);
    if (older) {
      older.timer?.cancel();
      this.#pending.delete(key);
    }
    try {
      await uploadWithAttempts(this.#bucket, key, body, { ifMatch: hold.etag }, this.#clock);
    } catch (e) {
      if (e instanceof PreconditionFailed) {
        this.#log.debug("release: the record was replaced since the take; nothing to release", {
          key,
          generation: hold.generation,
        });
        return;
      }
      if (!retriable(e)) throw e;
      if (this.#closing.signal.aborted) {
        this.#log.warn("release did not land and is not retried: closed", {
          key,
          generation: hold.generation,
          error: describeError(e),
        });
        return;
      }
      this.#log.warn("release did not land; retrying in the background", {
        key,
        generation: hold.generation,
        error: describeError(e),
      });
      const pending: PendingRelease = {
        hold,
        body,
        delayMs: RELEASE_RETRY_FIRST_MS,
        inFlight: false,
      };
      this.#admit(key, pending);
      this.#arm(key, pending);
    }
  }

  /**
   * Stops every background retry of a release, and aborts those running.
   * Their records keep naming this node.
   *
   * @example
   * ```ts
   * import { OwnershipRecords } from "./ownership.ts";
   * import { MemoryBucket } from "../bucket/memory.ts";
   * import { systemClock } from "../time/clock.ts";
   * import { createLogger } from "../log.ts";
   * const records = new OwnershipRecords({
   *   bucket: new MemoryBucket(), clock: systemClock, nodeId: "a", processToken: "p1",
   *   log: createLogger(),
   * });
   * records.close();
   * ```
   */
  close(): void {
    if (this.#pending.size > 0) {
      this.#log.info("closing with releases not landed", { pending: this.#pending.size });
    }
    for (const pending of this.#pending.values()) pending.timer?.cancel();
    this.#pending.clear();
    this.#closing.abort(new Error("ownership records closed"));
  }

  /** Adds `pending` as the newest, dropping the oldest past the cap. */
  #admit(key: string, pending: PendingRelease): void {
    this.#pending.set(key, pending);
    while (this.#pending.size > this.#maxPending) {
      const [oldestKey, oldest] = this.#pending.entries().next().value!;
      oldest.timer?.cancel();
      this.#pending.delete(oldestKey);
      this.#log.warn("too many releases pending: dropped the oldest; its record keeps naming us", {
        key: oldestKey,
        generation: oldest.hold.generation,
        max: this.#maxPending,
      });
    }
  }

  #arm(key: string, pending: PendingRelease): void {
    pending.timer = this.#clock.setTimer(pending.delayMs, () => {
      pending.timer = undefined;
      void this.#retry(key, pending);
    });
  }

  async #retry(key: string, pending: PendingRelease): Promise<void> {
    if (this.#pending.get(key) !== pending) return;
    pending.inFlight = true;
    let outcome: "landed" | "superseded" | "failed";
    let error: unknown;
    try {
      await uploadWithAttempts(this.#bucket, key, pending.body, {
        ifMatch: pending.hold.etag,
        signal: this.#closing.signal,
      }, this.#clock);
      outcome = "landed";
    } catch (e) {
      outcome = e instanceof PreconditionFailed ? "superseded" : "failed";
      error = e;
    } finally {
      pending.inFlight = false;
    }
    // Superseded by a take, replaced by a newer release, dropped, or closed meanwhile.
    if (this.#pending.get(key) !== pending) return;
    const fields = { key, generation: pending.hold.generation };
    if (outcome === "landed") {
      this.#pending.delete(key);
      this.#log.info("release landed on a background retry", fields);
    } else if (outcome === "superseded") {
      this.#pending.delete(key);
      this.#log.debug(
        "release: the record was replaced since the take; nothing to release",
        fields,
      );
    } else if (!retriable(error)) {
      this.#pending.delete(key);
      this.#log.error("release failed for good; its record keeps naming us", {
        ...fields,
        error: describeError(error),
      });
    } else {
      pending.delayMs = Math.min(pending.delayMs * 2, RELEASE_RETRY_MAX_MS);
      this.#log.debug("release retry did not land", {
        ...fields,
        nextMs: pending.delayMs,
        error: describeError(error),
      });
      this.#arm(key, pending);
    }
  }
}

/** Failures a later try may not meet: an outage, a timeout, a refusal someone may fix. */
function retriable(e: unknown): boolean {
  return e instanceof BucketUnavailable || e instanceof BucketRequestError ||
    e instanceof DeadlineExceeded;
}
