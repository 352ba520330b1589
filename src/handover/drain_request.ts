/**
 * Drain requests: the object `drains/<node>` that tells a node to hand its
 * actors over and claim none (the spec's "Draining a node", ADR 0014).
 * `wasmkeep cluster drain` writes it, `cluster undrain` deletes it, and the
 * node reads its own at every heartbeat. The request says nothing of
 * progress: the node's heartbeat does (draining, drained, stuck).
 *
 * @module
 */

import type { Bucket } from "../bucket/bucket.ts";
import { drainKey, DRAINS_PREFIX } from "../bucket/keys.ts";
import { isNodeId } from "../node_id.ts";

/** The format of a drain request, in its `version` field. */
export const DRAIN_REQUEST_VERSION = 1;

/** A decoded drain request. */
export interface DrainRequest {
  version: typeof DRAIN_REQUEST_VERSION;
  /** The node to drain. */
  node: string;
  /** When it was written, in ms since the epoch on the writer's clock. */
  at: number;
}

/** A drain request object that cannot be read. */
export class MalformedDrainRequest extends Error {
  /**
   * @example
   * ```ts
   * import { MalformedDrainRequest } from "./drain_request.ts";
   * new MalformedDrainRequest("drains/b", "not JSON").message;
   * ```
   */
  constructor(readonly key: string, readonly problem: string) {
    super(`drain request ${key} cannot be read: ${problem}`);
    this.name = "MalformedDrainRequest";
  }
}

/**
 * Encodes a drain request as one line of JSON.
 *
 * @example
 * ```ts
 * import { encodeDrainRequest } from "./drain_request.ts";
 * encodeDrainRequest({ version: 1, node: "b", at: Date.now() });
 * ```
 */
export function encodeDrainRequest(request: DrainRequest): Uint8Array {
  if (!isNodeId(request.node)) throw new TypeError(`not a node id: ${request.node}`);
  return new TextEncoder().encode(JSON.stringify(request) + "\n");
}

/**
 * Decodes a drain request; `key` names it in errors.
 *
 * @example
 * ```ts
 * import { decodeDrainRequest, encodeDrainRequest } from "./drain_request.ts";
 * const bytes = encodeDrainRequest({ version: 1, node: "b", at: 1 });
 * decodeDrainRequest(bytes, "drains/b").node; // "b"
 * ```
 */
export function decodeDrainRequest(bytes: Uint8Array, key: string): DrainRequest {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch {
    throw new MalformedDrainRequest(key, "not UTF-8 JSON");
  }
  const fields = (typeof value === "object" && value !== null ? value : {}) as Record<
    string,
    unknown
  >;
  if (fields.version !== DRAIN_REQUEST_VERSION) {
    throw new MalformedDrainRequest(key, `version ${JSON.stringify(fields.version)}`);
  }
  if (!isNodeId(fields.node)) throw new MalformedDrainRequest(key, "no node id");
  if (typeof fields.at !== "number" || !Number.isFinite(fields.at)) {
    throw new MalformedDrainRequest(key, "no time");
  }
  return { version: DRAIN_REQUEST_VERSION, node: fields.node, at: fields.at };
}

/**
 * The drain requests in the bucket, as `wasmkeep cluster drain` and the
 * nodes read and write them.
 *
 * @example
 * ```ts
 * import { DrainRequests } from "./drain_request.ts";
 * import { MemoryBucket } from "../bucket/memory.ts";
 * const requests = new DrainRequests(new MemoryBucket());
 * await requests.request("b", Date.now());
 * await requests.isRequested("b"); // true
 * await requests.withdraw("b");
 * ```
 */
export class DrainRequests {
  constructor(readonly bucket: Bucket) {}

  /** Writes the request that `node` drain (again, if one is there). */
  async request(node: string, now: number): Promise<void> {
    await this.bucket.put(drainKey(node), encodeDrainRequest({ version: 1, node, at: now }));
  }

  /** Deletes the request; true when there was one. */
  async withdraw(node: string): Promise<boolean> {
    const there = await this.bucket.head(drainKey(node));
    if (!there) return false;
    await this.bucket.delete(drainKey(node));
    return true;
  }

  /**
   * Whether `node` is asked to drain. A request that cannot be read counts
   * as one: an operator wrote something there, and a node that keeps
   * claiming actors against it would be the surprise.
   */
  async isRequested(node: string, signal?: AbortSignal): Promise<boolean> {
    const object = await this.bucket.get(drainKey(node), { signal });
    return object !== null;
  }

  /** The requests in the bucket, by node, read whole; unreadable ones are skipped. */
  async list(): Promise<DrainRequest[]> {
    const found: DrainRequest[] = [];
    let continuationToken: string | undefined;
    do {
      const page = await this.bucket.list(DRAINS_PREFIX, { continuationToken });
      for (const info of page.objects) {
        const object = await this.bucket.get(info.key);
        if (!object) continue;
        try {
          found.push(decodeDrainRequest(object.body, info.key));
        } catch (error) {
          if (!(error instanceof MalformedDrainRequest)) throw error;
        }
      }
      continuationToken = page.continuationToken;
    } while (continuationToken);
    return found;
  }
}
