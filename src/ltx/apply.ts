/**
 * Builds database files from LTX files: a snapshot, then files that follow it
 * in TXID order. Pages go to `(pgno - 1) * pageSize`, the database is cut or
 * grown to the header's commit size, and when checksums are known the rolling
 * checksum is carried from file to file and checked against each file.
 *
 * @module
 */

import { CHECKSUM_FLAG, databaseChecksum, lockPgno, pageChecksum } from "./checksum.ts";
import type { LtxFile } from "./decoder.ts";
import { LtxError } from "./errors.ts";
import { hasNoChecksum } from "./header.ts";

/** Where a database stands: the last TXID applied and, if known, its checksum. */
export interface LtxPosition {
  /** The last transaction applied. */
  txid: bigint;
  /** The rolling database checksum, when it is known without reading the database. */
  checksum?: bigint;
}

// The same apply logic runs over bytes in memory and over a file on disk.
interface PageStore {
  readonly pageSize: number;
  readonly pageCount: number;
  read(pgno: number): Uint8Array;
  write(pgno: number, data: Uint8Array): void;
  resize(pages: number): void;
  image(): Uint8Array;
  /** Writes out what `write` kept back. */
  flush(): void;
}

class MemoryStore implements PageStore {
  #buf: Uint8Array;
  #len: number;
  constructor(db: Uint8Array, readonly pageSize: number) {
    this.#buf = db.slice();
    this.#len = db.length;
  }
  get pageCount() {
    return this.#len / this.pageSize;
  }
  read(pgno: number) {
    return this.#buf.subarray((pgno - 1) * this.pageSize, pgno * this.pageSize);
  }
  write(pgno: number, data: Uint8Array) {
    if (pgno > this.pageCount) this.resize(pgno);
    this.#buf.set(data, (pgno - 1) * this.pageSize);
  }
  resize(pages: number) {
    const len = pages * this.pageSize;
    if (len > this.#buf.length) {
      const grown = new Uint8Array(Math.max(len, this.#buf.length * 2));
      grown.set(this.#buf.subarray(0, this.#len));
      this.#buf = grown;
    } else if (len < this.#len) {
      this.#buf.fill(0, len, this.#len);
    }
    this.#len = len;
  }
  image() {
    return this.#buf.slice(0, this.#len);
  }
  flush() {}
}

// Pages written one after another are kept back and written together, up to
// this many: a snapshot is then a few large writes, not one system call a page.
const FILE_WRITE_PAGES = 256;

class FileStore implements PageStore {
  #run: Uint8Array | undefined;
  #runFirst = 0;
  #runCount = 0;

  constructor(readonly file: Deno.FsFile, readonly pageSize: number, public pageCount: number) {}
  read(pgno: number) {
    this.flush();
    const out = new Uint8Array(this.pageSize);
    this.file.seekSync((pgno - 1) * this.pageSize, Deno.SeekMode.Start);
    for (let n = 0; n < out.length;) {
      const got = this.file.readSync(out.subarray(n));
      if (got === null) throw new LtxError(`database file ends inside page ${pgno}`);
      n += got;
    }
    return out;
  }
  write(pgno: number, data: Uint8Array) {
    if (this.#runCount === FILE_WRITE_PAGES || pgno !== this.#runFirst + this.#runCount) {
      this.flush();
      this.#runFirst = pgno;
    }
    const needed = (this.#runCount + 1) * this.pageSize;
    if (!this.#run || this.#run.length < needed) {
      // Grown as runs get longer: most files apply a few pages, and a whole
      // buffer each would zero a MiB per file of a restore.
      const pages = Math.min(
        FILE_WRITE_PAGES,
        Math.max(16, 2 * (this.#run?.length ?? 0) / this.pageSize),
      );
      const grown = new Uint8Array(pages * this.pageSize);
      if (this.#run) grown.set(this.#run.subarray(0, this.#runCount * this.pageSize));
      this.#run = grown;
    }
    this.#run.set(data, this.#runCount * this.pageSize);
    this.#runCount++;
    this.pageCount = Math.max(this.pageCount, pgno);
  }
  flush() {
    if (this.#runCount === 0) return;
    const bytes = this.#run!.subarray(0, this.#runCount * this.pageSize);
    this.#runCount = 0;
    this.file.seekSync((this.#runFirst - 1) * this.pageSize, Deno.SeekMode.Start);
    for (let n = 0; n < bytes.length;) n += this.file.writeSync(bytes.subarray(n));
  }
  resize(pages: number) {
    this.flush();
    this.file.truncateSync(pages * this.pageSize);
    this.pageCount = pages;
  }
  image(): Uint8Array {
    this.flush();
    const out = new Uint8Array(this.pageCount * this.pageSize);
    for (let pgno = 1; pgno <= this.pageCount; pgno++) {
      out.set(this.read(pgno), (pgno - 1) * this.pageSize);
    }
    return out;
  }
}

const SQLITE_MAGIC = new TextEncoder().encode("SQLite format 3\0");

// SQLite stores the page size at offset 16 of page 1, with 1 meaning 65536;
// an image that is not a SQLite database has no page size to compare.
function storedPageSize(store: PageStore): number | undefined {
  if (store.pageCount === 0) return undefined;
  const page1 = store.read(1);
  if (!SQLITE_MAGIC.every((b, i) => page1[i] === b)) return undefined;
  const raw = (page1[16] << 8) | page1[17];
  return raw === 1 ? 65536 : raw;
}

function checkWholePages(size: number, pageSize: number): void {
  if (size % pageSize !== 0) {
    throw new LtxError(`database size ${size} is not a multiple of page size ${pageSize}`);
  }
}

function applyOne(store: PageStore, file: LtxFile, at: LtxPosition | undefined): LtxPosition {
  const { header } = file;
  const where = `ltx file ${header.minTxid}-${header.maxTxid}`;
  const snapshot = header.minTxid === 1n;
  const tracked = !hasNoChecksum(header);
  const lock = lockPgno(header.pageSize);
  if (header.pageSize !== store.pageSize) {
    throw new LtxError(
      `${where} has page size ${header.pageSize}, earlier files ${store.pageSize}`,
    );
  }

  let checksum: bigint | undefined;
  if (snapshot) {
    store.resize(0);
    checksum = CHECKSUM_FLAG;
  } else {
    if (!at) throw new LtxError(`${where} is not a snapshot and the database has no TXID`);
    // Overlap is allowed, as superfly/ltx's IsContiguous allows it for compacted files.
    if (header.minTxid > at.txid + 1n || header.maxTxid <= at.txid) {
      throw new LtxError(`${where} does not follow TXID ${at.txid}`);
    }
    const stored = storedPageSize(store);
    if (stored !== undefined && stored !== header.pageSize) {
      throw new LtxError(`${where} has page size ${header.pageSize}, the database ${stored}`);
    }
    checksum = at.checksum;
    if (checksum === undefined && tracked) {
      checksum = databaseChecksum(store.image(), header.pageSize);
    }
    if (tracked && checksum !== header.preApplyChecksum) {
      throw new LtxError(
        `${where}: pre-apply checksum ${header.preApplyChecksum.toString(16)}, ` +
          `database has ${checksum?.toString(16)}`,
      );
    }
  }

  const written = new Set<number>();
  const oldCount = store.pageCount;
  // The decoder's page checksums, when it computed them; never for a file
  // whose pages do not match them in number.
  const sums = file.pageChecksums?.length === file.pages.length ? file.pageChecksums : undefined;
  for (let k = 0; k < file.pages.length; k++) {
    const { pgno, data } = file.pages[k];
    if (checksum !== undefined) {
      if (pgno <= oldCount) checksum ^= pageChecksum(pgno, store.read(pgno));
      checksum ^= sums ? sums[k] : pageChecksum(pgno, data);
    }
    store.write(pgno, data);
    written.add(pgno);
  }
  if (checksum !== undefined) {
    // Pages cut off leave the checksum; pages the database grows into without
    // the file writing them are zeros and join it.
    for (let pgno = header.commit + 1; pgno <= oldCount; pgno++) {
      if (pgno !== lock) checksum ^= pageChecksum(pgno, store.read(pgno));
    }
    const zero = new Uint8Array(header.pageSize);
    for (let pgno = oldCount + 1; pgno <= header.commit; pgno++) {
      if (pgno !== lock && !written.has(pgno)) checksum ^= pageChecksum(pgno, zero);
    }
    checksum |= CHECKSUM_FLAG;
  }
  store.resize(header.commit);
  if (tracked && checksum !== file.postApplyChecksum) {
    throw new LtxError(
      `${where}: post-apply checksum ${file.postApplyChecksum.toString(16)}, ` +
        `database has ${checksum?.toString(16)}`,
    );
  }
  return { txid: header.maxTxid, checksum };
}

function applyAll(
  open: (pageSize: number) => PageStore,
  files: Iterable<LtxFile>,
  from: LtxPosition | undefined,
): { store: PageStore | undefined; position: LtxPosition | undefined } {
  let store: PageStore | undefined;
  let position = from;
  for (const file of files) {
    store ??= open(file.header.pageSize);
    position = applyOne(store, file, position);
  }
  store?.flush();
  return { store, position };
}

/**
 * Applies LTX files in order to a database image in memory and returns the
 * new image with its position. A snapshot starts over from nothing; any other
 * file must follow `from` (or the file before it). Throws {@linkcode LtxError}
 * on a gap, a page size change or a checksum that does not match.
 *
 * @example
 * ```ts
 * import { applyLtx } from "./apply.ts";
 * import { decodeLtx } from "./decoder.ts";
 * const snapshot = decodeLtx(await Deno.readFile("0000000000000001-0000000000000001.ltx"));
 * const { db, position } = applyLtx(new Uint8Array(0), [snapshot]);
 * ```
 */
export function applyLtx(
  db: Uint8Array,
  files: Iterable<LtxFile>,
  from?: LtxPosition,
): { db: Uint8Array; position: LtxPosition | undefined } {
  const open = (pageSize: number) => {
    checkWholePages(db.length, pageSize);
    return new MemoryStore(db, pageSize);
  };
  const { store, position } = applyAll(open, files, from);
  return { db: store ? store.image() : db.slice(), position };
}

/**
 * Applies LTX files in order to the database file at `path` (created if
 * missing), writing only the pages they carry; same rules as
 * {@linkcode applyLtx}. Returns the position reached, `from` if no files.
 *
 * @example
 * ```ts
 * import { applyLtxToFile } from "./apply.ts";
 * import { decodeLtx } from "./decoder.ts";
 * const names = ["0000000000000001-0000000000000001.ltx", "0000000000000002-0000000000000002.ltx"];
 * const files = await Promise.all(names.map(async (n) => decodeLtx(await Deno.readFile(n))));
 * applyLtxToFile("restored.db", files); // { txid: 2n, checksum: ... }
 * ```
 */
export function applyLtxToFile(
  path: string,
  files: Iterable<LtxFile>,
  from?: LtxPosition,
): LtxPosition | undefined {
  const file = Deno.openSync(path, { read: true, write: true, create: true });
  try {
    const size = file.statSync().size;
    const open = (pageSize: number) => {
      checkWholePages(size, pageSize);
      return new FileStore(file, pageSize, size / pageSize);
    };
    const { store, position } = applyAll(open, files, from);
    if (store) file.syncSync();
    return position;
  } finally {
    file.close();
  }
}
