/**
 * Membership: this node's view of the heartbeats under `nodes/`, listed
 * every heartbeat period, and the fences of the peers that stopped writing
 * theirs (docs/adr/0004-node-leases.md, "Liveness" and "Fencing"), which
 * the duty of src/cluster/duties/fence_peers.ts writes after each round
 * while this node's lease is valid.
 *
 * A fence is always written `If-Match` the ETag this node watched, so it
 * lands only if the peer wrote nothing since: a peer that renews its lease is
 * never taken from, however late the renewal is seen here. The three waits
 * before a fence cover what the condition cannot:
 *
 * - the peer's last write is at least ttl + grace old on this node's clock,
 *   so with up to the tolerated skew its own lease (ttl − safety after that
 *   write was sent) has run out;
 * - this node saw the same ETag for the watch (a period plus a write
 *   timeout), so a peer whose clock is behind, making its line 4 look old,
 *   but which still writes, is seen writing first;
 * - this node's own lease has been valid for a watch, so after an outage
 *   that cut every node off, the peers that regained the bucket together
 *   with it have renewed before it judges them.
 *
 * @module
 */

import { type Bucket, listAll, type ObjectInfo } from "../bucket/bucket.ts";
import { PreconditionFailed } from "../bucket/errors.ts";
import { NODES_PREFIX } from "../bucket/keys.ts";
import { deadline, raceSignal } from "../bucket/timers.ts";
import type { Logger } from "../log.ts";
import { describeError } from "../describe_error.ts";
import type { Clock, Timer } from "../time/clock.ts";
import { decodeHeartbeat, type Heartbeat, isLive } from "./heartbeat.ts";
import type { LeaseTiming } from "./lease_timing.ts";
import { isNodeId } from "../node_id.ts";

/**
 * Heartbeats read at once in a listing round (32): with a thousand nodes a
 * round reads about a thousand changed heartbeats, which one at a time
 * would not fit in a period.
 *
 * @example
 * ```ts
 * import { MEMBERSHIP_READ_CONCURRENCY } from "./membership.ts";
 * console.log(MEMBERSHIP_READ_CONCURRENCY); // 32
 * ```
 */
export const MEMBERSHIP_READ_CONCURRENCY = 32;

/** Index of line 5 (the lease state) in a heartbeat's lines. */
const LEASE_LINE_INDEX = 4;

/** What {@linkcode Membership} needs to know of this node's own lease. */
export interface OwnLeaseState {
  /** Whether the lease is valid now. */
  valid(): boolean;
  /**
   * When the lease last became valid, on `clock.monotonic()`; `undefined`
   * if it never was. It may still hold an old time while the lease is not
   * valid: `valid()` decides that.
   */
  readonly validSince: number | undefined;
}

/** What a {@linkcode Membership} works with. */
export interface MembershipOptions {
  /** The shared bucket. */
  bucket: Bucket;
  /** Times the rounds and bounds every call. */
  clock: Clock;
  /** Told about fences, unreadable heartbeats and failed listings. */
  log: Logger;
  /** This node's id: the one node it never fences. */
  nodeId: string;
  /** The lease timings (`leaseTiming(ttl)`). */
  timing: LeaseTiming;
  /** This node's own lease: no fence unless it has been valid for a watch. */
  ownLease: OwnLeaseState;
}

/** What this node knows of one heartbeat object. Views are snapshots: a change makes a new one. */
export interface PeerView {
  /** The node the key `nodes/<id>` names. */
  readonly nodeId: string;
  /** The decoded heartbeat; `undefined` when it cannot be read (see `problem`). */
  readonly heartbeat: Heartbeat | undefined;
  /** Why the heartbeat cannot be read, when it cannot. */
  readonly problem: string | undefined;
  /** The ETag of the object the view was read from. */
  readonly etag: string;
  /** When this node first saw that ETag, on `clock.monotonic()`. */
  readonly unchangedSince: number;
  /** True only in the `onChange` event of a heartbeat that left the bucket. */
  readonly removed: boolean;
}

/** A view whose heartbeat could be read. */
export type ReadablePeerView = PeerView & { readonly heartbeat: Heartbeat };

/** One heartbeat as this node tracks it. */
interface Tracked {
  view: PeerView;
  /** The object's bytes, so a fence changes line 5 and keeps every other line as written. */
  body: Uint8Array | undefined;
  /**
   * Whether the last listing (or a later read) showed `view.etag`: only a
   * current view may be fenced, since one the peer replaced proves it wrote.
   */
  current: boolean;
}

/** A peer's lease dated ahead of this clock is logged at most this often. */
export const LEASE_AHEAD_LOG_MS = 60_000;

/**
 * This node's view of the cluster's heartbeats, refreshed every period, and
 * the fences it owes.
 *
 * Every `periodMs` it lists `nodes/` and reads the heartbeats whose ETag
 * changed; the listing and its reads are bounded by a period on the clock
 * (a slower one is given up and the view kept), each fence by the write
 * timeout. Rounds never overlap. This node's own heartbeat is in the view
 * too; it is never fenced.
 *
 * @example Watching the cluster
 * ```ts
 * import { Membership } from "./membership.ts";
 * import { leaseTiming } from "./lease_timing.ts";
 * import { MemoryBucket } from "../bucket/memory.ts";
 * import { systemClock } from "../time/clock.ts";
 * import { createLogger } from "../log.ts";
 * const membership = new Membership({
 *   bucket: new MemoryBucket(), clock: systemClock, log: createLogger(), nodeId: "a",
 *   timing: leaseTiming(), ownLease: { valid: () => true, validSince: 0 },
 * });
 * await membership.refresh();
 * console.log(membership.liveNodes().length); // 0
 * membership.close();
 * ```
 */
export class Membership {
  readonly #bucket: Bucket;
  readonly #clock: Clock;
  readonly #log: Logger;
  readonly #nodeId: string;
  readonly #timing: LeaseTiming;
  readonly #ownLease: OwnLeaseState;
  /** By node id. */
  readonly #peers = new Map<string, Tracked>();
  readonly #listeners = new Set<(peer: PeerView) => void>();
  /** Keys under `nodes/` that are no heartbeat key, logged once each. */
  readonly #ignoredKeys = new Set<string>();
  /** Aborts the calls in flight at `close`. */
  readonly #closing = new AbortController();
  #timer: Timer | undefined;
  #running: Promise<boolean> | undefined;
  #queued: Promise<boolean> | undefined;
  /** Listings failed since the last one that completed. */
  #listFailures = 0;
  /** Peers whose lease dated ahead was logged, and when (monotonic ms). */
  readonly #aheadLogged = new Map<string, number>();
  /** Work done at the end of every round, in order (the fencing duty's). */
  readonly #afterRound: (() => Promise<void>)[] = [];

  /** A view of the heartbeats, empty until {@linkcode Membership.start}. */
  constructor(options: MembershipOptions) {
    this.#bucket = options.bucket;
    this.#clock = options.clock;
    this.#log = options.log;
    this.#nodeId = options.nodeId;
    this.#timing = options.timing;
    this.#ownLease = options.ownLease;
  }

  /**
   * Starts listing at once, then every period, until `close`.
   *
   * @example
   * ```ts
   * import { Membership } from "./membership.ts";
   * import { leaseTiming } from "./lease_timing.ts";
   * import { MemoryBucket } from "../bucket/memory.ts";
   * import { systemClock } from "../time/clock.ts";
   * import { createLogger } from "../log.ts";
   * const membership = new Membership({
   *   bucket: new MemoryBucket(), clock: systemClock, log: createLogger(), nodeId: "a",
   *   timing: leaseTiming(), ownLease: { valid: () => true, validSince: 0 },
   * });
   * membership.start();
   * membership.close();
   * ```
   */
  start(): void {
    if (this.#timer || this.#closing.signal.aborted) return;
    this.#arm(0);
  }

  /**
   * Whether the node's heartbeat is live: `live` in line 5 and written less
   * than the ttl ago on this node's clock. Unknown, unreadable, released and
   * fenced nodes are not.
   *
   * @example
   * ```ts
   * import { Membership } from "./membership.ts";
   * import { leaseTiming } from "./lease_timing.ts";
   * import { MemoryBucket } from "../bucket/memory.ts";
   * import { systemClock } from "../time/clock.ts";
   * import { createLogger } from "../log.ts";
   * const membership = new Membership({
   *   bucket: new MemoryBucket(), clock: systemClock, log: createLogger(), nodeId: "a",
   *   timing: leaseTiming(), ownLease: { valid: () => true, validSince: 0 },
   * });
   * console.log(membership.isLive("b")); // false
   * membership.close();
   * ```
   */
  isLive(nodeId: string): boolean {
    const heartbeat = this.#peers.get(nodeId)?.view.heartbeat;
    return heartbeat !== undefined && isLive(heartbeat, this.#clock.now(), this.#timing.ttlMs);
  }

  /**
   * Whether the node's heartbeat is `released` or `fenced`: the actors it
   * held are free. A node merely not live, or whose heartbeat was deleted,
   * is not gone: its actors stay held.
   *
   * @example
   * ```ts
   * import { Membership } from "./membership.ts";
   * import { leaseTiming } from "./lease_timing.ts";
   * import { MemoryBucket } from "../bucket/memory.ts";
   * import { systemClock } from "../time/clock.ts";
   * import { createLogger } from "../log.ts";
   * const membership = new Membership({
   *   bucket: new MemoryBucket(), clock: systemClock, log: createLogger(), nodeId: "a",
   *   timing: leaseTiming(), ownLease: { valid: () => true, validSince: 0 },
   * });
   * console.log(membership.isGone("b")); // false
   * membership.close();
   * ```
   */
  isGone(nodeId: string): boolean {
    const lease = this.#peers.get(nodeId)?.view.heartbeat?.lease;
    return lease === "released" || lease === "fenced";
  }

  /**
   * The view of one node's heartbeat, or `undefined` when the last listing
   * did not show one.
   *
   * @example
   * ```ts
   * import { Membership } from "./membership.ts";
   * import { leaseTiming } from "./lease_timing.ts";
   * import { MemoryBucket } from "../bucket/memory.ts";
   * import { systemClock } from "../time/clock.ts";
   * import { createLogger } from "../log.ts";
   * const membership = new Membership({
   *   bucket: new MemoryBucket(), clock: systemClock, log: createLogger(), nodeId: "a",
   *   timing: leaseTiming(), ownLease: { valid: () => true, validSince: 0 },
   * });
   * console.log(membership.peer("b")); // undefined
   * membership.close();
   * ```
   */
  peer(nodeId: string): PeerView | undefined {
    return this.#peers.get(nodeId)?.view;
  }

  /**
   * The views of every live node (this one included when its heartbeat is),
   * by node id.
   *
   * @example
   * ```ts
   * import { Membership } from "./membership.ts";
   * import { leaseTiming } from "./lease_timing.ts";
   * import { MemoryBucket } from "../bucket/memory.ts";
   * import { systemClock } from "../time/clock.ts";
   * import { createLogger } from "../log.ts";
   * const membership = new Membership({
   *   bucket: new MemoryBucket(), clock: systemClock, log: createLogger(), nodeId: "a",
   *   timing: leaseTiming(), ownLease: { valid: () => true, validSince: 0 },
   * });
   * await membership.refresh();
   * console.log(membership.liveNodes().map((p) => p.nodeId)); // []
   * membership.close();
   * ```
   */
  liveNodes(): ReadablePeerView[] {
    const live: ReadablePeerView[] = [];
    for (const [nodeId, tracked] of this.#peers) {
      if (this.isLive(nodeId)) live.push(tracked.view as ReadablePeerView);
    }
    return live.sort((a, b) => (a.nodeId < b.nodeId ? -1 : a.nodeId > b.nodeId ? 1 : 0));
  }

  /**
   * Calls `listener` with the new view whenever a heartbeat appears, is
   * rewritten (a new ETag: a renewal, a release, a fence) or leaves the
   * bucket (`removed: true`). A heartbeat that ages out of liveness without
   * changing raises no event: ask {@linkcode Membership.isLive}. Returns
   * the function that unsubscribes.
   *
   * @example
   * ```ts
   * import { Membership } from "./membership.ts";
   * import { leaseTiming } from "./lease_timing.ts";
   * import { MemoryBucket } from "../bucket/memory.ts";
   * import { systemClock } from "../time/clock.ts";
   * import { createLogger } from "../log.ts";
   * const membership = new Membership({
   *   bucket: new MemoryBucket(), clock: systemClock, log: createLogger(), nodeId: "a",
   *   timing: leaseTiming(), ownLease: { valid: () => true, validSince: 0 },
   * });
   * const stop = membership.onChange((peer) => console.log(peer.nodeId, peer.heartbeat?.lease));
   * stop();
   * membership.close();
   * ```
   */
  onChange(listener: (peer: PeerView) => void): () => void {
    this.#listeners.add(listener);
    return () => void this.#listeners.delete(listener);
  }

  /**
   * Lists now, reads what changed and writes the fences due; resolves once
   * a round that started after the call ended: `true` when its listing and
   * every read it needed completed, `false` when some failed (logged; the
   * view keeps what it had) or the membership is closed. Never rejects.
   *
   * @example
   * ```ts
   * import { Membership } from "./membership.ts";
   * import { leaseTiming } from "./lease_timing.ts";
   * import { MemoryBucket } from "../bucket/memory.ts";
   * import { systemClock } from "../time/clock.ts";
   * import { createLogger } from "../log.ts";
   * const membership = new Membership({
   *   bucket: new MemoryBucket(), clock: systemClock, log: createLogger(), nodeId: "a",
   *   timing: leaseTiming(), ownLease: { valid: () => true, validSince: 0 },
   * });
   * console.log(await membership.refresh()); // true
   * membership.close();
   * ```
   */
  refresh(): Promise<boolean> {
    if (this.#closing.signal.aborted) return Promise.resolve(false);
    if (!this.#running) return this.#start();
    // A round in flight may have listed before the caller's reason to ask:
    // queue one after it, shared by every caller that arrives meanwhile.
    this.#queued ??= this.#running.then(() => {
      this.#queued = undefined;
      return this.#closing.signal.aborted ? false : this.#start();
    });
    return this.#queued;
  }

  /**
   * Stops the rounds and abandons the calls in flight. The view stays
   * readable as it was.
   *
   * @example
   * ```ts
   * import { Membership } from "./membership.ts";
   * import { leaseTiming } from "./lease_timing.ts";
   * import { MemoryBucket } from "../bucket/memory.ts";
   * import { systemClock } from "../time/clock.ts";
   * import { createLogger } from "../log.ts";
   * const membership = new Membership({
   *   bucket: new MemoryBucket(), clock: systemClock, log: createLogger(), nodeId: "a",
   *   timing: leaseTiming(), ownLease: { valid: () => true, validSince: 0 },
   * });
   * membership.close();
   * ```
   */
  close(): void {
    this.#timer?.cancel();
    this.#timer = undefined;
    this.#closing.abort(new Error("membership closed"));
  }

  /** Arms the next periodic round; each round arms the one after, so they keep the period. */
  #arm(ms: number): void {
    this.#timer = this.#clock.setTimer(ms, () => {
      if (this.#closing.signal.aborted) return;
      this.#arm(this.#timing.periodMs);
      void this.refresh();
    });
  }

  #start(): Promise<boolean> {
    const round: Promise<boolean> = this.#round().catch((e) => {
      this.#log.error("membership round failed", { error: describeError(e) });
      return false;
    }).finally(() => {
      if (this.#running === round) this.#running = undefined;
    });
    this.#running = round;
    return round;
  }

  async #round(): Promise<boolean> {
    // One period for the listing and its reads: a round slower than that is
    // overtaken by the next, and a view kept is better than one that hangs.
    const limit = deadline(
      this.#clock,
      this.#timing.periodMs,
      `listing ${NODES_PREFIX}`,
      this.#closing.signal,
    );
    let allRead: boolean;
    let listed: Map<string, ObjectInfo>;
    try {
      try {
        listed = await this.#list(limit.signal);
      } catch (e) {
        if (this.#closing.signal.aborted) return false;
        // Once per outage at warn: a node cut off for minutes would repeat it every period.
        const level = this.#listFailures++ === 0 ? "warn" : "debug";
        this.#log[level]("could not list the heartbeats; keeping the last view", {
          failuresInARow: this.#listFailures,
          error: describeError(e),
        });
        return false;
      }
      if (this.#listFailures > 0) {
        this.#log.info("listing the heartbeats works again", { failures: this.#listFailures });
        this.#listFailures = 0;
      }
      allRead = await this.#readChanged(listed, limit.signal);
    } finally {
      limit.done();
    }
    if (this.#closing.signal.aborted) return false;
    for (const [nodeId, tracked] of [...this.#peers]) {
      if (listed.has(nodeId)) continue;
      this.#peers.delete(nodeId);
      this.#emit({ ...tracked.view, removed: true });
    }
    this.#warnOfLeasesAhead();
    for (const task of [...this.#afterRound]) {
      await task().catch((e) =>
        this.#log.error("work after a membership round failed", {
          error: describeError(e),
        })
      );
    }
    return allRead;
  }

  /**
   * Logs each peer whose lease is dated ahead of this clock by more than the
   * allowed skew, at most once a minute: it never goes stale, so no node
   * fences it, and the actors it holds stay held until that date.
   */
  #warnOfLeasesAhead(): void {
    const now = this.#clock.now();
    const monotonic = this.#clock.monotonic();
    for (const nodeId of this.#aheadLogged.keys()) {
      if (!this.#peers.has(nodeId)) this.#aheadLogged.delete(nodeId);
    }
    for (const [nodeId, { view }] of this.#peers) {
      const aheadMs = (view.heartbeat?.at ?? now) - now;
      if (aheadMs <= this.#timing.skewMs) continue;
      const last = this.#aheadLogged.get(nodeId);
      if (last !== undefined && monotonic - last < LEASE_AHEAD_LOG_MS) continue;
      this.#aheadLogged.set(nodeId, monotonic);
      this.#log.warn(
        "a node's lease is dated ahead of this clock: it never goes stale, so no node fences it and the actors it holds stay held until that date; fix the clock that is wrong",
        { node: nodeId, ahead_ms: aheadMs, lease: view.heartbeat!.lease },
      );
    }
  }

  /** The heartbeat objects a complete listing shows, by node id. */
  async #list(signal: AbortSignal): Promise<Map<string, ObjectInfo>> {
    const collect = async () => {
      const objects = new Map<string, ObjectInfo>();
      for await (const object of listAll(this.#bucket, NODES_PREFIX, undefined, { signal })) {
        const nodeId = object.key.slice(NODES_PREFIX.length);
        // A valid id needs no percent-encoding, so its key is `nodes/<id>` as is.
        if (isNodeId(nodeId)) {
          objects.set(nodeId, object);
        } else if (!this.#ignoredKeys.has(object.key)) {
          this.#ignoredKeys.add(object.key);
          this.#log.info("ignoring an object under nodes/ that is no heartbeat", {
            key: object.key,
          });
        }
      }
      return objects;
    };
    // Raced as well as signalled, so a store that ignores the signal cannot hold the round.
    return await raceSignal(collect(), signal);
  }

  /** Reads the heartbeats whose ETag is not the one in the view; whether every read landed. */
  async #readChanged(listed: Map<string, ObjectInfo>, signal: AbortSignal): Promise<boolean> {
    const changed: ObjectInfo[] = [];
    for (const [nodeId, object] of listed) {
      const tracked = this.#peers.get(nodeId);
      if (tracked && tracked.view.etag === object.etag) tracked.current = true;
      else changed.push(object);
    }
    let failed = 0;
    let firstError: unknown;
    await pool(changed, MEMBERSHIP_READ_CONCURRENCY, async (object) => {
      const nodeId = object.key.slice(NODES_PREFIX.length);
      try {
        await this.#read(nodeId, object.key, signal);
      } catch (e) {
        failed++;
        firstError ??= e;
        // The peer wrote since the view was read: not the object watched any more.
        const tracked = this.#peers.get(nodeId);
        if (tracked) tracked.current = false;
      }
    });
    if (failed > 0 && !this.#closing.signal.aborted) {
      this.#log.warn("could not read some heartbeats; keeping their last view", {
        failed,
        error: describeError(firstError),
      });
    }
    return failed === 0;
  }

  async #read(nodeId: string, key: string, signal: AbortSignal): Promise<void> {
    const object = await raceSignal(this.#bucket.get(key, { signal }), signal);
    const tracked = this.#peers.get(nodeId);
    if (!object) {
      // Deleted since the listing: the next listing removes it from the view.
      if (tracked) tracked.current = false;
      return;
    }
    if (tracked && tracked.view.etag === object.etag) {
      // The listing was behind the object: the view is the current one after all.
      tracked.current = true;
      return;
    }
    let heartbeat: Heartbeat | undefined;
    let problem: string | undefined;
    try {
      heartbeat = decodeHeartbeat(object.body, key);
      if (heartbeat.nodeId !== nodeId) {
        problem = `line 2 names ${JSON.stringify(heartbeat.nodeId)}, not ${nodeId}`;
        heartbeat = undefined;
      }
    } catch (e) {
      problem = describeError(e);
    }
    if (problem !== undefined) {
      // Read only when its ETag changes, so each version is logged once.
      this.#log.warn("a heartbeat cannot be read; its node is not counted live", {
        node: nodeId,
        problem,
      });
    }
    this.#set(nodeId, {
      nodeId,
      heartbeat,
      problem,
      etag: object.etag,
      unchangedSince: this.#clock.monotonic(),
      removed: false,
    }, object.body);
  }

  #set(nodeId: string, view: PeerView, body: Uint8Array | undefined): void {
    this.#peers.set(nodeId, { view, body, current: true });
    this.#emit(view);
  }

  #emit(view: PeerView): void {
    for (const listener of [...this.#listeners]) {
      try {
        listener(view);
      } catch (e) {
        this.#log.error("a membership listener threw", {
          node: view.nodeId,
          error: describeError(e),
        });
      }
    }
  }

  /**
   * Runs `task` at the end of every round from now on (after the view was
   * updated), before the next round can start; returns the function that
   * stops it.
   *
   * @example
   * ```ts
   * import { Membership } from "./membership.ts";
   * import { leaseTiming } from "./lease_timing.ts";
   * import { MemoryBucket } from "../bucket/memory.ts";
   * import { systemClock } from "../time/clock.ts";
   * import { createLogger } from "../log.ts";
   * const membership = new Membership({
   *   bucket: new MemoryBucket(), clock: systemClock, log: createLogger(), nodeId: "a",
   *   timing: leaseTiming(), ownLease: { valid: () => true, validSince: 0 },
   * });
   * const stop = membership.afterEachRound(() => membership.fenceDue());
   * stop();
   * membership.close();
   * ```
   */
  afterEachRound(task: () => Promise<void>): () => void {
    this.#afterRound.push(task);
    return () => {
      const at = this.#afterRound.indexOf(task);
      if (at >= 0) this.#afterRound.splice(at, 1);
    };
  }

  /**
   * Writes every fence due, a few at a time, each decided again just before
   * it is sent, and only while this node's lease has been valid for a watch
   * and `signal` has not aborted.
   *
   * @example
   * ```ts
   * import { Membership } from "./membership.ts";
   * import { leaseTiming } from "./lease_timing.ts";
   * import { MemoryBucket } from "../bucket/memory.ts";
   * import { systemClock } from "../time/clock.ts";
   * import { createLogger } from "../log.ts";
   * const membership = new Membership({
   *   bucket: new MemoryBucket(), clock: systemClock, log: createLogger(), nodeId: "a",
   *   timing: leaseTiming(), ownLease: { valid: () => true, validSince: 0 },
   * });
   * await membership.refresh();
   * await membership.fenceDue(); // nobody to fence
   * membership.close();
   * ```
   */
  async fenceDue(signal?: AbortSignal): Promise<void> {
    if (!this.#leaseSettled() || signal?.aborted) return;
    const due = [...this.#peers.values()].filter((tracked) => this.#fenceIsDue(tracked));
    await pool(due, MEMBERSHIP_READ_CONCURRENCY, (tracked) => this.#fence(tracked, signal));
  }

  /** Whether this node's own lease has been valid for a watch. */
  #leaseSettled(): boolean {
    const since = this.#ownLease.validSince;
    return this.#ownLease.valid() && since !== undefined &&
      this.#clock.monotonic() - since >= this.#timing.watchMs;
  }

  #fenceIsDue(tracked: Tracked): boolean {
    const { view } = tracked;
    const heartbeat = view.heartbeat;
    // Format 1 writes unconditionally and would not stop at a fence: only its age frees its actors.
    if (!heartbeat || heartbeat.format !== 2 || heartbeat.lease !== "live") return false;
    if (view.nodeId === this.#nodeId || !tracked.current || !tracked.body) return false;
    if (this.#clock.monotonic() - view.unchangedSince < this.#timing.watchMs) return false;
    return this.#clock.now() - heartbeat.at >= this.#timing.fenceAfterMs;
  }

  async #fence(tracked: Tracked, signal: AbortSignal | undefined): Promise<void> {
    // Rounds are serial, but the lease can lapse while earlier fences are sent.
    if (
      this.#closing.signal.aborted || signal?.aborted || !this.#leaseSettled() ||
      !this.#fenceIsDue(tracked)
    ) {
      return;
    }
    const { view } = tracked;
    const heartbeat = view.heartbeat!;
    const key = NODES_PREFIX + view.nodeId;
    const body = withLeaseLine(tracked.body!, `fenced ${this.#nodeId}`);
    const lastWriteAgeMs = this.#clock.now() - heartbeat.at;
    const unchangedMs = this.#clock.monotonic() - view.unchangedSince;
    const limit = deadline(
      this.#clock,
      this.#timing.writeTimeoutMs,
      `fencing ${key}`,
      this.#closing.signal,
    );
    let etag: string;
    try {
      ({ etag } = await raceSignal(
        this.#bucket.put(key, body, { ifMatch: view.etag, signal: limit.signal }),
        limit.signal,
      ));
    } catch (e) {
      // Whatever happened, the object is not the one watched any more, or may not be.
      tracked.current = false;
      if (this.#closing.signal.aborted) return;
      if (e instanceof PreconditionFailed) {
        this.#log.info("no fence: the heartbeat changed first (the node wrote, or was fenced)", {
          node: view.nodeId,
          lastWriteAgeMs,
          maybeOwnWrite: e.maybeOwnWrite,
        });
      } else {
        this.#log.warn("fence write failed; deciding again at the next listing", {
          node: view.nodeId,
          lastWriteAgeMs,
          error: describeError(e),
        });
      }
      return;
    } finally {
      limit.done();
    }
    this.#log.warn("fenced a node that stopped renewing its lease", {
      node: view.nodeId,
      process: heartbeat.process,
      lastWriteAgeMs,
      unchangedMs,
    });
    if (this.#peers.get(view.nodeId) !== tracked) return;
    this.#set(view.nodeId, {
      nodeId: view.nodeId,
      heartbeat: { ...heartbeat, lease: "fenced", fencedBy: this.#nodeId },
      problem: undefined,
      etag,
      unchangedSince: this.#clock.monotonic(),
      removed: false,
    }, body);
  }
}

/** The heartbeat `body` with line 5 replaced: a fence keeps every other line as the node wrote it. */
function withLeaseLine(body: Uint8Array, line: string): Uint8Array {
  const lines = new TextDecoder().decode(body).split("\n");
  lines[LEASE_LINE_INDEX] = line;
  return new TextEncoder().encode(lines.join("\n"));
}

/** Runs `work` on every item, at most `limit` at once. */
async function pool<T>(items: T[], limit: number, work: (item: T) => Promise<void>): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < items.length) await work(items[next++]);
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
}
