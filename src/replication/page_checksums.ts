/**
 * The LTX checksum of a live database, kept up to date page by page: every
 * upload carries the checksum before and after it, and recomputing it from
 * the whole file after each event would cost a read of the database per
 * event. One 8-byte entry per page (0.2 % of a 4 KiB-page database).
 *
 * @module
 */

import { CHECKSUM_FLAG, lockPgno, pageChecksum } from "../ltx/checksum.ts";
import type { LtxPage } from "../ltx/encoder.ts";

/** Pages read at once when a database file is checksummed at open. */
export const CHECKSUM_READ_PAGES = 256;

/**
 * Per-page checksums of one database and their rolling XOR.
 *
 * @example
 * ```ts
 * import { PageChecksums } from "./page_checksums.ts";
 * const sums = PageChecksums.empty(4096);
 * sums.apply([{ pgno: 1, data: new Uint8Array(4096) }], 1);
 * sums.checksum; // the LTX database checksum after that page
 * ```
 */
export class PageChecksums {
  #sums: BigUint64Array;
  #pages: number;
  /** XOR of the page checksums (each with the flag bit); the flag is or-ed in on read. */
  #xor = 0n;
  readonly #lock: number;

  private constructor(readonly pageSize: number) {
    this.#sums = new BigUint64Array(16);
    this.#pages = 0;
    this.#lock = lockPgno(pageSize);
  }

  /** The checksums of an empty database. */
  static empty(pageSize: number): PageChecksums {
    return new PageChecksums(pageSize);
  }

  /**
   * Reads a database file from the start and checksums each page. Throws
   * if its size is not a whole number of pages.
   */
  static readFile(file: Deno.FsFile, pageSize: number): PageChecksums {
    const sums = new PageChecksums(pageSize);
    const size = file.statSync().size;
    if (size % pageSize !== 0) {
      throw new Error(`database size ${size} is not a multiple of its page size ${pageSize}`);
    }
    const total = size / pageSize;
    const buffer = new Uint8Array(pageSize * CHECKSUM_READ_PAGES);
    file.seekSync(0, Deno.SeekMode.Start);
    for (let first = 1; first <= total; first += CHECKSUM_READ_PAGES) {
      const count = Math.min(CHECKSUM_READ_PAGES, total - first + 1);
      const chunk = buffer.subarray(0, count * pageSize);
      for (let n = 0; n < chunk.length;) {
        const got = file.readSync(chunk.subarray(n));
        if (got === null) throw new Error(`database file ended at ${n} bytes into page ${first}`);
        n += got;
      }
      for (let i = 0; i < count; i++) {
        sums.#set(first + i, chunk.subarray(i * pageSize, (i + 1) * pageSize));
      }
    }
    sums.#pages = total;
    return sums;
  }

  /** Checksums `count` pages read one at a time by `read`. */
  static fromPages(
    pageSize: number,
    count: number,
    read: (pgno: number) => Uint8Array,
  ): PageChecksums {
    const sums = new PageChecksums(pageSize);
    for (let pgno = 1; pgno <= count; pgno++) sums.#set(pgno, read(pgno));
    sums.#pages = count;
    return sums;
  }

  /** The database checksum, as LTX headers and trailers carry it. */
  get checksum(): bigint {
    return CHECKSUM_FLAG | this.#xor;
  }

  /** Pages in the database. */
  get pageCount(): number {
    return this.#pages;
  }

  #set(pgno: number, data: Uint8Array) {
    if (pgno === this.#lock) return;
    if (pgno >= this.#sums.length) {
      const grown = new BigUint64Array(Math.max(pgno + 1, this.#sums.length * 2));
      grown.set(this.#sums);
      this.#sums = grown;
    }
    const sum = pageChecksum(pgno, data);
    this.#xor ^= this.#sums[pgno] ^ sum;
    this.#sums[pgno] = sum;
  }

  /**
   * Applies a commit: its changed pages, then the database's new size in
   * pages (pages past it leave the checksum).
   */
  apply(pages: Iterable<LtxPage>, commit: number): void {
    for (let pgno = commit + 1; pgno <= this.#pages; pgno++) {
      this.#xor ^= this.#sums[pgno];
      this.#sums[pgno] = 0n;
    }
    for (const page of pages) {
      if (page.pgno > commit) continue;
      this.#set(page.pgno, page.data);
    }
    this.#pages = commit;
  }
}
