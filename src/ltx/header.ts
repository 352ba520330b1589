/**
 * The fixed-size parts of an LTX file: the 100-byte header, the 6-byte page
 * header and the 16-byte trailer, all big-endian, laid out as superfly/ltx's
 * `Header`, `PageHeader` and `Trailer` marshal them.
 *
 * @module
 */

import { CHECKSUM_FLAG, lockPgno } from "./checksum.ts";
import { LtxError } from "./errors.ts";

/** "LTX1", the magic at the start of every LTX file (all format versions). */
export const LTX_MAGIC = "LTX1";
/** Size of the file header; bytes 80 to 99 are reserved and zero. */
export const HEADER_SIZE = 100;
/** Size of a page header: page number (u32) and flags (u16). */
export const PAGE_HEADER_SIZE = 6;
/** Size of the trailer: post-apply checksum and file checksum (u64 each). */
export const TRAILER_SIZE = 16;
/** Header flag: the file does not track the rolling database checksum. */
export const HEADER_FLAG_NO_CHECKSUM = 2;
/** Page header flag: a u32 size and an LZ4 block follow (else one LZ4 frame). */
export const PAGE_FLAG_SIZE = 1;

/**
 * The LTX file header. TXIDs, checksums and the node id are unsigned 64-bit
 * values, hence bigint; the other 64-bit fields stay far below 2^53.
 */
export interface LtxHeader {
  /** Header flags: 0, or {@linkcode HEADER_FLAG_NO_CHECKSUM}. */
  flags: number;
  /** Database page size in bytes, a power of two from 512 to 65536. */
  pageSize: number;
  /** Database size in pages after the file is applied. */
  commit: number;
  /** First transaction the file covers; 1 makes it a snapshot. */
  minTxid: bigint;
  /** Last transaction the file covers. */
  maxTxid: bigint;
  /** Milliseconds since the Unix epoch when the file was written. */
  timestamp: number;
  /** Database checksum before the file applies; 0 on snapshots and untracked files. */
  preApplyChecksum: bigint;
  /** Offset of the source frames in the SQLite WAL; 0 if not from a WAL. */
  walOffset: number;
  /** Bytes of the source WAL segment; 0 if not from a WAL. */
  walSize: number;
  /** WAL header salt-1 of the source WAL; 0 if not from a WAL. */
  walSalt1: number;
  /** WAL header salt-2 of the source WAL; 0 if not from a WAL. */
  walSalt2: number;
  /** Id of the node that wrote the file; 0 if unset. */
  nodeId: bigint;
}

/**
 * True for the page sizes SQLite allows: powers of two from 512 to 65536.
 *
 * @example
 * ```ts
 * import { isValidPageSize } from "./header.ts";
 * isValidPageSize(4096); // true
 * ```
 */
export function isValidPageSize(size: number): boolean {
  return Number.isInteger(size) && size >= 512 && size <= 65536 && (size & (size - 1)) === 0;
}

/**
 * True if the header says the rolling database checksum is not tracked.
 *
 * @example
 * ```ts
 * import { hasNoChecksum, type LtxHeader } from "./header.ts";
 * declare const header: LtxHeader;
 * if (!hasNoChecksum(header)) console.log(header.preApplyChecksum);
 * ```
 */
export function hasNoChecksum(header: LtxHeader): boolean {
  return (header.flags & HEADER_FLAG_NO_CHECKSUM) !== 0;
}

/**
 * Throws an {@linkcode LtxError} unless the header is consistent, with the
 * same rules as superfly/ltx's `Header.Validate`.
 *
 * @example
 * ```ts
 * import { validateHeader, type LtxHeader } from "./header.ts";
 * declare const header: LtxHeader;
 * validateHeader(header);
 * ```
 */
export function validateHeader(h: LtxHeader): void {
  const fail = (why: string) => {
    throw new LtxError(`invalid ltx header: ${why}`);
  };
  if ((h.flags & ~HEADER_FLAG_NO_CHECKSUM) !== 0) fail(`flags 0x${h.flags.toString(16)}`);
  if (!isValidPageSize(h.pageSize)) fail(`page size ${h.pageSize}`);
  if (h.minTxid === 0n) fail("minimum transaction id required");
  if (h.maxTxid === 0n) fail("maximum transaction id required");
  if (h.minTxid > h.maxTxid) fail(`transaction ids out of order: (${h.minTxid},${h.maxTxid})`);
  if (h.walOffset < 0) fail(`wal offset ${h.walOffset} is negative`);
  if (h.walSize < 0) fail(`wal size ${h.walSize} is negative`);
  if ((h.walSalt1 !== 0 || h.walSalt2 !== 0) && h.walOffset === 0) {
    fail("wal offset required if salt exists");
  }
  if (h.walOffset === 0 && h.walSize !== 0) fail("wal offset required if wal size exists");
  if (h.minTxid === 1n) {
    if (h.preApplyChecksum !== 0n) fail("pre-apply checksum must be zero on snapshots");
  } else if (hasNoChecksum(h)) {
    if (h.preApplyChecksum !== 0n) fail("pre-apply checksum not allowed without checksums");
  } else if ((h.preApplyChecksum & CHECKSUM_FLAG) === 0n) {
    fail("pre-apply checksum required on non-snapshot files, with its top bit set");
  }
}

const MAGIC_BYTES = new TextEncoder().encode(LTX_MAGIC);

/**
 * Serialises a header into its 100 bytes (without validating it).
 *
 * @example
 * ```ts
 * import { encodeHeader, decodeHeader, type LtxHeader } from "./header.ts";
 * declare const header: LtxHeader;
 * decodeHeader(encodeHeader(header)); // equal to header
 * ```
 */
export function encodeHeader(h: LtxHeader): Uint8Array {
  const b = new Uint8Array(HEADER_SIZE);
  const v = new DataView(b.buffer);
  b.set(MAGIC_BYTES, 0);
  v.setUint32(4, h.flags);
  v.setUint32(8, h.pageSize);
  v.setUint32(12, h.commit);
  v.setBigUint64(16, h.minTxid);
  v.setBigUint64(24, h.maxTxid);
  v.setBigInt64(32, BigInt(h.timestamp));
  v.setBigUint64(40, h.preApplyChecksum);
  v.setBigInt64(48, BigInt(h.walOffset));
  v.setBigInt64(56, BigInt(h.walSize));
  v.setUint32(64, h.walSalt1);
  v.setUint32(68, h.walSalt2);
  v.setBigUint64(72, h.nodeId);
  return b;
}

/**
 * Parses the first 100 bytes of `bytes` as a header, checking only the magic
 * and the length; call {@linkcode validateHeader} for the rest.
 *
 * @example
 * ```ts
 * import { decodeHeader } from "./header.ts";
 * const file = await Deno.readFile("0000000000000001-0000000000000001.ltx");
 * decodeHeader(file).commit; // database size in pages
 * ```
 */
export function decodeHeader(bytes: Uint8Array): LtxHeader {
  if (bytes.length < HEADER_SIZE) {
    throw new LtxError(`ltx file of ${bytes.length} bytes is shorter than its header`);
  }
  if (MAGIC_BYTES.some((b, i) => bytes[i] !== b)) {
    const magic = new TextDecoder().decode(bytes.subarray(0, 4));
    throw new LtxError(`invalid ltx magic ${JSON.stringify(magic)}`);
  }
  const v = new DataView(bytes.buffer, bytes.byteOffset, HEADER_SIZE);
  return {
    flags: v.getUint32(4),
    pageSize: v.getUint32(8),
    commit: v.getUint32(12),
    minTxid: v.getBigUint64(16),
    maxTxid: v.getBigUint64(24),
    timestamp: Number(v.getBigInt64(32)),
    preApplyChecksum: v.getBigUint64(40),
    walOffset: Number(v.getBigInt64(48)),
    walSize: Number(v.getBigInt64(56)),
    walSalt1: v.getUint32(64),
    walSalt2: v.getUint32(68),
    nodeId: v.getBigUint64(72),
  };
}

/**
 * Throws an {@linkcode LtxError} unless page `pgno` may follow page `prev`
 * (0 for the first page) in a file with this header: within the commit size,
 * not the lock page, ascending, and in a snapshot the very next page.
 *
 * @example
 * ```ts
 * import { checkPageOrder, type LtxHeader } from "./header.ts";
 * declare const header: LtxHeader;
 * checkPageOrder(header, 0, 1);
 * ```
 */
export function checkPageOrder(header: LtxHeader, prev: number, pgno: number): void {
  if (!Number.isInteger(pgno) || pgno < 1) throw new LtxError(`invalid page number ${pgno}`);
  if (pgno > header.commit) {
    throw new LtxError(`page number ${pgno} out-of-bounds for commit size ${header.commit}`);
  }
  const lock = lockPgno(header.pageSize);
  if (pgno === lock) throw new LtxError(`lock page ${pgno} is never stored`);
  if (header.minTxid === 1n) {
    const expected = prev + 1 === lock ? prev + 2 : prev + 1;
    if (pgno !== expected) {
      throw new LtxError(`snapshot page ${pgno} follows page ${prev}, expected ${expected}`);
    }
  } else if (pgno <= prev) {
    throw new LtxError(`out-of-order page numbers: ${prev},${pgno}`);
  }
}

/**
 * Throws an {@linkcode LtxError} if a snapshot's last page `last` (0 if none)
 * leaves out pages up to the commit size; other files may end anywhere.
 *
 * @example
 * ```ts
 * import { checkSnapshotEnd, type LtxHeader } from "./header.ts";
 * declare const header: LtxHeader;
 * checkSnapshotEnd(header, header.commit);
 * ```
 */
export function checkSnapshotEnd(header: LtxHeader, last: number): void {
  if (header.minTxid !== 1n) return;
  const lock = lockPgno(header.pageSize);
  const expected = header.commit === lock ? lock - 1 : header.commit;
  if (last !== expected) {
    throw new LtxError(`snapshot ends at page ${last}, expected every page to ${expected}`);
  }
}
