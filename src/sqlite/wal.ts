/**
 * Reads committed transactions out of a SQLite WAL file, the way SQLite's own
 * recovery decides what is committed: frames count only up to the last commit
 * frame whose salts match the header and whose cumulative checksum holds.
 * Anything after that (a torn write, frames of an older WAL generation that a
 * restart left behind, a transaction still being written) is ignored.
 *
 * @module
 */

import type { LtxPage } from "../ltx/encoder.ts";

/** Size of the WAL file header. */
export const WAL_HEADER_SIZE = 32;
/** Size of each frame header; the page follows it. */
export const WAL_FRAME_HEADER_SIZE = 24;

const MAGIC_LE = 0x377f0682;
const MAGIC_BE = 0x377f0683;
const WAL_VERSION = 3007000;

/** A WAL that cannot be read at all: bad magic, version, page size, header checksum or offset. */
export class WalError extends Error {
  /**
   * Builds the error; the message names the check that failed.
   *
   * @example
   * ```ts
   * import { WalError } from "./wal.ts";
   * new WalError("wal header checksum mismatch").name; // "WalError"
   * ```
   */
  constructor(message: string) {
    super(message);
    this.name = "WalError";
  }
}

/** The WAL file header. */
export interface WalHeader {
  /** True for magic 0x377f0683 (checksums over big-endian words), false for 0x377f0682. */
  bigEndianChecksums: boolean;
  /** Database page size in bytes. */
  pageSize: number;
  /** Checkpoint sequence number, incremented each time the WAL restarts. */
  checkpointSeq: number;
  /** Salt-1, new random value at each WAL restart; every valid frame repeats it. */
  salt1: number;
  /** Salt-2, a second salt every valid frame repeats. */
  salt2: number;
}

/** One committed transaction. */
export interface WalCommit {
  /** The pages it changed, ascending, each with its last content in the transaction. */
  pages: LtxPage[];
  /** Database size in pages after the commit. */
  dbSize: number;
  /** File offset of the transaction's first frame. */
  offset: number;
  /** File offset just past its commit frame: where the next transaction starts. */
  endOffset: number;
}

/** What {@linkcode readWalCommits} returns. */
export interface WalRead {
  /** The WAL header. */
  header: WalHeader;
  /** Committed transactions from the starting offset on, in order. */
  commits: WalCommit[];
  /** Offset after the last commit read, or the starting offset if none: where to read next. */
  endOffset: number;
}

// SQLite's walChecksumBytes: two running sums over pairs of 32-bit words.
function checksum(
  view: DataView,
  start: number,
  end: number,
  bigEndian: boolean,
  seed: [number, number],
): [number, number] {
  let [s1, s2] = seed;
  for (let i = start; i < end; i += 8) {
    s1 = (s1 + view.getUint32(i, !bigEndian) + s2) >>> 0;
    s2 = (s2 + view.getUint32(i + 4, !bigEndian) + s1) >>> 0;
  }
  return [s1, s2];
}

/**
 * Parses and checks the 32-byte WAL header. Throws {@linkcode WalError} if
 * the magic, version, page size or header checksum is wrong.
 *
 * @example
 * ```ts
 * import { readWalHeader } from "./wal.ts";
 * readWalHeader(await Deno.readFile("app.db-wal")).pageSize; // 4096
 * ```
 */
export function readWalHeader(bytes: Uint8Array): WalHeader {
  if (bytes.length < WAL_HEADER_SIZE) {
    throw new WalError(`wal of ${bytes.length} bytes has no header`);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const magic = view.getUint32(0);
  if (magic !== MAGIC_LE && magic !== MAGIC_BE) {
    throw new WalError(`invalid wal magic 0x${magic.toString(16)}`);
  }
  const version = view.getUint32(4);
  if (version !== WAL_VERSION) throw new WalError(`unsupported wal version ${version}`);
  const pageSize = view.getUint32(8);
  if (pageSize < 512 || pageSize > 65536 || (pageSize & (pageSize - 1)) !== 0) {
    throw new WalError(`invalid wal page size ${pageSize}`);
  }
  const bigEndianChecksums = magic === MAGIC_BE;
  const [c1, c2] = checksum(view, 0, 24, bigEndianChecksums, [0, 0]);
  if (c1 !== view.getUint32(24) || c2 !== view.getUint32(28)) {
    throw new WalError("wal header checksum mismatch");
  }
  return {
    bigEndianChecksums,
    pageSize,
    checkpointSeq: view.getUint32(12),
    salt1: view.getUint32(16),
    salt2: view.getUint32(20),
  };
}

/**
 * Reads the transactions committed in a WAL from `fromOffset` (the header's
 * end, or the `endOffset` of an earlier read of the same WAL generation) and
 * stops at the first frame that is torn, salted for another generation, or
 * fails its checksum. Frames after the last commit frame are left for a later
 * read. Pages beyond a commit's database size are dropped: the commit
 * truncated them away. Throws {@linkcode WalError} if the header is invalid or
 * `fromOffset` is not a frame boundary within the file. Before resuming, compare
 * {@linkcode readWalHeader}'s salts with the earlier read's: new salts mean
 * SQLite restarted the WAL, and reading starts over at the header's end.
 *
 * @example
 * ```ts
 * import { readWalCommits } from "./wal.ts";
 * const wal = await Deno.readFile("app.db-wal");
 * const first = readWalCommits(wal);
 * // later, after more writes:
 * const next = readWalCommits(await Deno.readFile("app.db-wal"), first.endOffset);
 * ```
 */
export function readWalCommits(bytes: Uint8Array, fromOffset = WAL_HEADER_SIZE): WalRead {
  const header = readWalHeader(bytes);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const frameSize = WAL_FRAME_HEADER_SIZE + header.pageSize;
  if (fromOffset < WAL_HEADER_SIZE || (fromOffset - WAL_HEADER_SIZE) % frameSize !== 0) {
    throw new WalError(`offset ${fromOffset} is not a frame boundary of this wal`);
  }
  if (fromOffset > bytes.length) {
    throw new WalError(`offset ${fromOffset} is past the end of the wal (${bytes.length} bytes)`);
  }
  const salted = (frame: number) =>
    view.getUint32(frame + 8) === header.salt1 && view.getUint32(frame + 12) === header.salt2;

  // Checksums are cumulative: resume from the one stored in the frame before.
  let sum: [number, number];
  if (fromOffset === WAL_HEADER_SIZE) {
    sum = [view.getUint32(24), view.getUint32(28)];
  } else {
    const prev = fromOffset - frameSize;
    if (!salted(prev)) return { header, commits: [], endOffset: fromOffset };
    sum = [view.getUint32(prev + 16), view.getUint32(prev + 20)];
  }

  const commits: WalCommit[] = [];
  let pending = new Map<number, number>();
  let start = fromOffset;
  for (let frame = fromOffset; frame + frameSize <= bytes.length; frame += frameSize) {
    const pgno = view.getUint32(frame);
    if (pgno === 0 || !salted(frame)) break;
    sum = checksum(view, frame, frame + 8, header.bigEndianChecksums, sum);
    sum = checksum(view, frame + 24, frame + frameSize, header.bigEndianChecksums, sum);
    if (sum[0] !== view.getUint32(frame + 16) || sum[1] !== view.getUint32(frame + 20)) break;
    pending.set(pgno, frame + WAL_FRAME_HEADER_SIZE);
    const dbSize = view.getUint32(frame + 4);
    if (dbSize === 0) continue;
    const pages = [...pending]
      .filter(([p]) => p <= dbSize)
      .sort(([a], [b]) => a - b)
      .map(([p, at]) => ({ pgno: p, data: bytes.slice(at, at + header.pageSize) }));
    commits.push({ pages, dbSize, offset: start, endOffset: frame + frameSize });
    pending = new Map();
    start = frame + frameSize;
  }
  return { header, commits, endOffset: start };
}
