/**
 * Byte-array helpers shared by the modules that assemble messages from
 * chunks.
 *
 * @module
 */

/**
 * Joins `chunks` into one array of `total` bytes (their summed length).
 *
 * @example
 * ```ts
 * import { concatBytes } from "./bytes.ts";
 * concatBytes([new Uint8Array([1]), new Uint8Array([2, 3])], 3); // Uint8Array [1, 2, 3]
 * ```
 */
export function concatBytes(chunks: Uint8Array[], total: number): Uint8Array {
  const joined = new Uint8Array(total);
  let offset = 0;
  for (const chunk of chunks) {
    joined.set(chunk, offset);
    offset += chunk.length;
  }
  return joined;
}
