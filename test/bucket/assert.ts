/**
 * The assertions the bucket tests use, on `node:assert/strict`, with the
 * names and return values of the usual Deno ones.
 *
 * @module
 */

import nodeAssert from "node:assert/strict";

/** Fails unless `value` is truthy. */
export function assert(value: unknown, message?: string): asserts value {
  nodeAssert.ok(value, message);
}

/** Fails unless `actual` deeply equals `expected`. */
export function assertEquals<T>(actual: T, expected: T, message?: string): void {
  nodeAssert.deepStrictEqual(actual, expected, message);
}

/** Fails unless `run` rejects with an instance of `type`; resolves to the error. */
export async function assertRejects<E extends Error>(
  run: () => Promise<unknown>,
  // deno-lint-ignore no-explicit-any
  type: new (...args: any[]) => E,
): Promise<E> {
  try {
    await run();
  } catch (e) {
    nodeAssert.ok(e instanceof type, `expected ${type.name}, got ${e}`);
    return e;
  }
  throw new nodeAssert.AssertionError({ message: `expected a rejection with ${type.name}` });
}
