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
// 4,096 entries (16 KiB): what the reference LZ4 uses, and enough for a page.
const HASH_BITS = 12;
// After 2^SKIP_TRIGGER probes without a match, the search steps 2 bytes, then
// 3..., as the reference LZ4 does: data that does not compress (random blobs)
// costs a fraction of a probe per byte, and a match found is extended
// backwards over what the steps skipped.
const SKIP_TRIGGER = 6;

// One hash table for every call (compression is synchronous). Entries hold
// `position + base`; `base` moves past every position of the previous call,
// so its entries read as missing without clearing 16 KiB per page.
const TABLE = new Int32Array(1 << HASH_BITS);
let base = 1;
// Where compressBlock writes a block before copying it out at its exact size.
let scratch = new Uint8Array(0);

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

function writeLiterals(
  out: Uint8Array,
  pos: number,
  src: Uint8Array,
  start: number,
  len: number,
): number {
  if (len < 32) {
    for (let k = 0; k < len; k++) out[pos + k] = src[start + k];
  } else {
    out.set(src.subarray(start, start + len), pos);
  }
  return pos + len;
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
  pos = writeLiterals(out, pos, src, litStart, litLen);
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
  const bound = compressBlockBound(src.length);
  if (scratch.length < bound) scratch = new Uint8Array(Math.max(bound, 4096 + 32));
  return scratch.slice(0, compressBlockInto(src, scratch, 0));
}

/**
 * Compresses `src` into one LZ4 block written to `dst` from `dstPos`, which
 * must leave room for {@linkcode compressBlockBound} bytes; returns the
 * position after the block.
 *
 * @example
 * ```ts
 * import { compressBlockBound, compressBlockInto } from "./lz4_block.ts";
 * const page = new Uint8Array(4096);
 * const out = new Uint8Array(8 + compressBlockBound(page.length));
 * const end = compressBlockInto(page, out, 8); // the block is out[8..end)
 * ```
 */
export function compressBlockInto(src: Uint8Array, dst: Uint8Array, dstPos: number): number {
  const n = src.length;
  if (dst.length - dstPos < compressBlockBound(n)) {
    throw new RangeError(`compressBlockInto: ${dst.length - dstPos} bytes of room for ${n}`);
  }
  const out = dst;
  if (base > 0x7fffffff - n - 1) {
    TABLE.fill(0);
    base = 1;
  }
  const b = base;
  base += n + 1;
  // Unaligned little-endian reads: one load each for four bytes.
  const view = new DataView(src.buffer, src.byteOffset, n);
  const matchLimit = n - LAST_LITERALS;
  const searchLimit = n - MF_LIMIT;
  let pos = dstPos;
  let anchor = 0;
  let i = 0;
  let probes = 1 << SKIP_TRIGGER;
  while (i < searchLimit) {
    const seq = view.getInt32(i, true);
    const h = hash(seq);
    const ref = TABLE[h] - b;
    TABLE[h] = i + b;
    if (ref < 0 || i - ref > MAX_OFFSET || view.getInt32(ref, true) !== seq) {
      i += probes++ >> SKIP_TRIGGER;
      continue;
    }
    probes = 1 << SKIP_TRIGGER;
    // Extend backwards over bytes a step skipped, then forwards.
    let start = i;
    let from = ref;
    while (start > anchor && from > 0 && src[start - 1] === src[from - 1]) {
      start--;
      from--;
    }
    let end = i + MIN_MATCH;
    let at = ref + MIN_MATCH;
    while (end + 4 <= matchLimit && view.getInt32(end, true) === view.getInt32(at, true)) {
      end += 4;
      at += 4;
    }
    while (end < matchLimit && src[end] === src[at]) {
      end++;
      at++;
    }
    pos = writeSequence(out, pos, src, anchor, start - anchor, start - from, end - start);
    i = end;
    anchor = i;
  }
  return writeSequence(out, pos, src, anchor, n - anchor, 0, 0);
}

/**
 * Copies a match of `len` bytes from `offset` back to `o`; returns the end.
 * An overlapping match (offset < length) repeats its first `offset` bytes.
 */
function copyMatch(dst: Uint8Array, o: number, offset: number, len: number): number {
  const end = o + len;
  if (len < 32) {
    for (let ref = o - offset; o < end;) dst[o++] = dst[ref++];
    return end;
  }
  if (offset === 1) {
    dst.fill(dst[o - 1], o, end);
    return end;
  }
  // What is written repeats with period `offset` from `ref`: a copy of a
  // whole number of periods from `ref` can double each time.
  const ref = o - offset;
  let period = offset;
  while (o < end) {
    const chunk = Math.min(period, end - o);
    dst.copyWithin(o, ref, ref + chunk);
    o += chunk;
    period += chunk;
  }
  return end;
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
  const n = src.length;
  while (i < n) {
    const token = src[i++];
    let litLen = token >>> 4;
    if (litLen === 15) {
      let b: number;
      do {
        if (i >= n) throw new LtxError("lz4 block truncated in a length");
        b = src[i++];
        litLen += b;
      } while (b === 255);
    }
    if (i + litLen > n) throw new LtxError("lz4 block literals run past its end");
    if (o + litLen > dst.length) throw new LtxError("lz4 block output larger than expected");
    if (litLen < 32) {
      for (let k = 0; k < litLen; k++) dst[o + k] = src[i + k];
    } else {
      dst.set(src.subarray(i, i + litLen), o);
    }
    i += litLen;
    o += litLen;
    // The last sequence has literals only: the block ends right after them.
    if (i === n) return o;
    if (i + 2 > n) throw new LtxError("lz4 block truncated in a match offset");
    const offset = src[i] | (src[i + 1] << 8);
    i += 2;
    if (offset === 0 || o - offset < windowStart) {
      throw new LtxError(`lz4 block match offset ${offset} outside the window`);
    }
    let matchLen = token & 15;
    if (matchLen === 15) {
      let b: number;
      do {
        if (i >= n) throw new LtxError("lz4 block truncated in a length");
        b = src[i++];
        matchLen += b;
      } while (b === 255);
    }
    matchLen += MIN_MATCH;
    if (o + matchLen > dst.length) throw new LtxError("lz4 block output larger than expected");
    o = copyMatch(dst, o, offset, matchLen);
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
