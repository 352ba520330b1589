/**
 * A bucket whose requests are counted, by operation and by the part of the
 * layout they touch (the first segment of the key or listed prefix:
 * `alarms`, `actors`, `owners`, …): what `wasmkeep_bucket_requests_total`
 * exports, so an operator sees what a node costs in bucket requests.
 *
 * @module
 */

import type { Bucket } from "./bucket.ts";
import { BucketView } from "./bucket_view.ts";

/** A bucket call. */
export type BucketOp = "get" | "head" | "put" | "delete" | "list";

/** Every operation, for labels registered at 0. */
export const BUCKET_OPS: readonly BucketOp[] = ["get", "head", "put", "delete", "list"];

/** The parts of the layout counted apart; any other key is `other`. */
export const BUCKET_AREAS = [
  "nodes",
  "owners",
  "actors",
  "alarms",
  "apps",
  "cluster",
  "probe",
  "other",
] as const;

/** A part of the layout. */
export type BucketArea = (typeof BUCKET_AREAS)[number];

/**
 * The part of the layout `key` (or a listed prefix) is in.
 *
 * @example
 * ```ts
 * import { bucketArea } from "./counted.ts";
 * bucketArea("alarms/default/000001700000000/room/lobby"); // "alarms"
 * bucketArea("elsewhere"); // "other"
 * ```
 */
export function bucketArea(key: string): BucketArea {
  const first = key.slice(0, key.indexOf("/") >>> 0);
  return (BUCKET_AREAS as readonly string[]).includes(first) ? first as BucketArea : "other";
}

/**
 * `bucket`, with `count` told of each request as it is made (a request
 * the bucket fails is counted too: it cost a request).
 *
 * @example
 * ```ts
 * import { countedBucket } from "./counted.ts";
 * import { MemoryBucket } from "./memory.ts";
 * const seen: string[] = [];
 * const bucket = countedBucket(new MemoryBucket(), (op, area) => seen.push(`${op} ${area}`));
 * await bucket.put("alarms/x", new Uint8Array());
 * console.log(seen); // ["put alarms"]
 * ```
 */
export function countedBucket(
  bucket: Bucket,
  count: (op: BucketOp, area: BucketArea) => void,
): Bucket {
  return new BucketView(bucket, {
    before: (call) => {
      count(call.op, bucketArea(call.key));
    },
  });
}

/**
 * Counts of requests by `op area`, gathered to be sent at once (an
 * executor tells its node once a second, not at every request).
 *
 * @example
 * ```ts
 * import { RequestTally } from "./counted.ts";
 * const tally = new RequestTally();
 * tally.add("put", "alarms");
 * tally.take(); // { "put alarms": 1 }
 * ```
 */
export class RequestTally {
  #counts: Record<string, number> = {};
  #empty = true;

  /** One request more. */
  add(op: BucketOp, area: BucketArea): void {
    const id = `${op} ${area}`;
    this.#counts[id] = (this.#counts[id] ?? 0) + 1;
    this.#empty = false;
  }

  /** The counts since the last take, or `undefined` when there are none. */
  take(): Record<string, number> | undefined {
    if (this.#empty) return undefined;
    const counts = this.#counts;
    this.#counts = {};
    this.#empty = true;
    return counts;
  }
}
