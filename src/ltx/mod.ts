/**
 * LTX files: the transaction files WasmKeep uploads to the bucket, in the
 * format of superfly/ltx (and litestream). Encode, decode and verify them,
 * name them, and apply them to a database.
 *
 * @example Restoring a database from a snapshot and the files after it
 * ```ts
 * import { applyLtxToFile, decodeLtx } from "./mod.ts";
 * const names = ["0000000000000001-0000000000000001.ltx", "0000000000000002-0000000000000002.ltx"];
 * const files = await Promise.all(names.map(async (n) => decodeLtx(await Deno.readFile(n))));
 * applyLtxToFile("restored.db", files);
 * ```
 *
 * @module
 */

export { applyLtx, applyLtxToFile, type LtxPosition } from "./apply.ts";
export { CHECKSUM_FLAG, databaseChecksum, lockPgno, pageChecksum } from "./checksum.ts";
export { decodeLtx, type LtxFile } from "./decoder.ts";
export {
  encodeLtx,
  type LtxEncodeInput,
  LtxEncoder,
  type LtxHeaderInit,
  type LtxPage,
} from "./encoder.ts";
export { LtxError } from "./errors.ts";
export { formatLtxFilename, formatTxid, parseLtxFilename } from "./filename.ts";
export {
  decodeHeader,
  HEADER_FLAG_NO_CHECKSUM,
  type LtxHeader,
  PAGE_FLAG_SIZE,
  validateHeader,
} from "./header.ts";
