/**
 * The loss of a node's lease to another writer: what was found in the
 * heartbeat instead (a fence, nothing, another process's heartbeat, or bytes
 * that cannot be read back), as the error the lease ends with.
 *
 * Apart from the lease (`node_lease.ts`) because who reacts to a loss (the
 * node's stop) needs the error alone, and the lease's writes
 * (`heartbeat_writes.ts`) judge a refused write into one.
 *
 * @module
 */

import type { StoredObject } from "../bucket/bucket.ts";
import { decodeHeartbeat, type Heartbeat } from "./heartbeat.ts";

/** What the lease found in the object when it learnt another writer replaced it. */
export type LeaseLossKind = "fenced" | "deleted" | "another-writer" | "unreadable";

/**
 * The lease was taken by another writer: the node must drop its actors and
 * stop. `heartbeat` is the object read back, when it could be read and
 * decoded.
 *
 * @example
 * ```ts
 * import { NodeLeaseLost } from "./lease_loss.ts";
 * const e = new NodeLeaseLost("nodes/a", "deleted");
 * console.log(e.message); // the node lease nodes/a was lost: the heartbeat was deleted
 * console.log(e.detail); // the heartbeat was deleted
 * ```
 */
export class NodeLeaseLost extends Error {
  /** Always `"NodeLeaseLost"`, for logs and structured errors. */
  override name = "NodeLeaseLost";
  /** The heartbeat's key. */
  readonly key: string;
  /** What replaced the lease. */
  readonly kind: LeaseLossKind;
  /** The heartbeat found instead, when it was read and decoded. */
  readonly heartbeat?: Heartbeat;
  /** What happened to the heartbeat, without the key: `node b fenced it`. */
  readonly detail: string;

  /** Describes the loss of the lease at `key`. */
  constructor(key: string, kind: LeaseLossKind, heartbeat?: Heartbeat) {
    const detail = explain(key, kind, heartbeat);
    super(`the node lease ${key} was lost: ${detail}`);
    this.detail = detail;
    this.key = key;
    this.kind = kind;
    this.heartbeat = heartbeat;
  }
}

function explain(key: string, kind: LeaseLossKind, heartbeat?: Heartbeat): string {
  switch (kind) {
    case "fenced":
      return `node ${heartbeat?.fencedBy ?? "(unknown)"} fenced it`;
    case "deleted":
      return "the heartbeat was deleted";
    case "unreadable":
      return "another writer replaced the heartbeat (it could not be read back)";
    case "another-writer":
      return heartbeat
        ? `another writer replaced the heartbeat (process ${heartbeat.process}, ` +
          `${heartbeat.lease}, address ${heartbeat.address || "unknown"})`
        : `another writer replaced ${key}`;
  }
}

/**
 * The loss another writer's object at `key` means: `deleted` with none,
 * `unreadable` when it is not a heartbeat, `fenced` or `another-writer`
 * with the heartbeat found.
 *
 * @example
 * ```ts
 * import { lossOf } from "./lease_loss.ts";
 * lossOf("nodes/a", null).kind; // "deleted"
 * ```
 */
export function lossOf(key: string, object: StoredObject | null): NodeLeaseLost {
  if (!object) return new NodeLeaseLost(key, "deleted");
  let heartbeat: Heartbeat;
  try {
    heartbeat = decodeHeartbeat(object.body, key);
  } catch {
    return new NodeLeaseLost(key, "unreadable");
  }
  return new NodeLeaseLost(
    key,
    heartbeat.lease === "fenced" ? "fenced" : "another-writer",
    heartbeat,
  );
}
