/**
 * Builds WAL files for tests, independently of the reader under test, so the
 * reader can be tried on layouts SQLite on this machine never writes
 * (big-endian checksums) and on damage of our choosing.
 *
 * @module
 */

/** One frame to write: page number, content, and the db size if it commits. */
export interface FrameSpec {
  /** Page number. */
  pgno: number;
  /** Page content. */
  data: Uint8Array;
  /** Database size in pages for a commit frame, 0 otherwise. */
  commit: number;
}

function sums(words: DataView, bigEndian: boolean, s: [number, number]): [number, number] {
  let [a, b] = s;
  for (let i = 0; i < words.byteLength; i += 8) {
    a = (a + words.getUint32(i, !bigEndian) + b) >>> 0;
    b = (b + words.getUint32(i + 4, !bigEndian) + a) >>> 0;
  }
  return [a, b];
}

/**
 * A complete WAL file holding `frames`, with valid salts and checksums.
 *
 * @example
 * ```ts
 * import { buildWal } from "./wal_builder.ts";
 * const wal = buildWal(512, true, [{ pgno: 1, data: new Uint8Array(512), commit: 1 }]);
 * ```
 */
export function buildWal(
  pageSize: number,
  bigEndian: boolean,
  frames: FrameSpec[],
  salts: [number, number] = [0x11223344, 0x55667788],
): Uint8Array {
  const out = new Uint8Array(32 + frames.length * (24 + pageSize));
  const v = new DataView(out.buffer);
  v.setUint32(0, bigEndian ? 0x377f0683 : 0x377f0682);
  v.setUint32(4, 3007000);
  v.setUint32(8, pageSize);
  v.setUint32(12, 7);
  v.setUint32(16, salts[0]);
  v.setUint32(20, salts[1]);
  let s = sums(new DataView(out.buffer, 0, 24), bigEndian, [0, 0]);
  v.setUint32(24, s[0]);
  v.setUint32(28, s[1]);
  frames.forEach((f, i) => {
    const at = 32 + i * (24 + pageSize);
    v.setUint32(at, f.pgno);
    v.setUint32(at + 4, f.commit);
    v.setUint32(at + 8, salts[0]);
    v.setUint32(at + 12, salts[1]);
    out.set(f.data, at + 24);
    s = sums(new DataView(out.buffer, at, 8), bigEndian, s);
    s = sums(new DataView(out.buffer, at + 24, pageSize), bigEndian, s);
    v.setUint32(at + 16, s[0]);
    v.setUint32(at + 20, s[1]);
  });
  return out;
}

/**
 * A page of `size` bytes filled with `byte`, for telling pages apart.
 *
 * @example
 * ```ts
 * import { filledPage } from "./wal_builder.ts";
 * filledPage(512, 7)[0]; // 7
 * ```
 */
export function filledPage(size: number, byte: number): Uint8Array {
  return new Uint8Array(size).fill(byte);
}
