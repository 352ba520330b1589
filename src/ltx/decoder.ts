/**
 * Reads LTX files, in both page encodings superfly/ltx has written: the
 * current one (page flag 1: u32 size, then an LZ4 block) and the earlier one
 * (page flag 0: one LZ4 frame), as litestream v0.5 uploads. Every check
 * superfly/ltx's decoder makes is made here, plus a few it leaves out.
 *
 * @module
 */

import { CHECKSUM_FLAG } from "./checksum.ts";
import { Crc64 } from "./crc64.ts";
import type { LtxPage } from "./encoder.ts";
import { LtxError } from "./errors.ts";
import {
  checkPageOrder,
  checkSnapshotEnd,
  decodeHeader,
  hasNoChecksum,
  HEADER_SIZE,
  type LtxHeader,
  PAGE_FLAG_SIZE,
  PAGE_HEADER_SIZE,
  TRAILER_SIZE,
  validateHeader,
} from "./header.ts";
import { decompressBlockInto } from "./lz4_block.ts";
import { decodeLz4Frame } from "./lz4_frame.ts";
import { readUvarint } from "./varint.ts";

/** A decoded, verified LTX file. */
export interface LtxFile {
  /** The file header. */
  header: LtxHeader;
  /** The pages, in the file's (ascending) order. */
  pages: LtxPage[];
  /** Database checksum after the file applies; 0 when the header has no checksums. */
  postApplyChecksum: bigint;
  /** CRC-64 of the file, top bit set, as stored in the trailer (and verified). */
  fileChecksum: bigint;
  /**
   * Each page's checksum (`pageChecksum(pgno, data)`), in the order of
   * `pages`, when the file tracks checksums: computed in the same pass over
   * the page as the file checksum, so that applying the file need not
   * compute them again. {@linkcode applyLtx} trusts them: a caller that
   * changes `pages` must drop them.
   */
  pageChecksums?: bigint[];
}

/**
 * Decodes and verifies a whole LTX file: header rules, page order and bounds,
 * LZ4 data (frame checksums too), the page index against the frames actually
 * read, the file checksum, and for snapshots with checksums the post-apply
 * checksum. Throws {@linkcode LtxError} naming the first problem found.
 *
 * @example
 * ```ts
 * import { decodeLtx } from "./decoder.ts";
 * const file = decodeLtx(await Deno.readFile("0000000000000001-0000000000000001.ltx"));
 * file.pages.length; // every page of the database, for a snapshot
 * ```
 */
export function decodeLtx(bytes: Uint8Array): LtxFile {
  const header = decodeHeader(bytes);
  validateHeader(header);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const hash = new Crc64().update(bytes.subarray(0, HEADER_SIZE));
  const snapshot = header.minTxid === 1n;
  const tracked = !hasNoChecksum(header);
  const bodyEnd = bytes.length - TRAILER_SIZE;

  const pages: LtxPage[] = [];
  const slabs = new PageSlabs(header.pageSize);
  const pageChecksums: bigint[] | undefined = tracked ? [] : undefined;
  const frames = new Map<number, { offset: number; size: number }>();
  let checksum = CHECKSUM_FLAG;
  let pos = HEADER_SIZE;
  for (;;) {
    if (pos + PAGE_HEADER_SIZE > bodyEnd) throw new LtxError(`page header at ${pos} truncated`);
    const pgno = view.getUint32(pos);
    const flags = view.getUint16(pos + 4);
    hash.update(bytes.subarray(pos, pos + PAGE_HEADER_SIZE));
    const offset = pos;
    pos += PAGE_HEADER_SIZE;
    if (pgno === 0 && flags === 0) break;
    const where = `page ${pgno} at offset ${offset}`;
    let data: Uint8Array;
    try {
      if ((flags & ~PAGE_FLAG_SIZE) !== 0) {
        throw new LtxError(`invalid page header flags 0x${flags.toString(16)}`);
      }
      checkPageOrder(header, pages.length ? pages[pages.length - 1].pgno : 0, pgno);
      if (flags & PAGE_FLAG_SIZE) {
        if (pos + 4 > bodyEnd) throw new LtxError("size truncated");
        hash.update(bytes.subarray(pos, pos + 4));
        const size = view.getUint32(pos);
        pos += 4;
        if (pos + size > bodyEnd) throw new LtxError(`${size}-byte block runs past the pages`);
        data = slabs.next();
        const end = decompressBlockInto(bytes.subarray(pos, pos + size), data, 0, 0);
        if (end !== data.length) {
          throw new LtxError(`lz4 block decompressed to ${end} bytes, expected ${data.length}`);
        }
        pos += size;
      } else {
        const frame = decodeLz4Frame(bytes.subarray(pos, bodyEnd), header.pageSize);
        data = frame.data;
        pos += frame.length;
      }
    } catch (e) {
      if (e instanceof LtxError) throw new LtxError(`${where}: ${e.message}`);
      throw e;
    }
    if (pageChecksums) {
      // The file checksum and the page's, from one pass over the page.
      const sum = CHECKSUM_FLAG | hash.updatePrefixed(pgno, data);
      pageChecksums.push(sum);
      if (snapshot) checksum ^= sum;
    } else {
      hash.update(data);
    }
    pages.push({ pgno, data });
    frames.set(pgno, { offset, size: pos - offset });
  }

  checkSnapshotEnd(header, pages.length ? pages[pages.length - 1].pgno : 0);

  const indexStart = pos;
  const index = readPageIndex(bytes.subarray(0, bodyEnd), pos);
  checkIndex(index.entries, frames);
  pos = index.next;
  if (pos + 8 > bodyEnd) throw new LtxError("page index size truncated");
  const indexSize = view.getBigUint64(pos);
  if (indexSize !== BigInt(pos - indexStart)) {
    throw new LtxError(`page index size field ${indexSize}, index is ${pos - indexStart} bytes`);
  }
  pos += 8;
  if (pos !== bodyEnd) throw new LtxError(`${bodyEnd - pos} unexpected bytes before the trailer`);
  hash.update(bytes.subarray(indexStart, bodyEnd + 8));

  const postApplyChecksum = view.getBigUint64(bodyEnd);
  const fileChecksum = view.getBigUint64(bodyEnd + 8);
  if ((fileChecksum & CHECKSUM_FLAG) === 0n) throw new LtxError("invalid file checksum format");
  const computed = CHECKSUM_FLAG | hash.digest();
  if (computed !== fileChecksum) {
    throw new LtxError(
      `file checksum mismatch: trailer ${hex(fileChecksum)}, computed ${hex(computed)}`,
    );
  }
  if (!tracked) {
    if (postApplyChecksum !== 0n) throw new LtxError("post-apply checksum not allowed");
  } else if ((postApplyChecksum & CHECKSUM_FLAG) === 0n) {
    throw new LtxError("post-apply checksum required, with its top bit set");
  } else if (snapshot && postApplyChecksum !== (CHECKSUM_FLAG | checksum)) {
    throw new LtxError(
      `post-apply checksum mismatch: trailer ${hex(postApplyChecksum)}, ` +
        `pages ${hex(CHECKSUM_FLAG | checksum)}`,
    );
  }
  return { header, pages, postApplyChecksum, fileChecksum, pageChecksums };
}

// Pages are decompressed into shared slabs, not an array each: a new
// Uint8Array costs V8 about 2 µs, as much as decompressing most pages. A
// slab holds one page at first, twice as many each time up to 1 MiB (or one
// page, if larger), so a small file allocates little and a snapshot few times.
const SLAB_BYTES = 1 << 20;

class PageSlabs {
  #slab = new Uint8Array(0);
  #used = 0;
  #pages = 1;
  constructor(readonly pageSize: number) {}

  /** Room for the next page. */
  next(): Uint8Array {
    const size = this.pageSize;
    if (this.#used + size > this.#slab.length) {
      this.#slab = new Uint8Array(this.#pages * size);
      this.#used = 0;
      this.#pages = Math.min(this.#pages * 2, Math.max(1, Math.floor(SLAB_BYTES / size)));
    }
    const page = this.#slab.subarray(this.#used, this.#used + size);
    this.#used += size;
    return page;
  }
}

function hex(n: bigint): string {
  return n.toString(16).padStart(16, "0");
}

interface IndexEntry {
  pgno: number;
  offset: number;
  size: number;
}

function readPageIndex(bytes: Uint8Array, pos: number): { entries: IndexEntry[]; next: number } {
  const entries: IndexEntry[] = [];
  for (;;) {
    const pgno = readUvarint(bytes, pos);
    if (pgno.value === 0) return { entries, next: pgno.next };
    const offset = readUvarint(bytes, pgno.next);
    const size = readUvarint(bytes, offset.next);
    entries.push({ pgno: pgno.value, offset: offset.value, size: size.value });
    pos = size.next;
  }
}

// A reader that seeks by the index (range requests) must find the frames the
// sequential read found, so a mismatch is corruption even if the pages decode.
function checkIndex(
  entries: IndexEntry[],
  frames: Map<number, { offset: number; size: number }>,
): void {
  if (entries.length !== frames.size) {
    throw new LtxError(`page index has ${entries.length} entries for ${frames.size} pages`);
  }
  for (const e of entries) {
    const f = frames.get(e.pgno);
    if (!f || f.offset !== e.offset || f.size !== e.size) {
      throw new LtxError(
        `page index entry for page ${e.pgno} (offset ${e.offset}, size ${e.size}) ` +
          `does not match its frame`,
      );
    }
  }
}
