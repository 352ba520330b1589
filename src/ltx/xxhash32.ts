/**
 * xxHash32, which the LZ4 frame format uses for its header, block and content
 * checksums.
 *
 * @module
 */

const P1 = 2654435761;
const P2 = 2246822519;
const P3 = 3266489917;
const P4 = 668265263;
const P5 = 374761393;

function rotl(x: number, r: number): number {
  return (x << r) | (x >>> (32 - r));
}

function readU32(b: Uint8Array, i: number): number {
  return b[i] | (b[i + 1] << 8) | (b[i + 2] << 16) | (b[i + 3] << 24);
}

function round(acc: number, lane: number): number {
  return Math.imul(rotl((acc + Math.imul(lane, P2)) | 0, 13), P1);
}

/**
 * The 32-bit xxHash of `bytes` with `seed`, as an unsigned number.
 *
 * @example
 * ```ts
 * import { xxhash32 } from "./xxhash32.ts";
 * xxhash32(new Uint8Array(0)); // 0x02cc5d05
 * ```
 */
export function xxhash32(bytes: Uint8Array, seed = 0): number {
  const n = bytes.length;
  let i = 0;
  let h: number;
  if (n >= 16) {
    let v1 = (seed + P1 + P2) | 0;
    let v2 = (seed + P2) | 0;
    let v3 = seed | 0;
    let v4 = (seed - P1) | 0;
    for (; i + 16 <= n; i += 16) {
      v1 = round(v1, readU32(bytes, i));
      v2 = round(v2, readU32(bytes, i + 4));
      v3 = round(v3, readU32(bytes, i + 8));
      v4 = round(v4, readU32(bytes, i + 12));
    }
    h = (rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18)) | 0;
  } else {
    h = (seed + P5) | 0;
  }
  h = (h + n) | 0;
  for (; i + 4 <= n; i += 4) {
    h = Math.imul(rotl((h + Math.imul(readU32(bytes, i), P3)) | 0, 17), P4);
  }
  for (; i < n; i++) {
    h = Math.imul(rotl((h + Math.imul(bytes[i], P5)) | 0, 11), P1);
  }
  h = Math.imul(h ^ (h >>> 15), P2);
  h = Math.imul(h ^ (h >>> 13), P3);
  return (h ^ (h >>> 16)) >>> 0;
}
