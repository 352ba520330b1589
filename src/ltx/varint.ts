/**
 * Unsigned LEB128 varints, as Go's `binary.AppendUvarint`/`ReadUvarint`
 * write and read them in the LTX page index.
 *
 * @module
 */

import { LtxError } from "./errors.ts";

/**
 * Appends `value` (a non-negative safe integer) to `out` as a varint.
 *
 * @example
 * ```ts
 * import { appendUvarint } from "./varint.ts";
 * const out: number[] = [];
 * appendUvarint(out, 300); // out is [0xac, 0x02]
 * ```
 */
export function appendUvarint(out: number[], value: number): void {
  while (value >= 0x80) {
    out.push((value % 0x80) | 0x80);
    value = Math.floor(value / 0x80);
  }
  out.push(value);
}

/**
 * Reads a varint at `pos`; returns its value and the position after it.
 * Throws {@linkcode LtxError} if it runs off the end or exceeds 2^53.
 *
 * @example
 * ```ts
 * import { readUvarint } from "./varint.ts";
 * readUvarint(new Uint8Array([0xac, 0x02]), 0); // { value: 300, next: 2 }
 * ```
 */
export function readUvarint(bytes: Uint8Array, pos: number): { value: number; next: number } {
  let value = 0;
  let scale = 1;
  for (let i = pos; i < bytes.length; i++) {
    const b = bytes[i];
    value += (b & 0x7f) * scale;
    if (!Number.isSafeInteger(value)) throw new LtxError("varint too large");
    if ((b & 0x80) === 0) return { value, next: i + 1 };
    scale *= 0x80;
  }
  throw new LtxError("varint runs past the end of the data");
}
