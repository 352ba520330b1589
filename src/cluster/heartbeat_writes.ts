/**
 * This process's writes to its heartbeat `nodes/<id>`: what each says (the
 * node's description, line 4), what the next is conditioned on (the ETag of
 * the last one known to have landed), which were sent on that condition
 * without a verdict and may have landed, and, once a write is refused,
 * whether the object read back is one of them (docs/adr/0004-node-leases.md,
 * "Own lease").
 *
 * These change together, which is why they are kept here and nowhere else: a
 * write that lands becomes the condition, and the writes sent before it,
 * conditioned on older ETags, can no longer land. Apart from the lease's
 * state machine (`node_lease.ts`), which decides when to write and what a
 * verdict does to the lease's validity.
 *
 * @module
 */

import type { StoredObject } from "../bucket/bucket.ts";
import { BucketUnavailable, type PreconditionFailed } from "../bucket/errors.ts";
import { DeadlineExceeded } from "../bucket/timers.ts";
import type { Clock } from "../time/clock.ts";
import { encodeHeartbeat, type Heartbeat } from "./heartbeat.ts";
import { lossOf, NodeLeaseLost } from "./lease_loss.ts";

/**
 * Most writes without an answer the lease remembers as possibly landed (32,
 * about 96 s of renewals with the default timings). A write older than that
 * which lands after all is taken for another writer's: the lease is lost,
 * which is safe (the service manager restarts the node).
 *
 * @example
 * ```ts
 * import { MAX_UNRESOLVED_WRITES } from "./heartbeat_writes.ts";
 * console.log(MAX_UNRESOLVED_WRITES); // 32
 * ```
 */
export const MAX_UNRESOLVED_WRITES = 32;

/**
 * What the node publishes in its heartbeat besides the lease itself: address,
 * cluster address, TLS pin, app, secrets, take, version and serving state.
 */
export type HeartbeatDescription = Omit<
  Heartbeat,
  "format" | "nodeId" | "process" | "at" | "lease" | "fencedBy"
>;

/** A write sent and not acknowledged, which may have landed. */
export interface SentWrite {
  /** The heartbeat's bytes as sent. */
  body: Uint8Array;
  /** Line 4 of the write. */
  at: number;
  /** Monotonic time it was sent. */
  sentAt: number;
  /** Its line 5. */
  lease: "live" | "released";
}

/** A refused write, and the writes of ours the object may be, taken when it was refused. */
export interface RefusedWrite {
  /** Whether the refusal may be against a write of ours whose answer was lost. */
  mayBeOwn: boolean;
  /** The writes without a verdict, then the refused one. */
  candidates: SentWrite[];
}

/**
 * What the object read back says of a refused write: `own`, one of ours
 * landed (with the object's ETag); `lost`, another writer's; `undecided`,
 * it could not be read and the refusal may be against our own write.
 */
export type RefusalVerdict =
  | { kind: "own"; write: SentWrite; etag: string }
  | { kind: "lost"; reason: NodeLeaseLost }
  | { kind: "undecided" };

/** Who writes, and what {@linkcode HeartbeatWrites} asks at every write. */
export interface HeartbeatWriter {
  /** This node's id (line 2). */
  nodeId: string;
  /** This process's token (line 3), new at every start. */
  processToken: string;
  /** Stamps line 4 of a live write, and the send time. */
  clock: Clock;
  /** What to publish, asked at every write. */
  describe: () => HeartbeatDescription;
}

/**
 * This process's writes to its heartbeat, from the first one on.
 *
 * @example
 * ```ts
 * import { HeartbeatWrites } from "./heartbeat_writes.ts";
 * import { MemoryBucket } from "../bucket/memory.ts";
 * import { systemClock } from "../time/clock.ts";
 * const bucket = new MemoryBucket();
 * const writes = new HeartbeatWrites({
 *   nodeId: "a", processToken: "0123456789abcdef", clock: systemClock,
 *   describe: () => ({ address: "http://a:8080", readsSecrets: false, takesMoved: true,
 *     version: "0.3.0", state: "serving" }),
 * });
 * const sent = writes.compose("live");
 * const { etag } = await bucket.put("nodes/a", sent.body, writes.conditions());
 * writes.landed(sent, etag);
 * console.log(writes.lastLiveAt === sent.at); // true
 * ```
 */
export class HeartbeatWrites {
  readonly #writer: HeartbeatWriter;
  /** The condition of the next write: `If-Match` it, or `If-None-Match: *` when undefined. */
  #etag: string | undefined;
  /** Line 4 of the last live write known to be in the object. */
  #lastLiveAt: number | undefined;
  /** Writes sent since the last one known to have landed, that may have landed. */
  #unresolved: SentWrite[] = [];

  /** Writes as `writer`; nothing is conditioned yet (`If-None-Match: *`). */
  constructor(writer: HeartbeatWriter) {
    this.#writer = writer;
  }

  /** The first write is conditioned on the object the start check read last (none: undefined). */
  conditionOn(etag: string | undefined): void {
    this.#etag = etag;
  }

  /** The condition of the next write: ETag of the last write known to have landed, or the start check's. */
  get etag(): string | undefined {
    return this.#etag;
  }

  /** Line 4 of the last live write known to be in the object; undefined before one landed. */
  get lastLiveAt(): number | undefined {
    return this.#lastLiveAt;
  }

  /**
   * Line 4 a release carries: the last live write's known to have landed,
   * else the last one's that may have; undefined when no live write may have.
   */
  releaseAt(): number | undefined {
    return this.#lastLiveAt ?? this.#lastLiveSent()?.at;
  }

  /** The next write's conditions: `If-Match` the last landed ETag, or `If-None-Match: *`. */
  conditions(): { ifNoneMatch: "*" } | { ifMatch: string } {
    return this.#etag === undefined ? { ifNoneMatch: "*" as const } : { ifMatch: this.#etag };
  }

  /** The next write's body, line 4 the send time for a live write, the last live one's otherwise. */
  compose(lease: "live" | "released"): SentWrite {
    const { clock } = this.#writer;
    const at = lease === "live" ? clock.now() : this.#lastLiveAt ?? this.#lastLiveSent()!.at;
    const body = encodeHeartbeat({
      ...this.#writer.describe(),
      format: 2,
      nodeId: this.#writer.nodeId,
      process: this.#writer.processToken,
      at,
      lease,
    });
    return { body, at, sentAt: clock.monotonic(), lease };
  }

  /** `sent` is in the object with `etag`: later writes are conditioned on it. */
  landed(sent: SentWrite, etag: string): void {
    this.#etag = etag;
    // Writes sent before it were conditioned on older ETags: none of them can land now.
    this.#unresolved = [];
    if (sent.lease === "live") this.#lastLiveAt = sent.at;
  }

  /** `sent` got no verdict but may have landed: a later refusal may be against it. */
  remember(sent: SentWrite): void {
    this.#unresolved.push(sent);
    if (this.#unresolved.length > MAX_UNRESOLVED_WRITES) this.#unresolved.shift();
  }

  /** `sent` was refused with `refusal`: what the object may be, before it is read back. */
  refused(sent: SentWrite, refusal: PreconditionFailed): RefusedWrite {
    return {
      mayBeOwn: this.#unresolved.length > 0 || refusal.maybeOwnWrite,
      candidates: [...this.#unresolved, sent],
    };
  }

  #lastLiveSent(): SentWrite | undefined {
    return this.#unresolved.findLast((w) => w.lease === "live");
  }
}

/**
 * What a refused write was refused by, from the object at `key` read back
 * (`found`; undefined when it could not be read in time). Only a copy byte
 * for byte of one of our writes that may have landed is ours: its body names
 * this process's token, so no other writer makes it. Anything else is
 * another writer, which errs on the safe side (a copy of our heartbeat no
 * longer tracked counts as another writer, and stopping is always safe).
 *
 * @example
 * ```ts
 * import { judgeRefusal } from "./heartbeat_writes.ts";
 * const sent = { body: new Uint8Array([1]), at: 0, sentAt: 0, lease: "live" as const };
 * const found = { object: { body: new Uint8Array([1]), etag: '"e1"', lastModified: 0 } };
 * judgeRefusal("nodes/a", { mayBeOwn: false, candidates: [sent] }, found).kind; // "own"
 * ```
 */
export function judgeRefusal(
  key: string,
  refused: RefusedWrite,
  found: { object: StoredObject | null } | undefined,
): RefusalVerdict {
  if (found === undefined) {
    return refused.mayBeOwn
      ? { kind: "undecided" }
      : { kind: "lost", reason: new NodeLeaseLost(key, "unreadable") };
  }
  const object = found.object;
  const own = object && refused.candidates.find((w) => equalBytes(w.body, object.body));
  if (!own) return { kind: "lost", reason: lossOf(key, object) };
  return { kind: "own", write: own, etag: object!.etag };
}

/**
 * Whether a write that failed without a verdict may still have been applied.
 *
 * @example
 * ```ts
 * import { mayHaveLanded } from "./heartbeat_writes.ts";
 * import { BucketUnavailable } from "../bucket/errors.ts";
 * mayHaveLanded(new BucketUnavailable("PUT nodes/a: reset", { ambiguous: true })); // true
 * ```
 */
export function mayHaveLanded(e: unknown): boolean {
  return e instanceof DeadlineExceeded || (e instanceof BucketUnavailable && e.ambiguous);
}

function equalBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}
