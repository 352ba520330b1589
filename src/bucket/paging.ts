/**
 * Listing pages over keys already in order, for the stores that list from
 * their own index (memory, files) the way S3 pages its listings.
 *
 * @module
 */

import { type ListOptions, MAX_KEYS_PER_PAGE } from "./bucket.ts";

/** One page of keys, and the token of the next one if any. */
export interface KeyPage {
  /** The page's keys, in order. */
  keys: string[];
  /** Where the next page starts, absent on the last page. */
  continuationToken?: string;
}

/**
 * The number of keys a page may hold: `maxKeys` within 1 to 1000.
 *
 * @example
 * ```ts
 * import { pageSize } from "./paging.ts";
 * pageSize(5000); // 1000
 * ```
 */
export function pageSize(maxKeys: number | undefined): number {
  if (maxKeys === undefined) return MAX_KEYS_PER_PAGE;
  if (!Number.isInteger(maxKeys) || maxKeys < 1) {
    throw new RangeError(`maxKeys must be a positive integer, not ${maxKeys}`);
  }
  return Math.min(maxKeys, MAX_KEYS_PER_PAGE);
}

/**
 * The lower bound a page starts after: the continuation token (the last key
 * of the previous page) or `startAfter`, whichever is later.
 *
 * @example
 * ```ts
 * import { pageStart } from "./paging.ts";
 * pageStart({ startAfter: "a", continuationToken: "b" }); // "b"
 * ```
 */
export function pageStart(options: ListOptions): string {
  const token = options.continuationToken ?? "";
  const after = options.startAfter ?? "";
  return token > after ? token : after;
}

/**
 * The page of `sortedKeys` that `options` asks for.
 *
 * @example
 * ```ts
 * import { pageOf } from "./paging.ts";
 * pageOf(["a", "b", "c"], { maxKeys: 2 }); // { keys: ["a", "b"], continuationToken: "b" }
 * ```
 */
export function pageOf(sortedKeys: string[], options: ListOptions): KeyPage {
  const size = pageSize(options.maxKeys);
  const start = pageStart(options);
  const from = start === "" ? 0 : firstAfter(sortedKeys, start);
  const keys = sortedKeys.slice(from, from + size);
  const more = from + size < sortedKeys.length;
  return { keys, continuationToken: more ? keys[keys.length - 1] : undefined };
}

function firstAfter(sortedKeys: string[], start: string): number {
  let lo = 0, hi = sortedKeys.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (sortedKeys[mid] <= start) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
