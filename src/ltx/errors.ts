/**
 * The error every LTX and LZ4 check throws, so callers can tell a damaged or
 * foreign file from a bug.
 *
 * @module
 */

/**
 * A file that is not valid LTX (or LZ4 inside it); the message names the check that failed.
 *
 * @example
 * ```ts
 * import { LtxError } from "./errors.ts";
 * try {
 *   throw new LtxError("file checksum mismatch");
 * } catch (e) {
 *   if (!(e instanceof LtxError)) throw e;
 * }
 * ```
 */
export class LtxError extends Error {
  /** Builds the error; `message` should say which check failed and the values involved. */
  constructor(message: string) {
    super(message);
    this.name = "LtxError";
  }
}
