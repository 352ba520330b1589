/**
 * A seeded source of randomness, so a fault-injecting bucket or a simulation
 * replays the same run from the same seed.
 *
 * @module
 */

import type { Random } from "../time/clock.ts";

/**
 * A {@linkcode Random} from a 32-bit seed (mulberry32: small, fast and good
 * enough to draw faults and jitter; not for secrets).
 *
 * @example Same seed, same sequence
 * ```ts
 * import { seededRandom } from "./random.ts";
 * const a = seededRandom(7), b = seededRandom(7);
 * console.log(a.next() === b.next()); // true
 * ```
 */
export function seededRandom(seed: number): Random {
  let state = seed >>> 0;
  const nextUint32 = (): number => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return (t ^ (t >>> 14)) >>> 0;
  };
  return {
    next: () => nextUint32() / 2 ** 32,
    fill(bytes) {
      for (let i = 0; i < bytes.length; i++) bytes[i] = nextUint32() & 0xff;
      return bytes;
    },
  };
}

/**
 * `bytes` random bytes as lowercase hex, e.g. for a throwaway key.
 *
 * @example
 * ```ts
 * import { randomHex } from "./random.ts";
 * import { systemRandom } from "../time/clock.ts";
 * randomHex(systemRandom, 8).length; // 16
 * ```
 */
export function randomHex(random: Random, bytes: number): string {
  return Array.from(random.fill(new Uint8Array(bytes)), (b) => b.toString(16).padStart(2, "0"))
    .join("");
}
