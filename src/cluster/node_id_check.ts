/**
 * The node id check at start (the spec's "Flags"): before its first
 * heartbeat and before any lease, a node reads `nodes/<id>` every half period
 * for the ttl plus grace (15 s by default), even when there is no object, and
 * refuses to start while another process still writes it.
 *
 * How long it waits depends on what it reads:
 *
 * - no object, or a heartbeat (or unreadable object) that stays unchanged:
 *   ttl + grace from the read that first saw it, and for a live heartbeat
 *   also until its line 4 is ttl + grace old on this clock (a heartbeat
 *   dated ahead keeps the check waiting as it keeps a fencer waiting);
 * - a `released` or `fenced` heartbeat: until its line 4 (the process's last
 *   live write) is ttl + grace old, and at least one more read half a period
 *   after the one that first saw it (about 1.5 s when that already passed);
 * - a heartbeat in format 1 (before node leases): ttl + grace, and until its
 *   time is older than the ttl (its horizon) plus ttl + grace;
 * - a change to a live heartbeat (either format) or to an object this
 *   version cannot read: another process runs, {@linkcode NodeIdInUse}.
 *
 * Any change of the object sets those waits again from the read that saw
 * it: a deletion during the check, like an absent object, gives a process
 * that ran with it the whole ttl + grace to show itself.
 *
 * @module
 */

import type { Bucket, StoredObject } from "../bucket/bucket.ts";
import { nodeKey } from "../bucket/keys.ts";
import { deadline } from "../bucket/timers.ts";
import type { Logger } from "../log.ts";
import { describeError } from "../describe_error.ts";
import type { Clock } from "../time/clock.ts";
import { decodeHeartbeat, type Heartbeat } from "./heartbeat.ts";
import type { LeaseTiming } from "./lease_timing.ts";

/**
 * While the bucket cannot be read, one failed read in this many is logged at
 * warn (20: every 30 s with the default timings), the others at debug.
 *
 * @example
 * ```ts
 * import { FAILED_READS_PER_WARNING } from "./node_id_check.ts";
 * console.log(FAILED_READS_PER_WARNING); // 20
 * ```
 */
export const FAILED_READS_PER_WARNING = 20;

/**
 * Another process still writes this node's heartbeat: the start is refused.
 *
 * @example
 * ```ts
 * import { NodeIdInUse } from "./node_id_check.ts";
 * const e = new NodeIdInUse("a", "http://10.0.0.5:8080", "3f2a");
 * console.log(e.message);
 * ```
 */
export class NodeIdInUse extends Error {
  /** Always `"NodeIdInUse"`, for logs and structured errors. */
  override name = "NodeIdInUse";
  /** The node id in use. */
  readonly nodeId: string;
  /** The other process's `--advertise` address (line 6), when its heartbeat says. */
  readonly address?: string;
  /** The other process's token, when its heartbeat says. */
  readonly process?: string;

  /** Describes the other process that writes `nodes/<nodeId>`. */
  constructor(nodeId: string, address?: string, process?: string) {
    super(
      `node id ${nodeId} is in use: another process (${
        address ? `advertised at ${address}` : "address unknown"
      }) still writes ${nodeKey(nodeId)}. Stop it first, or let the service manager retry ` +
        "this start once it has stopped.",
    );
    this.nodeId = nodeId;
    this.address = address;
    this.process = process;
  }
}

/** What {@linkcode checkNodeId} works with. */
export interface NodeIdCheckOptions {
  /** The shared bucket. */
  bucket: Bucket;
  /** Times the reads; line 4 of a heartbeat is compared with its `now()`. */
  clock: Clock;
  /** Told that the check runs, about reads that fail, and how it ended. */
  log: Logger;
  /** The id to check. */
  nodeId: string;
  /** The lease timings (`periodMs`, `ttlMs`, `fenceAfterMs`, `writeTimeoutMs`). */
  timing: LeaseTiming;
  /** Abandons the check: it rejects with the signal's reason. */
  signal?: AbortSignal;
}

/**
 * What the start check read last and passed on: the ETag the first
 * heartbeat write is conditioned on (undefined when there was no object) and
 * the process whose heartbeat that was, by token and line 4, when it decoded.
 */
export interface NodeIdChecked {
  /** The ETag of the object read last; undefined when there was none. */
  etag?: string;
  /** The previous process: its token (line 3) and last live write (line 4). */
  predecessor?: { process: string; at: number };
}

/** What the reads found, and since when. */
interface Seen {
  /** The object's ETag; undefined when there is none. */
  etag: string | undefined;
  /** Whether there is an object. */
  present: boolean;
  /** The heartbeat, when the object decodes as one. */
  heartbeat?: Heartbeat;
  /** Monotonic time the read that first saw this ETag was answered. */
  since: number;
}

/**
 * Checks that no other process runs with `nodeId`, as the spec's "Flags"
 * paragraph says (see the module's documentation for the waits). Resolves to
 * the ETag it read last (undefined when there was no object), the condition
 * of the first heartbeat write, and the process whose heartbeat it was;
 * rejects with {@linkcode NodeIdInUse} when a process still writes the
 * heartbeat, or with the signal's reason. A bucket
 * that cannot be read is read again every half period, without end.
 *
 * @example
 * ```ts
 * import { checkNodeId } from "./node_id_check.ts";
 * import { leaseTiming } from "./lease_timing.ts";
 * import { MemoryBucket } from "../bucket/memory.ts";
 * import { systemClock } from "../time/clock.ts";
 * import { createLogger } from "../log.ts";
 * const after = await checkNodeId({
 *   bucket: new MemoryBucket(), clock: systemClock, log: createLogger(), nodeId: "a",
 *   timing: leaseTiming(),
 * }); // 15 s later: { etag: undefined }
 * ```
 */
export async function checkNodeId(options: NodeIdCheckOptions): Promise<NodeIdChecked> {
  const { bucket, clock, log, nodeId, timing, signal } = options;
  const key = nodeKey(nodeId);
  const halfPeriodMs = timing.periodMs / 2;
  log.info("checking that no other process runs with this node id", {
    key,
    waitMs: timing.fenceAfterMs,
  });
  let seen: Seen | undefined;
  let failures = 0;
  for (;;) {
    signal?.throwIfAborted();
    const sentWall = clock.now();
    const sentMono = clock.monotonic();
    let object: StoredObject | null;
    const limit = deadline(clock, timing.writeTimeoutMs, `read ${key}`, signal);
    try {
      object = await bucket.get(key, { signal: limit.signal });
    } catch (e) {
      signal?.throwIfAborted();
      failures++;
      // Without an answer nothing is known: keep reading until the bucket answers.
      const fields = { key, failures, error: describeError(e) };
      if (failures % FAILED_READS_PER_WARNING === 1) {
        log.warn("node id check: cannot read the heartbeat; retrying", fields);
      } else log.debug("node id check: cannot read the heartbeat; retrying", fields);
      await clock.sleep(Math.max(0, sentMono + halfPeriodMs - clock.monotonic()), signal);
      continue;
    } finally {
      limit.done();
    }
    if (failures > 0) {
      log.info("node id check: the heartbeat can be read again", { key, failures });
      failures = 0;
    }

    const current = observe(object, key, clock.monotonic());
    if (seen === undefined || current.etag !== seen.etag) {
      if (
        seen !== undefined && current.present && current.heartbeat?.lease !== "released" &&
        current.heartbeat?.lease !== "fenced"
      ) {
        // A live write (or one this version cannot read) landed since the
        // last read: a process runs with this id. Its line 4 need not be
        // newer: a process whose clock stepped back still runs.
        throw new NodeIdInUse(
          nodeId,
          current.heartbeat?.address || undefined,
          current.heartbeat?.process,
        );
      }
      seen = current;
    }

    const wait = waitLeft(seen, sentWall, sentMono, timing);
    if (wait <= 0) {
      log.info("node id check passed: no other process runs with this node id", {
        key,
        lease: seen.heartbeat?.lease ?? (seen.present ? "unreadable" : "none"),
      });
      const heartbeat = seen.heartbeat;
      const predecessor = heartbeat && { process: heartbeat.process, at: heartbeat.at };
      return predecessor ? { etag: seen.etag, predecessor } : { etag: seen.etag };
    }
    // The next read: half a period after this one, or when the check can end if sooner.
    const untilNextRead = sentMono + halfPeriodMs - clock.monotonic();
    await clock.sleep(Math.max(0, Math.min(untilNextRead, wait)), signal);
  }
}

function observe(object: StoredObject | null, key: string, answeredAt: number): Seen {
  if (!object) return { etag: undefined, present: false, since: answeredAt };
  let heartbeat: Heartbeat | undefined;
  try {
    heartbeat = decodeHeartbeat(object.body, key);
  } catch {
    heartbeat = undefined;
  }
  return { etag: object.etag, present: true, heartbeat, since: answeredAt };
}

/**
 * How long after a read sent at `sentWall`/`sentMono` the check has to go on
 * with `seen` unchanged; zero or less when that read ends it.
 */
function waitLeft(seen: Seen, sentWall: number, sentMono: number, timing: LeaseTiming): number {
  const heartbeat = seen.heartbeat;
  const stopped = heartbeat?.format === 2 &&
    (heartbeat.lease === "released" || heartbeat.lease === "fenced");
  // Released or fenced: one more read; otherwise the whole ttl + grace of reads.
  const observeMs = stopped ? timing.periodMs / 2 : timing.fenceAfterMs;
  const observed = sentMono - seen.since - observeMs;
  if (!heartbeat) return -observed;
  // A format-1 process renews its per-actor leases on a task of its own, for
  // its 10 s horizon: it lapsed once its time is that plus ttl + grace old.
  const ageNeeded = heartbeat.format === 1
    ? timing.ttlMs + timing.fenceAfterMs
    : timing.fenceAfterMs;
  const aged = sentWall - heartbeat.at - ageNeeded;
  return Math.max(-observed, -aged);
}
