/**
 * A decoder for the LZ4 frame format (magic 0x184D2204), which LTX writers
 * before the "size prefix + block" change used for each page. A frame carries
 * no outer length, so the decoder reports how many bytes it consumed: that is
 * where the next LTX page header starts.
 *
 * @module
 */

import { LtxError } from "./errors.ts";
import { decompressBlockInto } from "./lz4_block.ts";
import { xxhash32 } from "./xxhash32.ts";

/** The little-endian magic number opening every LZ4 frame. */
export const LZ4_FRAME_MAGIC = 0x184d2204;

const BLOCK_MAX_SIZES: Record<number, number> = { 4: 1 << 16, 5: 1 << 18, 6: 1 << 20, 7: 1 << 22 };

/** What {@linkcode decodeLz4Frame} returns. */
export interface Lz4FrameResult {
  /** The decompressed content. */
  data: Uint8Array;
  /** How many bytes of the input the frame occupied, end mark and checksums included. */
  length: number;
}

/**
 * Decodes the LZ4 frame at the start of `src`, whose content must be exactly
 * `size` bytes. Verifies the header checksum and, when the frame has them, the
 * block and content checksums. Throws {@linkcode LtxError} naming the problem.
 *
 * @example
 * ```ts
 * import { decodeLz4Frame } from "./lz4_frame.ts";
 * declare const bytes: Uint8Array; // a page header is 6 bytes, the frame follows it
 * const { data, length } = decodeLz4Frame(bytes.subarray(6), 4096);
 * ```
 */
export function decodeLz4Frame(src: Uint8Array, size: number): Lz4FrameResult {
  const view = new DataView(src.buffer, src.byteOffset, src.byteLength);
  const need = (end: number, what: string) => {
    if (end > src.length) throw new LtxError(`lz4 frame truncated in its ${what}`);
  };
  need(7, "header");
  const magic = view.getUint32(0, true);
  if (magic !== LZ4_FRAME_MAGIC) {
    throw new LtxError(`lz4 frame magic 0x${magic.toString(16)}, expected 0x184d2204`);
  }
  const flg = src[4];
  const bd = src[5];
  if (flg >>> 6 !== 1) throw new LtxError(`lz4 frame version ${flg >>> 6} not supported`);
  if (flg & 0x02 || bd & 0x8f) throw new LtxError("lz4 frame reserved bits set");
  const linked = (flg & 0x20) === 0;
  const blockChecksums = (flg & 0x10) !== 0;
  const hasContentSize = (flg & 0x08) !== 0;
  const contentChecksum = (flg & 0x04) !== 0;
  if (flg & 0x01) throw new LtxError("lz4 frame needs a dictionary, which LTX never uses");
  const blockMax = BLOCK_MAX_SIZES[(bd >>> 4) & 7];
  if (blockMax === undefined) throw new LtxError(`lz4 frame block size code ${(bd >>> 4) & 7}`);

  const descEnd = 6 + (hasContentSize ? 8 : 0);
  need(descEnd + 1, "header");
  const headerCheck = (xxhash32(src.subarray(4, descEnd)) >>> 8) & 0xff;
  if (src[descEnd] !== headerCheck) throw new LtxError("lz4 frame header checksum mismatch");
  if (hasContentSize && view.getBigUint64(6, true) !== BigInt(size)) {
    throw new LtxError(`lz4 frame content size ${view.getBigUint64(6, true)}, expected ${size}`);
  }

  const out = new Uint8Array(size);
  let o = 0;
  let i = descEnd + 1;
  for (;;) {
    need(i + 4, "block size");
    const word = view.getUint32(i, true);
    i += 4;
    if (word === 0) break;
    const stored = (word & 0x80000000) !== 0;
    const len = word & 0x7fffffff;
    if (len > blockMax) throw new LtxError(`lz4 frame block of ${len} bytes over its maximum`);
    need(i + len + (blockChecksums ? 4 : 0), "block");
    const block = src.subarray(i, i + len);
    i += len;
    if (blockChecksums) {
      if (view.getUint32(i, true) !== xxhash32(block)) {
        throw new LtxError("lz4 frame block checksum mismatch");
      }
      i += 4;
    }
    if (stored) {
      if (o + len > size) throw new LtxError("lz4 frame content larger than expected");
      out.set(block, o);
      o += len;
    } else {
      o = decompressBlockInto(block, out, o, linked ? 0 : o);
    }
  }
  if (o !== size) throw new LtxError(`lz4 frame content is ${o} bytes, expected ${size}`);
  if (contentChecksum) {
    need(i + 4, "content checksum");
    if (view.getUint32(i, true) !== xxhash32(out)) {
      throw new LtxError("lz4 frame content checksum mismatch");
    }
    i += 4;
  }
  return { data: out, length: i };
}
