/**
 * What `wasmkeep cluster drain` and `cluster undrain` do in the bucket (the
 * spec's "Draining a node"): write or delete the node's drain request, after
 * checking that a live node has the id, as `cluster status` counts it. A
 * request for a mistyped id would stay in the bucket until an undrain with
 * the same typo, so both refuse an id no live node has unless forced; an
 * undrain still withdraws a request no node answers to.
 *
 * @module
 */

import type { Bucket } from "../bucket/bucket.ts";
import { drainKey } from "../bucket/keys.ts";
import { ClusterToolRefusal } from "../cluster/fence_forget.ts";
import {
  type ClusterToolOptions,
  type NodeStatus,
  readNodeStatus,
  reportedState,
  whyNotLive,
} from "../cluster/status.ts";
import { assertNodeId } from "../node_id.ts";
import { DrainRequests } from "./drain_request.ts";

/** Options of {@linkcode drainNode} and {@linkcode undrainNode}. */
export interface DrainCommandOptions extends ClusterToolOptions {
  /** Write or delete the request even when no live node has the id (a node about to start). */
  force?: boolean;
}

/** What {@linkcode drainNode} or {@linkcode undrainNode} found and did. */
export interface DrainOutcome {
  nodeId: string;
  /** `requested`: the request was written; `withdrawn`: deleted; `none`: there was none to delete. */
  action: "requested" | "withdrawn" | "none";
  /** The node's heartbeat as read, `null` when it has none. */
  node: NodeStatus | null;
  /** Why the node is not live, when it is not (the request was forced, or withdrawn anyway). */
  notLive?: string;
  /** For `requested`: a request was there already, and was written anew. */
  again?: boolean;
  /** For `requested`: the live node predates draining, so it will not act on the request. */
  predatesDraining?: boolean;
}

/**
 * Asks node `nodeId` to drain (`wasmkeep cluster drain`): writes
 * `drains/<id>`. Refuses with {@linkcode ClusterToolRefusal} when no live
 * node has the id, unless `force`.
 *
 * @example
 * ```ts
 * import { drainNode } from "./drain_command.ts";
 * import { MemoryBucket } from "../bucket/memory.ts";
 * // No heartbeat nodes/node-b: only with force.
 * (await drainNode(new MemoryBucket(), "node-b", { force: true })).action; // "requested"
 * ```
 */
export async function drainNode(
  bucket: Bucket,
  nodeId: string,
  options: DrainCommandOptions = {},
): Promise<DrainOutcome> {
  assertNodeId(nodeId, "the node to drain");
  const clock = options.now ?? Date.now;
  const node = await readNodeStatus(bucket, nodeId, options);
  const notLive = whyNotLive(node, nodeId);
  if (notLive !== undefined && !options.force) {
    throw new ClusterToolRefusal(
      `no live node has the id ${nodeId} (${notLive}); check the id with wasmkeep cluster status, ` +
        `or give --force to write the request anyway (for a node about to start)`,
    );
  }
  const requests = new DrainRequests(bucket);
  const again = await requests.isRequested(nodeId);
  await requests.request(nodeId, clock());
  return {
    nodeId,
    action: "requested",
    node,
    notLive,
    again,
    predatesDraining: node?.live === true && reportedState(node.heartbeat!) === undefined,
  };
}

/**
 * Withdraws node `nodeId`'s drain request (`wasmkeep cluster undrain`):
 * deletes `drains/<id>`, whether or not a live node has the id. With no
 * request and no live node of that id, refuses with
 * {@linkcode ClusterToolRefusal} unless `force` (a mistyped id).
 *
 * @example
 * ```ts
 * import { undrainNode } from "./drain_command.ts";
 * import { MemoryBucket } from "../bucket/memory.ts";
 * (await undrainNode(new MemoryBucket(), "node-b", { force: true })).action; // "none"
 * ```
 */
export async function undrainNode(
  bucket: Bucket,
  nodeId: string,
  options: DrainCommandOptions = {},
): Promise<DrainOutcome> {
  assertNodeId(nodeId, "the node to undrain");
  const node = await readNodeStatus(bucket, nodeId, options);
  const notLive = whyNotLive(node, nodeId);
  const withdrawn = await new DrainRequests(bucket).withdraw(nodeId);
  if (!withdrawn && notLive !== undefined && !options.force) {
    throw new ClusterToolRefusal(
      `no live node has the id ${nodeId} (${notLive}) and there is no drain request ` +
        `${drainKey(nodeId)}: nothing withdrawn; check the id with wasmkeep cluster status, ` +
        `or give --force for a node about to start`,
    );
  }
  return { nodeId, action: withdrawn ? "withdrawn" : "none", node, notLive };
}
