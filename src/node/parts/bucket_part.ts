/**
 * The node's bucket, its requests counted, and what stands on it first: the
 * metrics that count them, the process's token and the ownership records.
 *
 * @module
 */

import type { Bucket } from "../../bucket/bucket.ts";
import { countedBucket } from "../../bucket/counted.ts";
import { randomHex } from "../../bucket/random.ts";
import { OwnershipRecords } from "../../cluster/ownership.ts";
import { MetricsRegistry } from "../../metrics/registry.ts";
import { NodeCounters } from "../../metrics/node_counters.ts";
import type { NodeInput, NodeSeams } from "./seams.ts";

/** The counted bucket and its records. */
export interface BucketPart {
  metrics: MetricsRegistry;
  counters: NodeCounters;
  /** The bucket, its requests counted (`wasmkeep_bucket_requests_total`). */
  bucket: Bucket;
  processToken: string;
  ownership: OwnershipRecords;
}

/**
 * Builds the bucket part: every counter is exported at 0 from now, each
 * bucket request counted by its operation and area.
 *
 * @example
 * ```ts
 * import { bucketPart } from "./bucket_part.ts";
 * import type { NodeInput, NodeSeams } from "./seams.ts";
 * declare const input: NodeInput;
 * declare const seams: NodeSeams;
 * const { bucket, ownership } = bucketPart(input, seams);
 * ```
 */
export function bucketPart(input: NodeInput, seams: NodeSeams): BucketPart {
  const { options, catalog } = input;
  const metrics = new MetricsRegistry();
  // Every counter, with each value of its labels, is exported at 0 from now.
  const counters = new NodeCounters(metrics, catalog.specs().map((c) => c.className), {
    cluster: options.cluster !== undefined,
  });
  const bucket = countedBucket(seams.bucket, (op, area) => counters.bucketRequest(op, area));
  const processToken = seams.processToken ?? randomHex(seams.random, 8);
  const ownership = new OwnershipRecords({
    bucket,
    clock: seams.clock,
    nodeId: options.nodeId,
    processToken,
    log: seams.log,
    observer: seams.observers?.ownership,
  });
  return { metrics, counters, bucket, processToken, ownership };
}
