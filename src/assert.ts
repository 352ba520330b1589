/**
 * Assertions of invariants: what must hold whatever the input, the bucket or
 * the network do. A violation is a bug of WasmKeep, never an operational
 * failure, so it raises its own {@linkcode AssertionError}, which no caller
 * mistakes for a bucket that did not answer or a request that was refused
 * (TigerBeetle's TIGER_STYLE: assert what you know).
 *
 * @module
 */

/** An invariant of WasmKeep did not hold: a bug, not an operational failure. */
export class AssertionError extends Error {
  constructor(message: string) {
    super(`invariant violated: ${message}`);
    this.name = "AssertionError";
  }
}

/**
 * Raises an {@linkcode AssertionError} with `message` unless `condition` holds.
 *
 * @example
 * ```ts
 * import { assert } from "./assert.ts";
 * const generation = 3n;
 * assert(generation > 0n, "a hold's generation is positive");
 * ```
 */
export function assert(condition: unknown, message: string): asserts condition {
  if (!condition) throw new AssertionError(message);
}
