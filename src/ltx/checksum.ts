/**
 * The LTX rolling database checksum: the XOR of a CRC-64 per page (over the
 * page number, big-endian, then the page bytes), with the top bit always set
 * so a tracked checksum is never zero. XOR makes it incremental: replacing a
 * page XORs out its old checksum and XORs in the new one.
 *
 * @module
 */

import { Crc64 } from "./crc64.ts";
import { LtxError } from "./errors.ts";

/** The bit LTX sets on every checksum so that zero can mean "not tracked". */
export const CHECKSUM_FLAG = 1n << 63n;

/** SQLite's pending byte: the page holding it (the lock page) is never stored. */
const PENDING_BYTE = 0x40000000;

/**
 * The page number of the lock page for a page size; LTX files never carry it
 * and the database checksum leaves it out.
 *
 * @example
 * ```ts
 * import { lockPgno } from "./checksum.ts";
 * lockPgno(4096); // 262145
 * ```
 */
export function lockPgno(pageSize: number): number {
  return Math.floor(PENDING_BYTE / pageSize) + 1;
}

/**
 * The checksum of one page, as LTX XORs into the database checksum.
 *
 * @example
 * ```ts
 * import { pageChecksum } from "./checksum.ts";
 * const sum = pageChecksum(1, new Uint8Array(4096));
 * ```
 */
export function pageChecksum(pgno: number, data: Uint8Array): bigint {
  return CHECKSUM_FLAG | new Crc64().updateUint32(pgno).update(data).digest();
}

/**
 * The rolling checksum of a whole database image; an empty database has the
 * checksum `CHECKSUM_FLAG`. Throws an {@linkcode LtxError} if the image is not
 * a whole number of pages, since a torn page would be checksummed as garbage.
 *
 * @example
 * ```ts
 * import { databaseChecksum } from "./checksum.ts";
 * const sum = databaseChecksum(await Deno.readFile("app.db"), 4096);
 * ```
 */
export function databaseChecksum(db: Uint8Array, pageSize: number): bigint {
  if (db.length % pageSize !== 0) {
    throw new LtxError(`database size ${db.length} is not a multiple of page size ${pageSize}`);
  }
  const lock = lockPgno(pageSize);
  let sum = CHECKSUM_FLAG;
  const pages = db.length / pageSize;
  for (let pgno = 1; pgno <= pages; pgno++) {
    if (pgno === lock) continue;
    sum ^= pageChecksum(pgno, db.subarray((pgno - 1) * pageSize, pgno * pageSize));
  }
  return CHECKSUM_FLAG | sum;
}
