/**
 * Node ids: the one rule for what names a node, in its heartbeat key
 * `nodes/<id>`, its heartbeat's line 2, its certificates and `--node-id`.
 * A valid id needs no percent-encoding, so its key is `nodes/<id>` as is.
 *
 * @module
 */

/** Node ids: lower-case letters, digits and '-', at most 63, not starting or ending with '-'. */
export const NODE_ID_PATTERN: RegExp = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;

/**
 * Whether `value` is a node id.
 *
 * @example
 * ```ts
 * import { isNodeId } from "./node_id.ts";
 * isNodeId("node-a"); // true
 * isNodeId("Node_A"); // false
 * ```
 */
export function isNodeId(value: unknown): value is string {
  return typeof value === "string" && NODE_ID_PATTERN.test(value);
}

/**
 * Throws a `RangeError` naming `what` and the value unless `value` is a node
 * id: for ids a caller passes in, which are bad input, not a bug.
 *
 * @example
 * ```ts
 * import { assertNodeId } from "./node_id.ts";
 * assertNodeId("node-b", "the node to fence"); // returns
 * // assertNodeId("B", "the node to fence") throws RangeError:
 * // "the node to fence: 'B' is not a node id (lower-case letters, digits and '-', ...)"
 * ```
 */
export function assertNodeId(value: unknown, what: string): asserts value is string {
  if (isNodeId(value)) return;
  const shown = typeof value === "string" ? `'${value}'` : String(value);
  throw new RangeError(
    `${what}: ${shown} is not a node id (lower-case letters, digits and '-', at most 63, not first or last)`,
  );
}
