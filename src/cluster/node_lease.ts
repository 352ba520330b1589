/**
 * A node's own lease: its heartbeat `nodes/<id>`, written every period, each
 * write conditioned on the node's last one (docs/adr/0004-node-leases.md,
 * "Own lease"). The lease is valid `validMs` after the last acknowledged
 * write was sent; a write refused by another writer (a fence, another
 * process with this id, a deleted object) loses it for good.
 *
 * A write whose answer is lost may still have landed; the next write, made
 * `If-Match` the older ETag, is then refused by our own object, not by
 * another writer. So a refusal is followed by a read of the object: if it is
 * byte for byte one of our writes that may have landed (its body names this
 * process's token, so no other writer makes it), the lease goes on from that
 * write; anything else is another writer. This errs on the safe side: a copy
 * of our heartbeat we no longer track counts as another writer, and stopping
 * is always safe.
 *
 * This module holds the lease's state machine: its states, its validity and
 * their timers, the renewals, the release and who is told. The writes
 * themselves (their bodies, conditions, the ones without a verdict and the
 * judgement of a refusal) are in `heartbeat_writes.ts`, the loss they may end
 * in is in `lease_loss.ts`.
 *
 * @module
 */

import type { Bucket, StoredObject } from "../bucket/bucket.ts";
import { PreconditionFailed } from "../bucket/errors.ts";
import { nodeKey } from "../bucket/keys.ts";
import { deadline } from "../bucket/timers.ts";
import type { Logger } from "../log.ts";
import { assert } from "../assert.ts";
import { describeError } from "../describe_error.ts";
import type { Clock, Timer } from "../time/clock.ts";
import {
  type HeartbeatDescription,
  HeartbeatWrites,
  judgeRefusal,
  mayHaveLanded,
  type SentWrite,
} from "./heartbeat_writes.ts";
import type { NodeLeaseLost } from "./lease_loss.ts";
import type { LeaseTiming } from "./lease_timing.ts";
import type { NodeIdChecked } from "./node_id_check.ts";

/**
 * After a refusal that turned out to be against our own landed write, the
 * write is sent again at once, at most this many times in one renewal (2).
 * Each such round is a write that landed with its answer lost; past two in a
 * row the renewal waits for its next period.
 *
 * @example
 * ```ts
 * import { OWN_WRITE_RESENDS } from "./node_lease.ts";
 * console.log(OWN_WRITE_RESENDS); // 2
 * ```
 */
export const OWN_WRITE_RESENDS = 2;

/**
 * Why the lease's validity changed: a write `landed` while it was not valid,
 * it `expired` (no write landed in time), it was `released` (a clean stop
 * gives it up), or it was `lost` to another writer.
 */
export type LeaseChangeCause = "landed" | "expired" | "released" | "lost";

/** What {@linkcode NodeLease} works with. */
export interface NodeLeaseOptions {
  /** The shared bucket. */
  bucket: Bucket;
  /** Times renewals, write deadlines and the lease's end; stamps line 4. */
  clock: Clock;
  /** Told about failed writes, expiries, renewals after them and the loss. */
  log: Logger;
  /** This node's id. */
  nodeId: string;
  /** This process's token, new at every start. */
  processToken: string;
  /** The lease timings (`periodMs`, `validMs`, `writeTimeoutMs`). */
  timing: LeaseTiming;
  /** What to publish, asked at every write. */
  describe: () => HeartbeatDescription;
  /**
   * Called on every change of {@linkcode NodeLease.valid}: true when a write
   * lands while the lease was not valid, false when it runs out (on the
   * clock, at the moment it ends), when it is lost, and when a release
   * begins; `cause` tells which.
   */
  onChange?: (valid: boolean, cause: LeaseChangeCause) => void;
  /** Called once when another writer took the lease; no write follows. */
  onLost?: (reason: NodeLeaseLost) => void;
  /**
   * Called when a landed write makes the lease valid for longer: with
   * {@linkcode NodeLease.validUntil}, the new end (monotonic).
   */
  onExtended?: (validUntil: number) => void;
}

/**
 * Who follows the lease after it was made (the node's reactions, its
 * duties, its executors): {@linkcode NodeLease.subscribe}. Each is called
 * after the options' own callback of the same event, in subscription order.
 */
export interface LeaseListener {
  /** As {@linkcode NodeLeaseOptions.onChange}. */
  changed?(valid: boolean, cause: LeaseChangeCause): void;
  /** As {@linkcode NodeLeaseOptions.onLost}. */
  lost?(reason: NodeLeaseLost): void;
  /** As {@linkcode NodeLeaseOptions.onExtended}. */
  extended?(validUntil: number): void;
}

/** Where the lease is in its life. */
export type NodeLeaseState = "new" | "running" | "releasing" | "released" | "lost" | "closed";

/** What became of one write (after reading back, when it was refused). */
type Outcome = "landed" | "failed" | "lost";

/**
 * The node's own lease, renewed every period from {@linkcode NodeLease.start}
 * until {@linkcode NodeLease.release} or {@linkcode NodeLease.close}.
 *
 * @example Start after the node id check, stop cleanly
 * ```ts
 * import { NodeLease } from "./node_lease.ts";
 * import { leaseTiming } from "./lease_timing.ts";
 * import { MemoryBucket } from "../bucket/memory.ts";
 * import { systemClock } from "../time/clock.ts";
 * import { createLogger } from "../log.ts";
 * const lease = new NodeLease({
 *   bucket: new MemoryBucket(), clock: systemClock, log: createLogger(), nodeId: "a",
 *   processToken: "0123456789abcdef", timing: leaseTiming(),
 *   describe: () => ({ address: "http://a:8080", readsSecrets: false, takesMoved: true,
 *     version: "0.3.0", state: "serving" }),
 *   onChange: (valid) => console.log("lease valid:", valid),
 *   onLost: (reason) => console.log(reason.message),
 * });
 * await lease.start(undefined); // the check saw no object
 * console.log(lease.valid()); // true
 * await lease.release();
 * lease.close();
 * ```
 */
export class NodeLease {
  readonly #bucket: Bucket;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #timing: LeaseTiming;
  readonly #writes: HeartbeatWrites;
  /**
   * The process whose heartbeat the start check read last, until a write of
   * ours lands: a peer's fence of that heartbeat landing between the check
   * and the first write does not count as running (the check saw it lapse).
   */
  #predecessor: { process: string; at: number } | undefined;
  readonly #onChange: (valid: boolean, cause: LeaseChangeCause) => void;
  readonly #onLost: (reason: NodeLeaseLost) => void;
  readonly #onExtended: (validUntil: number) => void;
  readonly #listeners: LeaseListener[] = [];
  readonly #key: string;
  /** Aborts a write or read in flight at `close`. */
  readonly #closing = new AbortController();

  #state: NodeLeaseState = "new";
  /** Waiters for a live write sent after their time to land, by that time. */
  readonly #writeWaiters = new Set<{ after: number; landed: (ok: boolean) => void }>();
  #validUntil = -Infinity;
  #validSince: number | undefined;
  /** Validity as last reported through `onChange`. */
  #reportedValid = false;
  #renewTimer: Timer | undefined;
  #expiryTimer: Timer | undefined;
  /** The renewal in progress, which a release waits for. */
  #inFlight: Promise<unknown> | undefined;
  #lost: NodeLeaseLost | undefined;
  /** Writes in a row that got no verdict, to log an outage once, not every period. */
  #failuresInARow = 0;

  /** A lease for node `nodeId`, process `processToken`; nothing is written before `start`. */
  constructor(options: NodeLeaseOptions) {
    this.#bucket = options.bucket;
    this.#clock = options.clock;
    this.#log = options.log;
    this.#timing = options.timing;
    this.#writes = new HeartbeatWrites({
      nodeId: options.nodeId,
      processToken: options.processToken,
      clock: options.clock,
      describe: options.describe,
    });
    const onChange = options.onChange;
    const onLost = options.onLost;
    const onExtended = options.onExtended;
    this.#onChange = (valid, cause) => {
      onChange?.(valid, cause);
      for (const listener of this.#listeners) listener.changed?.(valid, cause);
    };
    this.#onLost = (reason) => {
      onLost?.(reason);
      for (const listener of this.#listeners) listener.lost?.(reason);
    };
    this.#onExtended = (validUntil) => {
      onExtended?.(validUntil);
      for (const listener of this.#listeners) listener.extended?.(validUntil);
    };
    this.#key = nodeKey(options.nodeId);
  }

  /**
   * Follows the lease's changes, loss and extensions from now on; returns
   * the function that stops following.
   *
   * @example
   * ```ts
   * import { NodeLease } from "./node_lease.ts";
   * import { leaseTiming } from "./lease_timing.ts";
   * import { MemoryBucket } from "../bucket/memory.ts";
   * import { systemClock } from "../time/clock.ts";
   * import { createLogger } from "../log.ts";
   * const lease = new NodeLease({
   *   bucket: new MemoryBucket(), clock: systemClock, log: createLogger(), nodeId: "a",
   *   processToken: "0123456789abcdef", timing: leaseTiming(),
   *   describe: () => ({ address: "http://a:8080", readsSecrets: false, takesMoved: true,
   *     version: "0.3.0", state: "serving" }),
   * });
   * const stop = lease.subscribe({ changed: (valid) => console.log("lease valid:", valid) });
   * stop();
   * lease.close();
   * ```
   */
  subscribe(listener: LeaseListener): () => void {
    this.#listeners.push(listener);
    return () => {
      const at = this.#listeners.indexOf(listener);
      if (at >= 0) this.#listeners.splice(at, 1);
    };
  }

  /**
   * Writes the first heartbeat, conditioned on the object the start check
   * read last (`If-Match` its ETag, or `If-None-Match: *` when it saw none),
   * then renews every period. Resolves once the first write has its outcome,
   * whatever it is: `valid()`, `onChange` and `onLost` tell it.
   *
   * @example
   * ```ts
   * import { NodeLease } from "./node_lease.ts";
   * import { checkNodeId } from "./node_id_check.ts";
   * import { leaseTiming } from "./lease_timing.ts";
   * import { MemoryBucket } from "../bucket/memory.ts";
   * import { systemClock } from "../time/clock.ts";
   * import { createLogger } from "../log.ts";
   * const bucket = new MemoryBucket();
   * const [clock, log, timing] = [systemClock, createLogger(), leaseTiming()];
   * const lease = new NodeLease({ bucket, clock, log, nodeId: "a", processToken: "p1", timing,
   *   describe: () => ({ address: "http://a:8080", readsSecrets: false, takesMoved: true,
   *     version: "0.3.0", state: "serving" }) });
   * await lease.start(await checkNodeId({ bucket, clock, log, nodeId: "a", timing }));
   * lease.close();
   * ```
   */
  async start(after: NodeIdChecked | undefined): Promise<void> {
    assert(this.#state === "new", "a node lease starts once");
    this.#state = "running";
    this.#writes.conditionOn(after?.etag);
    this.#predecessor = after?.predecessor;
    await this.#renew();
  }

  /**
   * Whether the lease is valid now: started, not released, lost or closed,
   * and less than `validMs` since the last acknowledged write was sent.
   *
   * @example
   * ```ts
   * import { NodeLease } from "./node_lease.ts";
   * import { leaseTiming } from "./lease_timing.ts";
   * import { MemoryBucket } from "../bucket/memory.ts";
   * import { systemClock } from "../time/clock.ts";
   * import { createLogger } from "../log.ts";
   * const lease = new NodeLease({ bucket: new MemoryBucket(), clock: systemClock,
   *   log: createLogger(), nodeId: "a", processToken: "p1", timing: leaseTiming(),
   *   describe: () => ({ address: "http://a:8080", readsSecrets: false, takesMoved: true,
   *     version: "0.3.0", state: "serving" }) });
   * console.log(lease.valid()); // false: not started
   * ```
   */
  valid(): boolean {
    return this.#state === "running" && this.#reportedValid &&
      this.#clock.monotonic() < this.#validUntil;
  }

  /**
   * Monotonic time the lease is valid until (sent time of the last
   * acknowledged write plus `validMs`); `-Infinity` before any write landed.
   *
   * @example
   * ```ts
   * import { NodeLease } from "./node_lease.ts";
   * import { leaseTiming } from "./lease_timing.ts";
   * import { MemoryBucket } from "../bucket/memory.ts";
   * import { systemClock } from "../time/clock.ts";
   * import { createLogger } from "../log.ts";
   * const lease = new NodeLease({ bucket: new MemoryBucket(), clock: systemClock,
   *   log: createLogger(), nodeId: "a", processToken: "p1", timing: leaseTiming(),
   *   describe: () => ({ address: "http://a:8080", readsSecrets: false, takesMoved: true,
   *     version: "0.3.0", state: "serving" }) });
   * await lease.start(undefined);
   * console.log(lease.validUntil - systemClock.monotonic() <= 8000); // true
   * lease.close();
   * ```
   */
  get validUntil(): number {
    return this.#validUntil;
  }

  /**
   * Monotonic time the lease last became valid (a write landed while it was
   * not), or undefined if it never was. Membership waits a watch from here
   * before it fences anyone, so a peer that regained the bucket at about the
   * same time has renewed by then.
   *
   * @example
   * ```ts
   * import { NodeLease } from "./node_lease.ts";
   * import { leaseTiming } from "./lease_timing.ts";
   * import { MemoryBucket } from "../bucket/memory.ts";
   * import { systemClock } from "../time/clock.ts";
   * import { createLogger } from "../log.ts";
   * const timing = leaseTiming();
   * const lease = new NodeLease({ bucket: new MemoryBucket(), clock: systemClock,
   *   log: createLogger(), nodeId: "a", processToken: "p1", timing,
   *   describe: () => ({ address: "http://a:8080", readsSecrets: false, takesMoved: true,
   *     version: "0.3.0", state: "serving" }) });
   * await lease.start(undefined);
   * const mayFence = systemClock.monotonic() - (lease.validSince ?? Infinity) >= timing.watchMs;
   * lease.close();
   * ```
   */
  get validSince(): number | undefined {
    return this.#validSince;
  }

  /**
   * Resolves true once a live heartbeat write sent at or after `after` (on
   * `clock.monotonic()`) landed, false if none did within `withinMs`: a peer
   * that refused this node's certificate has seen it live again after such
   * a write and a listing.
   *
   * @example
   * ```ts
   * import { NodeLease } from "./node_lease.ts";
   * import { leaseTiming } from "./lease_timing.ts";
   * import { MemoryBucket } from "../bucket/memory.ts";
   * import { systemClock } from "../time/clock.ts";
   * import { createLogger } from "../log.ts";
   * const timing = leaseTiming(3000);
   * const lease = new NodeLease({ bucket: new MemoryBucket(), clock: systemClock,
   *   log: createLogger(), nodeId: "a", processToken: "p1", timing,
   *   describe: () => ({ address: "http://a:8080", readsSecrets: false, takesMoved: true,
   *     version: "0.3.0", state: "serving" }) });
   * await lease.start(undefined);
   * console.log(await lease.writeLanded(systemClock.monotonic(), 2 * timing.periodMs)); // true
   * lease.close();
   * ```
   */
  writeLanded(after: number, withinMs: number): Promise<boolean> {
    return new Promise((resolve) => {
      const waiter = {
        after,
        landed: (ok: boolean) => {
          timer.cancel();
          this.#writeWaiters.delete(waiter);
          resolve(ok);
        },
      };
      const timer = this.#clock.setTimer(withinMs, () => waiter.landed(false));
      this.#writeWaiters.add(waiter);
    });
  }

  /**
   * Where the lease is: `new`, `running` (renewing, valid or not),
   * `releasing`, `released`, `lost` or `closed`.
   *
   * @example
   * ```ts
   * import { NodeLease } from "./node_lease.ts";
   * import { leaseTiming } from "./lease_timing.ts";
   * import { MemoryBucket } from "../bucket/memory.ts";
   * import { systemClock } from "../time/clock.ts";
   * import { createLogger } from "../log.ts";
   * const lease = new NodeLease({ bucket: new MemoryBucket(), clock: systemClock,
   *   log: createLogger(), nodeId: "a", processToken: "p1", timing: leaseTiming(),
   *   describe: () => ({ address: "http://a:8080", readsSecrets: false, takesMoved: true,
   *     version: "0.3.0", state: "serving" }) });
   * console.log(lease.state); // "new"
   * ```
   */
  get state(): NodeLeaseState {
    return this.#state;
  }

  /**
   * Why the lease was lost, once it was.
   *
   * @example
   * ```ts
   * import { NodeLease } from "./node_lease.ts";
   * import { leaseTiming } from "./lease_timing.ts";
   * import { MemoryBucket } from "../bucket/memory.ts";
   * import { systemClock } from "../time/clock.ts";
   * import { createLogger } from "../log.ts";
   * const lease = new NodeLease({ bucket: new MemoryBucket(), clock: systemClock,
   *   log: createLogger(), nodeId: "a", processToken: "p1", timing: leaseTiming(),
   *   describe: () => ({ address: "http://a:8080", readsSecrets: false, takesMoved: true,
   *     version: "0.3.0", state: "serving" }) });
   * console.log(lease.lost); // undefined
   * ```
   */
  get lost(): NodeLeaseLost | undefined {
    return this.#lost;
  }

  /**
   * The ETag of the heartbeat as this node last wrote it (what a listing
   * shows while nobody else wrote it), or undefined before a write landed.
   *
   * @example
   * ```ts
   * import { NodeLease } from "./node_lease.ts";
   * import { leaseTiming } from "./lease_timing.ts";
   * import { MemoryBucket } from "../bucket/memory.ts";
   * import { systemClock } from "../time/clock.ts";
   * import { createLogger } from "../log.ts";
   * const bucket = new MemoryBucket();
   * const lease = new NodeLease({ bucket, clock: systemClock,
   *   log: createLogger(), nodeId: "a", processToken: "p1", timing: leaseTiming(),
   *   describe: () => ({ address: "http://a:8080", readsSecrets: false, takesMoved: true,
   *     version: "0.3.0", state: "serving" }) });
   * await lease.start(undefined);
   * console.log(lease.etag === (await bucket.head("nodes/a"))?.etag); // true
   * lease.close();
   * ```
   */
  get etag(): string | undefined {
    return this.#writes.lastLiveAt === undefined ? undefined : this.#writes.etag;
  }

  /**
   * Gives the lease up (the clean stop's last step): stops renewing, ends the
   * lease's validity at once (`onChange(false)`), waits for a renewal in
   * flight, then writes the heartbeat `released` with the line 4 of the last
   * live write, `If-Match` the last ETag. Resolves to whether that write
   * landed; one that did not leaves the heartbeat live until a peer fences
   * it. Does nothing (false) unless the lease is running.
   *
   * @example
   * ```ts
   * import { NodeLease } from "./node_lease.ts";
   * import { leaseTiming } from "./lease_timing.ts";
   * import { MemoryBucket } from "../bucket/memory.ts";
   * import { systemClock } from "../time/clock.ts";
   * import { createLogger } from "../log.ts";
   * const lease = new NodeLease({ bucket: new MemoryBucket(), clock: systemClock,
   *   log: createLogger(), nodeId: "a", processToken: "p1", timing: leaseTiming(),
   *   describe: () => ({ address: "http://a:8080", readsSecrets: false, takesMoved: true,
   *     version: "0.3.0", state: "serving" }) });
   * await lease.start(undefined);
   * console.log(await lease.release()); // true
   * lease.close();
   * ```
   */
  async release(): Promise<boolean> {
    if (this.#state !== "running") return false;
    this.#state = "releasing";
    this.#renewTimer?.cancel();
    this.#renewTimer = undefined;
    // From the moment the release is sent, readers may count everything this
    // node holds as free, so the node must not count on its lease any more.
    this.#invalidate("released");
    await this.#inFlight?.catch(() => {});
    if (this.#state !== "releasing") return false;
    const at = this.#writes.releaseAt();
    if (at === undefined) {
      this.#state = "released";
      this.#log.info("no heartbeat of this process landed: nothing to release", {
        key: this.#key,
      });
      return false;
    }
    const outcome = await this.#write("released");
    if (this.#state === "releasing") this.#state = "released";
    if (outcome === "landed") {
      this.#log.info("node lease released", { key: this.#key, at: this.#writes.lastLiveAt });
    } else if (outcome === "failed") {
      this.#log.warn("the release of the node lease did not land; peers will fence it", {
        key: this.#key,
      });
    }
    return outcome === "landed";
  }

  /**
   * Stops every timer and aborts a write in flight; no write or callback
   * follows, and `valid()` is false from now on.
   *
   * @example
   * ```ts
   * import { NodeLease } from "./node_lease.ts";
   * import { leaseTiming } from "./lease_timing.ts";
   * import { MemoryBucket } from "../bucket/memory.ts";
   * import { systemClock } from "../time/clock.ts";
   * import { createLogger } from "../log.ts";
   * const lease = new NodeLease({ bucket: new MemoryBucket(), clock: systemClock,
   *   log: createLogger(), nodeId: "a", processToken: "p1", timing: leaseTiming(),
   *   describe: () => ({ address: "http://a:8080", readsSecrets: false, takesMoved: true,
   *     version: "0.3.0", state: "serving" }) });
   * lease.close();
   * ```
   */
  close(): void {
    if (this.#state === "closed") return;
    this.#state = "closed";
    this.#renewTimer?.cancel();
    this.#expiryTimer?.cancel();
    this.#renewTimer = this.#expiryTimer = undefined;
    for (const waiter of [...this.#writeWaiters]) waiter.landed(false);
    this.#closing.abort(new Error(`${this.#key}: the node lease was closed`));
  }

  /** One renewal, then the next one a period after it was sent. */
  async #renew(): Promise<void> {
    this.#renewTimer = undefined;
    if (this.#state !== "running") return;
    const sentAt = this.#clock.monotonic();
    const write = this.#write("live");
    this.#inFlight = write;
    try {
      await write;
    } catch (e) {
      // Only `describe` or the encoding can throw here (the bucket's errors
      // are outcomes): a renewal timer must not end in an unhandled rejection.
      this.#failed(e, "live");
    } finally {
      this.#inFlight = undefined;
    }
    if (this.#state !== "running") return;
    // A fixed cadence from the send, so a slow write does not push every later one back.
    const delay = Math.max(0, sentAt + this.#timing.periodMs - this.#clock.monotonic());
    this.#renewTimer = this.#clock.setTimer(delay, () => void this.#renew());
  }

  /** Writes the heartbeat with `lease`, resolving a refusal by reading the object back. */
  async #write(lease: "live" | "released"): Promise<Outcome> {
    for (let resends = 0;; resends++) {
      const sent = this.#writes.compose(lease);
      let refusal: PreconditionFailed;
      const conditions = this.#writes.conditions();
      const limit = deadline(
        this.#clock,
        this.#timing.writeTimeoutMs,
        `heartbeat write ${this.#key}`,
        this.#closing.signal,
      );
      try {
        const { etag } = await this.#bucket.put(this.#key, sent.body, {
          ...conditions,
          signal: limit.signal,
        });
        if (this.#closing.signal.aborted) return "failed";
        this.#landed(sent, etag);
        return "landed";
      } catch (e) {
        if (this.#closing.signal.aborted) return "failed";
        if (!(e instanceof PreconditionFailed)) {
          // No verdict: the lease stays as it is and runs out by itself.
          if (mayHaveLanded(e)) this.#writes.remember(sent);
          this.#failed(e, lease);
          return "failed";
        }
        refusal = e;
      } finally {
        limit.done();
      }

      // Refused: by another writer, or by a write of ours whose answer was lost.
      const refused = this.#writes.refused(sent, refusal);
      const found = await this.#readBack();
      if (this.#closing.signal.aborted) return "failed";
      const verdict = judgeRefusal(this.#key, refused, found);
      if (verdict.kind === "undecided") {
        // Ours or not cannot be told yet: treat it as a write without a verdict.
        if (refusal.maybeOwnWrite) this.#writes.remember(sent);
        this.#failed(refusal, lease);
        return "failed";
      }
      if (verdict.kind === "lost") {
        if (this.#predecessorFenced(verdict.reason) && found?.object) {
          this.#predecessor = undefined;
          this.#log.info(
            "the previous process's heartbeat was fenced after the node id check; taking it over",
            { key: this.#key, process: verdict.reason.heartbeat?.process },
          );
          this.#writes.conditionOn(found.object.etag);
          continue;
        }
        this.#lose(verdict.reason);
        return "lost";
      }
      const own = verdict.write;
      this.#log.info("a heartbeat write whose answer was lost had landed; going on from it", {
        key: this.#key,
        at: own.at,
      });
      this.#landed(own, verdict.etag);
      if (own === sent) return "landed";
      if (resends >= OWN_WRITE_RESENDS) return lease === "live" ? "landed" : "failed";
    }
  }

  /**
   * Whether the object that refused the first write is the heartbeat the
   * start check passed on, fenced by a peer since: that process had lapsed
   * (the check saw it unchanged for ttl + grace), so the key is free to take.
   * A release, or any other change, after the check is refused as before.
   */
  #predecessorFenced(reason: NodeLeaseLost): boolean {
    const predecessor = this.#predecessor;
    const heartbeat = reason.heartbeat;
    return predecessor !== undefined && heartbeat?.format === 2 &&
      heartbeat.lease === "fenced" && heartbeat.process === predecessor.process &&
      heartbeat.at === predecessor.at;
  }

  /** The object as it is now; undefined when it cannot be read in time. */
  async #readBack(): Promise<{ object: StoredObject | null } | undefined> {
    const limit = deadline(
      this.#clock,
      this.#timing.writeTimeoutMs,
      `heartbeat read ${this.#key}`,
      this.#closing.signal,
    );
    try {
      return { object: await this.#bucket.get(this.#key, { signal: limit.signal }) };
    } catch (e) {
      this.#log.warn("cannot read the heartbeat back after a refused write", {
        key: this.#key,
        error: describeError(e),
      });
      return undefined;
    } finally {
      limit.done();
    }
  }

  /** `sent` is in the object with `etag`: later writes are conditioned on it. */
  #landed(sent: SentWrite, etag: string): void {
    this.#writes.landed(sent, etag);
    this.#predecessor = undefined;
    if (sent.lease !== "live") return;
    for (const waiter of this.#writeWaiters) {
      if (sent.sentAt >= waiter.after) waiter.landed(true);
    }
    if (this.#failuresInARow > 0) {
      this.#log.info("heartbeat written again", { key: this.#key, failed: this.#failuresInARow });
      this.#failuresInARow = 0;
    }
    if (this.#state === "running") this.#extend(sent.sentAt + this.#timing.validMs);
  }

  #failed(error: unknown, lease: "live" | "released"): void {
    this.#failuresInARow++;
    const fields = {
      key: this.#key,
      lease,
      error: describeError(error),
      validForMs: Math.max(0, this.#validUntil - this.#clock.monotonic()),
    };
    if (this.#failuresInARow === 1) this.#log.warn("heartbeat write failed", fields);
    else this.#log.debug("heartbeat write failed", fields);
  }

  /** The lease is valid until `until` (monotonic), if that is later than before. */
  #extend(until: number): void {
    if (until <= this.#validUntil) return;
    this.#validUntil = until;
    const now = this.#clock.monotonic();
    if (now >= until) return;
    this.#expiryTimer?.cancel();
    this.#expiryTimer = this.#clock.setTimer(until - now, () => this.#expire());
    if (!this.#reportedValid) {
      this.#reportedValid = true;
      this.#validSince = now;
      this.#onChange(true, "landed");
    }
    this.#onExtended(until);
  }

  /** The expiry timer: the lease ends now unless a write extended it meanwhile. */
  #expire(): void {
    this.#expiryTimer = undefined;
    if (this.#state !== "running" || !this.#reportedValid) return;
    const left = this.#validUntil - this.#clock.monotonic();
    if (left > 0) {
      this.#expiryTimer = this.#clock.setTimer(left, () => this.#expire());
      return;
    }
    this.#log.warn("node lease expired: no heartbeat write landed in time", {
      key: this.#key,
      validMs: this.#timing.validMs,
    });
    this.#reportedValid = false;
    this.#onChange(false, "expired");
  }

  /** Ends validity at once (a release or a loss). */
  #invalidate(cause: "released" | "lost"): void {
    this.#expiryTimer?.cancel();
    this.#expiryTimer = undefined;
    this.#validUntil = Math.min(this.#validUntil, this.#clock.monotonic());
    if (this.#reportedValid) {
      this.#reportedValid = false;
      this.#onChange(false, cause);
    }
  }

  #lose(reason: NodeLeaseLost): void {
    if (this.#lost || this.#state === "closed") return;
    this.#lost = reason;
    this.#renewTimer?.cancel();
    this.#renewTimer = undefined;
    this.#invalidate("lost");
    this.#state = "lost";
    this.#log.error("node lease lost", {
      key: this.#key,
      kind: reason.kind,
      reason: reason.detail,
    });
    this.#onLost(reason);
  }
}
