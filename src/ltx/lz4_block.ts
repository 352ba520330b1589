/**
 * The LZ4 block format (no frame): the compression LTX uses for each page
 * since superfly/ltx moved to "size prefix + block". Written here rather than
 * taken from npm because both directions fit in a page of code and the npm
 * packages either need WebAssembly/native builds or only speak the frame format.
 *
 * @module
 */

import { LtxError } from "./errors.ts";

const MIN_MATCH = 4;
// The format requires the last 5 bytes to be literals and the last match to
// start at least 12 bytes before the end of the input.
const LAST_LITERALS = 5;
const MF_LIMIT = 12;
const MAX_OFFSET = 65535;
const HASH_BITS = 14;

/**
 * The largest output {@linkcode compressBlock} can produce for `n` input bytes.
 *
 * @example
 * ```ts
 * import { compressBlockBound } from "./lz4_block.ts";
 * compressBlockBound(4096); // 4128
 * ```
 */
export function compressBlockBound(n: number): number {
  return n + Math.floor(n / 255) + 16;
}

function readU32(b: Uint8Array, i: number): number {
  return (b[i] | (b[i + 1] << 8) | (b[i + 2] << 16) | (b[i + 3] << 24)) >>> 0;
}

function hash(seq: number): number {
  return Math.imul(seq, 2654435761) >>> (32 - HASH_BITS);
}

function writeLength(out: Uint8Array, pos: number, len: number): number {
  while (len >= 255) {
    out[pos++] = 255;
    len -= 255;
  }
  out[pos++] = len;
  return pos;
}

function writeSequence(
  out: Uint8Array,
  pos: number,
  src: Uint8Array,
  litStart: number,
  litLen: number,
  offset: number,
  matchLen: number,
): number {
  const tokenPos = pos++;
  const litCode = Math.min(litLen, 15);
  const matchCode = offset === 0 ? 0 : Math.min(matchLen - MIN_MATCH, 15);
  out[tokenPos] = (litCode << 4) | matchCode;
  if (litLen >= 15) pos = writeLength(out, pos, litLen - 15);
  out.set(src.subarray(litStart, litStart + litLen), pos);
  pos += litLen;
  if (offset === 0) return pos;
  out[pos++] = offset & 0xff;
  out[pos++] = offset >>> 8;
  if (matchLen - MIN_MATCH >= 15) pos = writeLength(out, pos, matchLen - MIN_MATCH - 15);
  return pos;
}

/**
 * Compresses `src` into one LZ4 block (greedy, single hash probe: fast, and
 * SQLite pages are mostly runs of zeros, which any LZ4 parse catches).
 *
 * @example
 * ```ts
 * import { compressBlock, decompressBlock } from "./lz4_block.ts";
 * const page = new Uint8Array(4096);
 * const packed = compressBlock(page); // a few dozen bytes
 * decompressBlock(packed, 4096); // equal to page
 * ```
 */
export function compressBlock(src: Uint8Array): Uint8Array {
  const out = new Uint8Array(compressBlockBound(src.length));
  const table = new Int32Array(1 << HASH_BITS).fill(-1);
  const matchLimit = src.length - LAST_LITERALS;
  let pos = 0;
  let anchor = 0;
  let i = 0;
  while (i < src.length - MF_LIMIT) {
    const seq = readU32(src, i);
    const h = hash(seq);
    const ref = table[h];
    table[h] = i;
    if (ref < 0 || i - ref > MAX_OFFSET || readU32(src, ref) !== seq) {
      i++;
      continue;
    }
    let len = MIN_MATCH;
    while (i + len < matchLimit && src[ref + len] === src[i + len]) len++;
    pos = writeSequence(out, pos, src, anchor, i - anchor, i - ref, len);
    i += len;
    anchor = i;
  }
  pos = writeSequence(out, pos, src, anchor, src.length - anchor, 0, 0);
  return out.slice(0, pos);
}

/**
 * Decompresses LZ4 block data into `dst` starting at `dstPos`; matches may
 * reach back to `windowStart` (earlier blocks of a linked LZ4 frame). Returns
 * the position after the last byte written. Throws {@linkcode LtxError} on
 * malformed input or if the output would not fit.
 *
 * @example
 * ```ts
 * import { compressBlock, decompressBlockInto } from "./lz4_block.ts";
 * const out = new Uint8Array(100);
 * decompressBlockInto(compressBlock(new Uint8Array(100)), out, 0, 0); // 100
 * ```
 */
export function decompressBlockInto(
  src: Uint8Array,
  dst: Uint8Array,
  dstPos: number,
  windowStart: number,
): number {
  let i = 0;
  let o = dstPos;
  const readLength = (base: number): number => {
    let len = base;
    if (base !== 15) return len;
    let b: number;
    do {
      if (i >= src.length) throw new LtxError("lz4 block truncated in a length");
      b = src[i++];
      len += b;
    } while (b === 255);
    return len;
  };
  while (i < src.length) {
    const token = src[i++];
    const litLen = readLength(token >>> 4);
    if (i + litLen > src.length) throw new LtxError("lz4 block literals run past its end");
    if (o + litLen > dst.length) throw new LtxError("lz4 block output larger than expected");
    dst.set(src.subarray(i, i + litLen), o);
    i += litLen;
    o += litLen;
    // The last sequence has literals only: the block ends right after them.
    if (i === src.length) return o;
    if (i + 2 > src.length) throw new LtxError("lz4 block truncated in a match offset");
    const offset = src[i] | (src[i + 1] << 8);
    i += 2;
    if (offset === 0 || o - offset < windowStart) {
      throw new LtxError(`lz4 block match offset ${offset} outside the window`);
    }
    const matchLen = readLength(token & 15) + MIN_MATCH;
    if (o + matchLen > dst.length) throw new LtxError("lz4 block output larger than expected");
    // Byte by byte: an overlapping match (offset < length) repeats a pattern.
    for (let ref = o - offset, end = o + matchLen; o < end;) dst[o++] = dst[ref++];
  }
  throw new LtxError("lz4 block ends without a final literal run");
}

/**
 * Decompresses one LZ4 block that must expand to exactly `size` bytes.
 *
 * @example
 * ```ts
 * import { compressBlock, decompressBlock } from "./lz4_block.ts";
 * decompressBlock(compressBlock(new Uint8Array(4096)), 4096).length; // 4096
 * ```
 */
export function decompressBlock(src: Uint8Array, size: number): Uint8Array {
  const out = new Uint8Array(size);
  const end = decompressBlockInto(src, out, 0, 0);
  if (end !== size) throw new LtxError(`lz4 block decompressed to ${end} bytes, expected ${size}`);
  return out;
}
