/**
 * LTX file names: `<minTXID>-<maxTXID>.ltx`, each TXID as 16 lowercase hex
 * digits, so that names sort in TXID order.
 *
 * @module
 */

import { LtxError } from "./errors.ts";

const FILENAME = /^([0-9a-f]{16})-([0-9a-f]{16})\.ltx$/;

/**
 * A TXID as 16 lowercase hex digits.
 *
 * @example
 * ```ts
 * import { formatTxid } from "./filename.ts";
 * formatTxid(255n); // "00000000000000ff"
 * ```
 */
export function formatTxid(txid: bigint): string {
  if (txid < 0n || txid >= 1n << 64n) throw new LtxError(`txid ${txid} out of range`);
  return txid.toString(16).padStart(16, "0");
}

/**
 * The file name of an LTX file covering `minTxid` to `maxTxid`.
 *
 * @example
 * ```ts
 * import { formatLtxFilename } from "./filename.ts";
 * formatLtxFilename(1n, 2n); // "0000000000000001-0000000000000002.ltx"
 * ```
 */
export function formatLtxFilename(minTxid: bigint, maxTxid: bigint): string {
  return `${formatTxid(minTxid)}-${formatTxid(maxTxid)}.ltx`;
}

/**
 * The TXID range of an LTX file name; throws {@linkcode LtxError} for any
 * other name (upper-case hex, paths and short TXIDs included).
 *
 * @example
 * ```ts
 * import { parseLtxFilename } from "./filename.ts";
 * parseLtxFilename("0000000000000001-0000000000000002.ltx"); // { minTxid: 1n, maxTxid: 2n }
 * ```
 */
export function parseLtxFilename(name: string): { minTxid: bigint; maxTxid: bigint } {
  const m = FILENAME.exec(name);
  if (!m) throw new LtxError(`invalid ltx filename: ${JSON.stringify(name)}`);
  return { minTxid: BigInt(`0x${m[1]}`), maxTxid: BigInt(`0x${m[2]}`) };
}
