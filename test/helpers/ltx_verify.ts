/**
 * Runs the independent LTX verifier, `test/tools/ltx_verify.py`, from tests.
 *
 * The verifier is a standard-library Python 3 program written from the LTX
 * format's definition (superfly/ltx, version 3), not from this repository's
 * encoder, so it can catch the encoder's mistakes. It decodes every frame,
 * checks the header rules, the page index and the file checksum, and in a
 * chain the TXID contiguity and the pre- and post-apply database checksums.
 *
 * @example
 * ```ts ignore
 * const result = await verifyLtxChain(paths, `${dir}/restored.db`);
 * assert.ok(result.ok, result.output);
 * ```
 *
 * @module
 */

/** Absolute path of the verifier script. */
export const LTX_VERIFY_SCRIPT: string = new URL("../tools/ltx_verify.py", import.meta.url)
  .pathname;

/** The interpreter that runs the verifier. */
export const PYTHON = "python3";

/** What a verifier run gave. */
export interface LtxVerifyResult {
  /** True when the verifier exited 0: every check passed. */
  ok: boolean;
  /**
   * Its stdout then its stderr: JSON lines on success, and for a failure a
   * line `ltx_verify: FILE: CHECK: detail` naming the file and the check.
   */
  output: string;
}

/**
 * Runs `ltx_verify.py` with `args` (a subcommand and its arguments) and
 * returns its exit status as `ok` and its output.
 */
export async function runLtxVerify(args: string[]): Promise<LtxVerifyResult> {
  const out = await new Deno.Command(PYTHON, {
    args: [LTX_VERIFY_SCRIPT, ...args],
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decoder = new TextDecoder();
  return {
    ok: out.code === 0,
    output: decoder.decode(out.stdout) + decoder.decode(out.stderr),
  };
}

/**
 * Verifies each LTX file on its own (`ltx_verify.py file`): full decode,
 * header rules, page order (a snapshot holds every page), LZ4 payloads,
 * page index, trailer and file checksum. The output has one JSON line per
 * good file: `{file, min_txid, max_txid, commit, page_size, pages,
 * pre_apply, post_apply, ...}`, checksums as 16-digit hex strings.
 * `ok` is false if any file fails.
 */
export function verifyLtxFiles(files: string[]): Promise<LtxVerifyResult> {
  return runLtxVerify(["file", ...files]);
}

/**
 * Verifies LTX files as a chain (`ltx_verify.py chain`): `files` in
 * application order, the first a snapshot (min TXID 1). Besides each file's
 * own checks, every file's min TXID must follow the previous max TXID, and
 * for files that track checksums the pre-apply checksum must equal the
 * checksum of the database built so far and the post-apply checksum that of
 * the database after applying the file. With `outPath`, the final database
 * image is written there. The output is one JSON summary line
 * `{ok, files, max_txid, commit, page_size, checksum, checksums_checked, out}`.
 */
export function verifyLtxChain(files: string[], outPath?: string): Promise<LtxVerifyResult> {
  return runLtxVerify(["chain", ...(outPath === undefined ? [] : ["--out", outPath]), ...files]);
}

/**
 * Like {@link verifyLtxChain} for files held in memory (read back from a
 * bucket, say): writes them to a temporary directory in the given order,
 * verifies the chain, and on success returns the rebuilt database image.
 */
export async function verifyLtxChainBytes(
  files: Uint8Array[],
): Promise<LtxVerifyResult & { image?: Uint8Array }> {
  const dir = await Deno.makeTempDir({ prefix: "ltx_verify_" });
  try {
    const paths: string[] = [];
    for (const [i, bytes] of files.entries()) {
      const path = `${dir}/${String(i).padStart(6, "0")}.ltx`;
      await Deno.writeFile(path, bytes);
      paths.push(path);
    }
    const outPath = `${dir}/restored.db`;
    const result = await verifyLtxChain(paths, outPath);
    return result.ok ? { ...result, image: await Deno.readFile(outPath) } : result;
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}
