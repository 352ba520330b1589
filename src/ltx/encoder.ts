/**
 * Writes LTX files in the current superfly/ltx layout: header, page frames
 * (page header with the size flag, u32 size, LZ4 block), an empty page header,
 * the page index, its size, and the trailer.
 *
 * @module
 */

import { CHECKSUM_FLAG } from "./checksum.ts";
import { Crc64 } from "./crc64.ts";
import { LtxError } from "./errors.ts";
import {
  checkPageOrder,
  checkSnapshotEnd,
  encodeHeader,
  hasNoChecksum,
  type LtxHeader,
  PAGE_FLAG_SIZE,
  PAGE_HEADER_SIZE,
  TRAILER_SIZE,
  validateHeader,
} from "./header.ts";
import { compressBlock } from "./lz4_block.ts";
import { appendUvarint } from "./varint.ts";

/** One database page: its number (from 1) and its `pageSize` bytes. */
export interface LtxPage {
  /** Page number, starting at 1. */
  pgno: number;
  /** The page content, exactly the header's page size. */
  data: Uint8Array;
}

/**
 * The header fields a writer must choose; the WAL fields, the node id, the
 * flags and the pre-apply checksum default to 0.
 */
export type LtxHeaderInit =
  & Pick<LtxHeader, "pageSize" | "commit" | "minTxid" | "maxTxid" | "timestamp">
  & Partial<LtxHeader>;

/** What {@linkcode encodeLtx} writes. */
export interface LtxEncodeInput {
  /** The header; see {@linkcode LtxHeaderInit} for defaults. */
  header: LtxHeaderInit;
  /**
   * Pages in ascending page number, each at most `commit`, never the lock
   * page; a snapshot (`minTxid` 1) holds every page from 1 to `commit`.
   */
  pages: Iterable<LtxPage>;
  /** Database checksum after the file applies; 0 when the header has no checksums. */
  postApplyChecksum: bigint;
}

function fullHeader(init: LtxHeaderInit): LtxHeader {
  return {
    flags: 0,
    preApplyChecksum: 0n,
    walOffset: 0,
    walSize: 0,
    walSalt1: 0,
    walSalt2: 0,
    nodeId: 0n,
    ...init,
  };
}

/**
 * Encodes one LTX file. Throws {@linkcode LtxError} if the header or pages
 * break the rules superfly/ltx's encoder enforces (page order, bounds, the
 * lock page, a complete snapshot, checksum presence).
 *
 * @example
 * ```ts
 * import { encodeLtx } from "./encoder.ts";
 * import { databaseChecksum } from "./checksum.ts";
 * const page = new Uint8Array(4096);
 * const bytes = encodeLtx({
 *   header: { pageSize: 4096, commit: 1, minTxid: 1n, maxTxid: 1n, timestamp: Date.now() },
 *   pages: [{ pgno: 1, data: page }],
 *   postApplyChecksum: databaseChecksum(page, 4096),
 * });
 * ```
 */
export function encodeLtx(input: LtxEncodeInput): Uint8Array {
  const header = fullHeader(input.header);
  validateHeader(header);
  const { postApplyChecksum } = input;
  if (hasNoChecksum(header)) {
    if (postApplyChecksum !== 0n) throw new LtxError("post-apply checksum not allowed");
  } else if ((postApplyChecksum & CHECKSUM_FLAG) === 0n) {
    throw new LtxError("post-apply checksum required, with its top bit set");
  } else if (header.commit === 0 && postApplyChecksum !== CHECKSUM_FLAG) {
    throw new LtxError("post-apply checksum must be empty for a zero-length database");
  }

  // The file checksum covers uncompressed page data, not the LZ4 bytes, so a
  // reader can verify it whatever compression a writer chose.
  const hash = new Crc64();
  const chunks: Uint8Array[] = [];
  let n = 0;
  const write = (bytes: Uint8Array, hashed: Uint8Array | null = bytes) => {
    chunks.push(bytes);
    if (hashed) hash.update(hashed);
    n += bytes.length;
  };

  write(encodeHeader(header));
  const index: number[] = [];
  let prev = 0;
  for (const page of input.pages) {
    checkPageOrder(header, prev, page.pgno);
    if (page.data.length !== header.pageSize) {
      throw new LtxError(
        `page ${page.pgno} has ${page.data.length} bytes, expected ${header.pageSize}`,
      );
    }
    const offset = n;
    const packed = compressBlock(page.data);
    const frameHeader = new Uint8Array(PAGE_HEADER_SIZE + 4);
    const view = new DataView(frameHeader.buffer);
    view.setUint32(0, page.pgno);
    view.setUint16(4, PAGE_FLAG_SIZE);
    view.setUint32(6, packed.length);
    write(frameHeader);
    write(packed, page.data);
    appendUvarint(index, page.pgno);
    appendUvarint(index, offset);
    appendUvarint(index, n - offset);
    prev = page.pgno;
  }
  checkSnapshotEnd(header, prev);
  write(new Uint8Array(PAGE_HEADER_SIZE));

  appendUvarint(index, 0);
  const indexTail = new Uint8Array(index.length + 8);
  indexTail.set(index);
  new DataView(indexTail.buffer).setBigUint64(index.length, BigInt(index.length));
  write(indexTail);

  const trailer = new Uint8Array(TRAILER_SIZE);
  const tv = new DataView(trailer.buffer);
  tv.setBigUint64(0, postApplyChecksum);
  hash.update(trailer.subarray(0, 8));
  tv.setBigUint64(8, CHECKSUM_FLAG | hash.digest());
  chunks.push(trailer);

  const out = new Uint8Array(n + TRAILER_SIZE);
  let pos = 0;
  for (const c of chunks) {
    out.set(c, pos);
    pos += c.length;
  }
  return out;
}
