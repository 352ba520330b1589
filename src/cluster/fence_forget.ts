/**
 * What `wasmkeep cluster fence` and `forget` write in the bucket, under the
 * conditions ADR 0004 sets: a fence rewrites a node's heartbeat `fenced cli`
 * `If-Match` the ETag read; a forget deletes a retired node's heartbeat from
 * before node leases once it is old enough. Each re-reads and tries again
 * when its condition was refused.
 *
 * Apart from the status (`status.ts`), which only reads: these are the two
 * writes an operator makes to the nodes' leases, with their refusals.
 *
 * @module
 */

import { type Bucket, PreconditionFailed } from "../bucket/bucket.ts";
import { nodeKey } from "../bucket/keys.ts";
import {
  decodeHeartbeat,
  encodeHeartbeat,
  type Heartbeat,
  isLive,
  MalformedHeartbeat,
} from "./heartbeat.ts";
import { assertNodeId } from "../node_id.ts";
import { leaseTiming } from "./lease_timing.ts";
import { type ClusterToolOptions, formatDuration } from "./status.ts";

/**
 * Who line 5 of a heartbeat names when `wasmkeep cluster fence` wrote it.
 *
 * @example
 * ```ts
 * import { CLI_FENCER } from "./fence_forget.ts";
 * console.log(`fenced ${CLI_FENCER}`); // "fenced cli"
 * ```
 */
export const CLI_FENCER = "cli";

/**
 * How many times fence and forget re-read a heartbeat whose condition was refused.
 *
 * @example
 * ```ts
 * import { CONDITION_ATTEMPTS } from "./fence_forget.ts";
 * console.log(CONDITION_ATTEMPTS); // 5
 * ```
 */
export const CONDITION_ATTEMPTS = 5;

/**
 * A fence or forget the bucket's state does not allow; the CLI prints it and exits 1.
 *
 * @example
 * ```ts
 * import { ClusterToolRefusal, forgetNode } from "./fence_forget.ts";
 * import { MemoryBucket } from "../bucket/memory.ts";
 * await forgetNode(new MemoryBucket(), "node-b").catch((e) => e instanceof ClusterToolRefusal);
 * // true: no heartbeat nodes/node-b: nothing to forget
 * ```
 */
export class ClusterToolRefusal extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ClusterToolRefusal";
  }
}

/** What `fenceNode` found and did. */
export interface FenceOutcome {
  /**
   * `fenced`: a heartbeat was written fenced; `created`: there was none (or
   * one that could not be read) and a fence dated now was written;
   * `already-fenced` / `released`: nothing was written.
   */
  action: "fenced" | "created" | "already-fenced" | "released";
  nodeId: string;
  /** The heartbeat as it is now in the bucket. */
  heartbeat: Heartbeat;
  /** The lease as it was before the fence, for `fenced`: live or lapsed. */
  wasLive?: boolean;
  /** Why a `created` fence replaced an object. */
  replacedProblem?: string;
  /** When the node's actors are free: line 4 plus ttl + grace. */
  freeAt: number;
  /** This machine's clock when it finished. */
  now: number;
}

/** Line 5 replaced by `fenced cli`, every other line kept as it is. */
function fencedText(body: Uint8Array): Uint8Array {
  const text = new TextDecoder().decode(body);
  const lines = text.split("\n");
  lines[4] = `fenced ${CLI_FENCER}`;
  return new TextEncoder().encode(lines.join("\n"));
}

/**
 * Fences node `nodeId` (`wasmkeep cluster fence`): writes its heartbeat
 * `fenced cli`, keeping its other lines and its line-4 date, `If-Match` the
 * ETag read; with no object (or one that cannot be read), writes a minimal
 * fenced heartbeat dated now. A refused condition is re-read and tried again,
 * {@linkcode CONDITION_ATTEMPTS} times in all. Refuses a heartbeat in the
 * format from before node leases, whose node does not read fences.
 *
 * @example
 * ```ts
 * import { fenceNode } from "./fence_forget.ts";
 * import { MemoryBucket } from "../bucket/memory.ts";
 * (await fenceNode(new MemoryBucket(), "node-b")).action; // "created"
 * ```
 */
export async function fenceNode(
  bucket: Bucket,
  nodeId: string,
  options: ClusterToolOptions = {},
): Promise<FenceOutcome> {
  assertNodeId(nodeId, "the node to fence");
  const clock = options.now ?? Date.now;
  const timing = leaseTiming(options.ttlMs);
  const key = nodeKey(nodeId);
  let lastRefusal: unknown;
  for (let attempt = 0; attempt < CONDITION_ATTEMPTS; attempt++) {
    const object = await bucket.get(key);
    let current: Heartbeat | undefined;
    let problem: string | undefined;
    if (object) {
      try {
        current = decodeHeartbeat(object.body, key);
        if (current.nodeId !== nodeId) {
          problem = `line 2 names node ${JSON.stringify(current.nodeId)}`;
          current = undefined;
        }
      } catch (error) {
        if (!(error instanceof MalformedHeartbeat)) throw error;
        problem = error.problem;
      }
    }
    const done = (outcome: Omit<FenceOutcome, "freeAt" | "now" | "nodeId">): FenceOutcome => ({
      ...outcome,
      nodeId,
      freeAt: outcome.heartbeat.at + timing.fenceAfterMs,
      now: clock(),
    });
    if (current?.format === 1) {
      throw new ClusterToolRefusal(
        `${key} is a heartbeat in the format from before node leases: a node of that version ` +
          `does not read fences, so a fence would not stop it. Stop its process; once the ` +
          `heartbeat is older than ${formatDuration(timing.ttlMs + timing.fenceAfterMs)}, ` +
          `wasmkeep cluster forget ${nodeId} removes it`,
      );
    }
    if (current?.lease === "fenced") {
      return done({ action: "already-fenced", heartbeat: current });
    }
    if (current?.lease === "released") {
      return done({ action: "released", heartbeat: current });
    }
    try {
      if (current) {
        await bucket.put(key, fencedText(object!.body), { ifMatch: object!.etag });
        const heartbeat: Heartbeat = { ...current, lease: "fenced", fencedBy: CLI_FENCER };
        return done({
          action: "fenced",
          heartbeat,
          wasLive: isLive(current, clock(), timing.ttlMs),
        });
      }
      const heartbeat: Heartbeat = {
        format: 2,
        nodeId,
        process: "-",
        at: clock(),
        lease: "fenced",
        fencedBy: CLI_FENCER,
        address: "-",
        readsSecrets: false,
        takesMoved: false,
        version: "-",
        state: "serving",
      };
      await bucket.put(
        key,
        encodeHeartbeat(heartbeat),
        object ? { ifMatch: object.etag } : { ifNoneMatch: "*" },
      );
      return done({ action: "created", heartbeat, replacedProblem: problem });
    } catch (error) {
      if (!(error instanceof PreconditionFailed)) throw error;
      lastRefusal = error;
    }
  }
  throw new ClusterToolRefusal(
    `${key} changed under each of ${CONDITION_ATTEMPTS} fence attempts (${
      (lastRefusal as Error).message
    }); nothing was written, try again`,
  );
}

/** What `forgetNode` removed. */
export interface ForgetOutcome {
  nodeId: string;
  /** The heartbeat removed (format 1). */
  heartbeat: Heartbeat;
  /** Its age on this machine's clock when it was removed. */
  ageMs: number;
}

/**
 * Removes a retired node's heartbeat (`wasmkeep cluster forget`): only one in
 * the format from before node leases (format 1) whose time is older than the
 * ttl plus ttl + grace (25 s by default), deleted `If-Match` the ETag read.
 * Refuses a node lease (format 2: leases are never collected), a younger
 * heartbeat, one that cannot be read, and a missing one.
 *
 * @example
 * ```ts
 * import { forgetNode } from "./fence_forget.ts";
 * import type { Bucket } from "../bucket/bucket.ts";
 * declare const bucket: Bucket;
 * await forgetNode(bucket, "old-node");
 * ```
 */
export async function forgetNode(
  bucket: Bucket,
  nodeId: string,
  options: ClusterToolOptions = {},
): Promise<ForgetOutcome> {
  assertNodeId(nodeId, "the node to forget");
  const clock = options.now ?? Date.now;
  const timing = leaseTiming(options.ttlMs);
  const minAgeMs = timing.ttlMs + timing.fenceAfterMs;
  const key = nodeKey(nodeId);
  let removed: ForgetOutcome | undefined;
  for (let attempt = 0; attempt < CONDITION_ATTEMPTS; attempt++) {
    const object = await bucket.get(key);
    if (object === null) {
      // A delete whose answer was lost and whose resend was refused did land.
      if (removed) return removed;
      throw new ClusterToolRefusal(`no heartbeat ${key}: nothing to forget`);
    }
    let heartbeat: Heartbeat;
    try {
      heartbeat = decodeHeartbeat(object.body, key);
    } catch (error) {
      if (!(error instanceof MalformedHeartbeat)) throw error;
      throw new ClusterToolRefusal(
        `${error.message}; not removed: forget removes only a heartbeat in the format from before node leases`,
      );
    }
    if (heartbeat.format === 2) {
      throw new ClusterToolRefusal(
        `${key} is a node lease, not a heartbeat from before node leases: leases are never ` +
          `collected (deleting one frees none of the node's actors). Stop the node (a clean stop ` +
          `releases it), or use wasmkeep cluster fence ${nodeId} to revoke it`,
      );
    }
    const now = clock();
    const ageMs = now - heartbeat.at;
    if (ageMs <= minAgeMs) {
      throw new ClusterToolRefusal(
        `${key} was written ${
          ageMs < 0
            ? `${formatDuration(-ageMs)} ahead of this clock`
            : `${formatDuration(ageMs)} ago`
        }: a heartbeat from before node leases is removed only once it is older than ${
          formatDuration(minAgeMs)
        } (its ${formatDuration(timing.ttlMs)} horizon plus ${
          formatDuration(timing.fenceAfterMs)
        }); stop its node first, then try again in ${formatDuration(minAgeMs - ageMs + 1)}`,
      );
    }
    try {
      removed = { nodeId, heartbeat, ageMs };
      await bucket.delete(key, { ifMatch: object.etag });
      return removed;
    } catch (error) {
      if (!(error instanceof PreconditionFailed)) throw error;
      if (!error.maybeOwnWrite) removed = undefined;
    }
  }
  throw new ClusterToolRefusal(
    `${key} changed under each of ${CONDITION_ATTEMPTS} attempts; nothing was removed, try again`,
  );
}
