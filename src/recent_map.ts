/**
 * A map that keeps only its most recently set entries: the bound of the
 * runtime's memories of actors that are not resident (what a sleeping
 * actor must not forget, what a given-up one must refuse).
 *
 * @module
 */

import { assert } from "./assert.ts";

/**
 * A map of at most `max` entries; setting one past it forgets the one set
 * longest ago.
 *
 * @example
 * ```ts
 * import { RecentMap } from "./recent_map.ts";
 * const recent = new RecentMap<string, number>(2);
 * recent.set("a", 1);
 * recent.set("b", 2);
 * recent.set("c", 3);
 * console.log(recent.get("a"), recent.get("c")); // undefined 3
 * ```
 */
export class RecentMap<K, V> {
  readonly #entries = new Map<K, V>();

  constructor(readonly max: number) {
    assert(Number.isInteger(max) && max > 0, `a recent map holds at least one entry: ${max}`);
  }

  /** The entry of `key`, if it is remembered. */
  get(key: K): V | undefined {
    return this.#entries.get(key);
  }

  /** Remembers `value` as the most recent entry. */
  set(key: K, value: V): void {
    this.#entries.delete(key);
    this.#entries.set(key, value);
    if (this.#entries.size > this.max) this.#entries.delete(this.#entries.keys().next().value!);
  }

  /** Forgets `key`. */
  delete(key: K): void {
    this.#entries.delete(key);
  }

  /** The entries remembered. */
  get size(): number {
    return this.#entries.size;
  }
}
