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
  HEADER_SIZE,
  type LtxHeader,
  PAGE_FLAG_SIZE,
  PAGE_HEADER_SIZE,
  TRAILER_SIZE,
  validateHeader,
} from "./header.ts";
import { compressBlockBound, compressBlockInto } from "./lz4_block.ts";
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
 * Encodes one LTX file page by page, so that a large one can be built in
 * pieces with other work between them: {@linkcode LtxEncoder.add} each page
 * in order, then {@linkcode LtxEncoder.finish}. Throws {@linkcode LtxError}
 * if the header or pages break the rules superfly/ltx's encoder enforces
 * (page order, bounds, the lock page, a complete snapshot, checksum presence).
 * The pages' bytes are copied (compressed) as they are added.
 *
 * @example
 * ```ts
 * import { LtxEncoder } from "./encoder.ts";
 * import { databaseChecksum } from "./checksum.ts";
 * const page = new Uint8Array(4096);
 * const encoder = new LtxEncoder(
 *   { pageSize: 4096, commit: 1, minTxid: 1n, maxTxid: 1n, timestamp: Date.now() },
 *   databaseChecksum(page, 4096),
 * );
 * encoder.add({ pgno: 1, data: page });
 * const bytes = encoder.finish();
 * ```
 */
export class LtxEncoder {
  readonly #header: LtxHeader;
  readonly #postApplyChecksum: bigint;
  // The file checksum covers uncompressed page data, not the LZ4 bytes, so a
  // reader can verify it whatever compression a writer chose.
  readonly #hash = new Crc64();
  // The file so far, written in place: a new Uint8Array per piece costs V8
  // about a microsecond, more than a page's header is worth.
  #out: Uint8Array;
  #n = 0;
  readonly #index: number[] = [];
  #prev = 0;
  #finished = false;

  /**
   * Starts a file; `pages`, when known, is how many will be added (the
   * buffer is sized for them at once).
   */
  constructor(header: LtxHeaderInit, postApplyChecksum: bigint, pages?: number) {
    const full = fullHeader(header);
    validateHeader(full);
    if (hasNoChecksum(full)) {
      if (postApplyChecksum !== 0n) throw new LtxError("post-apply checksum not allowed");
    } else if ((postApplyChecksum & CHECKSUM_FLAG) === 0n) {
      throw new LtxError("post-apply checksum required, with its top bit set");
    } else if (full.commit === 0 && postApplyChecksum !== CHECKSUM_FLAG) {
      throw new LtxError("post-apply checksum must be empty for a zero-length database");
    }
    this.#header = full;
    this.#postApplyChecksum = postApplyChecksum;
    this.#out = new Uint8Array(
      HEADER_SIZE + (pages ?? 1) * this.#frameBound() + PAGE_HEADER_SIZE + 64 + TRAILER_SIZE,
    );
    const encoded = encodeHeader(full);
    this.#out.set(encoded);
    this.#hash.update(encoded);
    this.#n = HEADER_SIZE;
  }

  #frameBound(): number {
    return PAGE_HEADER_SIZE + 4 + compressBlockBound(this.#header.pageSize);
  }

  #reserve(bytes: number): void {
    if (this.#n + bytes <= this.#out.length) return;
    const grown = new Uint8Array(Math.max(this.#n + bytes, this.#out.length * 2));
    grown.set(this.#out.subarray(0, this.#n));
    this.#out = grown;
  }

  /** Adds the next page (ascending page numbers). */
  add(page: LtxPage): void {
    if (this.#finished) throw new LtxError("page added after the file was finished");
    const header = this.#header;
    checkPageOrder(header, this.#prev, page.pgno);
    if (page.data.length !== header.pageSize) {
      throw new LtxError(
        `page ${page.pgno} has ${page.data.length} bytes, expected ${header.pageSize}`,
      );
    }
    this.#reserve(this.#frameBound());
    const out = this.#out;
    const offset = this.#n;
    // Page header (page number, flags), the block's size, the block.
    const end = compressBlockInto(page.data, out, offset + PAGE_HEADER_SIZE + 4);
    const size = end - offset - PAGE_HEADER_SIZE - 4;
    writeUint32(out, offset, page.pgno);
    out[offset + 4] = PAGE_FLAG_SIZE >>> 8;
    out[offset + 5] = PAGE_FLAG_SIZE & 0xff;
    writeUint32(out, offset + PAGE_HEADER_SIZE, size);
    this.#hash.update(out.subarray(offset, offset + PAGE_HEADER_SIZE + 4));
    this.#hash.update(page.data);
    this.#n = end;
    appendUvarint(this.#index, page.pgno);
    appendUvarint(this.#index, offset);
    appendUvarint(this.#index, end - offset);
    this.#prev = page.pgno;
  }

  /** Ends the file (empty page header, page index, trailer) and returns its bytes. */
  finish(): Uint8Array {
    return this.finishView().slice();
  }

  /**
   * Ends the file as {@linkcode LtxEncoder.finish} does, but returns its
   * bytes as a view of the encoder's buffer, without copying them: the
   * buffer may be larger than the file, so a caller that keeps the bytes
   * long, or hands their `buffer` on, should copy them.
   */
  finishView(): Uint8Array {
    if (this.#finished) throw new LtxError("file already finished");
    checkSnapshotEnd(this.#header, this.#prev);
    this.#finished = true;
    const index = this.#index;
    appendUvarint(index, 0);
    this.#reserve(PAGE_HEADER_SIZE + index.length + 8 + TRAILER_SIZE);
    const out = this.#out;
    const view = new DataView(out.buffer, out.byteOffset, out.byteLength);
    const tail = this.#n;
    out.fill(0, tail, tail + PAGE_HEADER_SIZE);
    out.set(index, tail + PAGE_HEADER_SIZE);
    let n = tail + PAGE_HEADER_SIZE + index.length;
    view.setBigUint64(n, BigInt(index.length));
    n += 8;
    view.setBigUint64(n, this.#postApplyChecksum);
    this.#hash.update(out.subarray(tail, n + 8));
    view.setBigUint64(n + 8, CHECKSUM_FLAG | this.#hash.digest());
    return out.subarray(0, n + TRAILER_SIZE);
  }
}

function writeUint32(out: Uint8Array, at: number, value: number): void {
  out[at] = value >>> 24;
  out[at + 1] = (value >>> 16) & 0xff;
  out[at + 2] = (value >>> 8) & 0xff;
  out[at + 3] = value & 0xff;
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
  const { pages } = input;
  const encoder = new LtxEncoder(
    input.header,
    input.postApplyChecksum,
    Array.isArray(pages) ? pages.length : undefined,
  );
  for (const page of pages) encoder.add(page);
  return encoder.finish();
}
