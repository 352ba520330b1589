/**
 * CRC-64 with the ISO 3309 polynomial, bit-reflected, init and final XOR of
 * all ones: Go's `crc64.New(crc64.MakeTable(crc64.ISO))`, which LTX uses for
 * both the file checksum and the per-page database checksum.
 *
 * @module
 */

// The 64-bit state lives in two uint32 halves: BigInt arithmetic per byte would
// make checksumming a whole database an order of magnitude slower.
const TABLE_HI = new Uint32Array(256);
const TABLE_LO = new Uint32Array(256);
for (let i = 0; i < 256; i++) {
  let hi = 0;
  let lo = i;
  for (let bit = 0; bit < 8; bit++) {
    const lsb = lo & 1;
    lo = ((lo >>> 1) | (hi << 31)) >>> 0;
    hi = hi >>> 1;
    // Reflected ISO polynomial 0xD800000000000000: only the top byte is set.
    if (lsb) hi = (hi ^ 0xd8000000) >>> 0;
  }
  TABLE_HI[i] = hi;
  TABLE_LO[i] = lo;
}

/**
 * An incremental CRC-64/ISO hash.
 *
 * @example
 * ```ts
 * import { Crc64 } from "./crc64.ts";
 * const h = new Crc64();
 * h.update(new TextEncoder().encode("123456789"));
 * h.digest(); // 0xb90956c775a41001n
 * ```
 */
export class Crc64 {
  #hi = 0xffffffff;
  #lo = 0xffffffff;

  /** Feeds `bytes` into the hash; returns `this` so calls can be chained. */
  update(bytes: Uint8Array): this {
    let hi = this.#hi;
    let lo = this.#lo;
    for (let i = 0; i < bytes.length; i++) {
      const idx = (lo ^ bytes[i]) & 0xff;
      lo = (((lo >>> 8) | (hi << 24)) ^ TABLE_LO[idx]) >>> 0;
      hi = ((hi >>> 8) ^ TABLE_HI[idx]) >>> 0;
    }
    this.#hi = hi;
    this.#lo = lo;
    return this;
  }

  /** The CRC of everything fed so far, as an unsigned 64-bit value. */
  digest(): bigint {
    return (BigInt((~this.#hi) >>> 0) << 32n) | BigInt((~this.#lo) >>> 0);
  }
}

/**
 * CRC-64/ISO of `bytes` in one call.
 *
 * @example
 * ```ts
 * import { crc64 } from "./crc64.ts";
 * crc64(new Uint8Array(0)); // 0n
 * ```
 */
export function crc64(bytes: Uint8Array): bigint {
  return new Crc64().update(bytes).digest();
}
