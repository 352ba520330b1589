/**
 * Applying a restore's plan: the LTX files read in order, each checked
 * against its listing and the checksums the history holds, applied to a file
 * beside the local database, which replaces it only once the target is
 * reached. A resume applies the files after the local database to a copy of
 * it, and gives up (for a restore from the start) once the local database
 * turns out not to be on the chain.
 *
 * Apart from the walk (`restore.ts`), which lists the history and plans:
 * this is the local side, where a file is decoded, checked and applied, and
 * one that does not decode, does not hold what its key says or does not
 * match the checksums is a {@linkcode HistoryError}.
 *
 * @module
 */

import { applyLtxToFile, type LtxPosition } from "../ltx/apply.ts";
import { decodeLtx, type LtxFile } from "../ltx/decoder.ts";
import { LtxError } from "../ltx/errors.ts";
import { hasNoChecksum } from "../ltx/header.ts";
import {
  EMPTY_DATABASE_CHECKSUM,
  HistoryError,
  type HistoryFile,
  type RestorePlan,
  type ResumePlan,
} from "./history.ts";
import { removeIfPresent, swapIn } from "./local_files.ts";
import type { ReadSession } from "./restore_reads.ts";

/** How the restore ended. */
export type RestoreOutcome = "current" | "restored" | "empty";

/** Where applying a plan left the database, and how it ended. */
export interface Applied {
  /** The TXID and checksum the database is at. */
  at: LtxPosition;
  /**
   * `current`: the local file was already there; `restored`: a new file is
   * in place; `empty`: the database is empty.
   */
  outcome: RestoreOutcome;
}

/**
 * Applying a plan, and the counts of what it read.
 *
 * @example
 * ```ts
 * import { RestoreRun } from "./restore_apply.ts";
 * import type { ReadSession } from "./restore_reads.ts";
 * import type { RestorePlan } from "./history.ts";
 * declare const session: ReadSession;
 * declare const plan: RestorePlan;
 * const run = new RestoreRun(session, "/data/a.db", "/data/a.db.restoring", false);
 * const applied = (plan.resume && await run.resume(plan, plan.resume)) ?? await run.fromStart(plan);
 * console.log(applied.outcome, run.filesRead, run.bytesRead);
 * ```
 */
export class RestoreRun {
  /** LTX files read so far, those read ahead and then not needed included. */
  filesRead = 0;
  /** Their bytes. */
  bytesRead = 0;

  /**
   * Reads through `session`; builds at `partial` and swaps it in at `path`.
   * With `noHistory` (nothing was ever written) an empty plan leaves the
   * local file where it is.
   */
  constructor(
    readonly session: ReadSession,
    readonly path: string,
    readonly partial: string,
    readonly noHistory: boolean,
  ) {}

  /** Brings the local database up to the target; undefined when it turns out to be off the chain. */
  async resume(plan: RestorePlan, resume: ResumePlan): Promise<Applied | undefined> {
    const { from } = resume;
    if (resume.files.length === 0) {
      if (resume.confirm) {
        for await (const file of this.#files([resume.confirm])) {
          if (file.postApplyChecksum !== from.checksum) return undefined;
        }
      }
      return { at: from, outcome: "current" };
    }
    try {
      this.session.uncounted(() => Deno.copyFileSync(this.path, this.partial));
    } catch (e) {
      if (!(e instanceof Deno.errors.NotFound)) throw e;
      // No local file is an empty database, which is only right at the empty checksum.
      if (from.checksum !== EMPTY_DATABASE_CHECKSUM) return undefined;
      Deno.writeFileSync(this.partial, new Uint8Array());
    }
    let position: LtxPosition = from;
    for await (const file of this.#files(resume.files)) {
      if (position === from && file.header.preApplyChecksum !== from.checksum) {
        removeIfPresent(this.partial);
        return undefined;
      }
      position = this.session.uncounted(() =>
        applyChecked(this.partial, file, position, plan.checkpoints)
      );
    }
    swapIn(this.path, this.partial);
    return { at: position, outcome: "restored" };
  }

  /** Builds the database from the plan's start. */
  async fromStart(plan: RestorePlan): Promise<Applied> {
    const { start } = plan;
    const empty = { txid: start.txid, checksum: EMPTY_DATABASE_CHECKSUM };
    if (start.kind === "empty" && plan.files.length === 0) {
      // With no history at all the local file is left for the caller: the
      // first node to touch an actor decides its history.
      if (!this.noHistory) swapIn(this.path, undefined);
      return { at: empty, outcome: "empty" };
    }
    Deno.writeFileSync(this.partial, new Uint8Array());
    let position: LtxPosition | undefined = start.kind === "empty" ? empty : undefined;
    const files = start.kind === "snapshot" ? [start.file, ...plan.files] : plan.files;
    for await (const file of this.#files(files)) {
      position = this.session.uncounted(() =>
        applyChecked(this.partial, file, position, plan.checkpoints)
      );
    }
    swapIn(this.path, this.partial);
    return { at: position!, outcome: "restored" };
  }

  async *#files(files: HistoryFile[]): AsyncGenerator<LtxFile> {
    this.session.allow(files);
    let i = 0;
    const read = (body: Uint8Array) => {
      this.filesRead++;
      this.bytesRead += body.length;
    };
    for await (const body of this.session.readInOrder(files, read)) {
      yield decodeChecked(files[i++], body);
    }
  }
}

function decodeChecked(object: HistoryFile, body: Uint8Array): LtxFile {
  let file: LtxFile;
  try {
    file = decodeLtx(body);
  } catch (e) {
    if (e instanceof LtxError) {
      throw new HistoryError("corruption", `${object.key}: ${e.message}`, { cause: e });
    }
    throw e;
  }
  const { header } = file;
  if (header.minTxid !== object.minTxid || header.maxTxid !== object.maxTxid) {
    throw new HistoryError(
      "malformed",
      `${object.key} holds TXIDs ${header.minTxid}-${header.maxTxid}`,
    );
  }
  if (hasNoChecksum(header)) {
    throw new HistoryError("malformed", `${object.key} does not track checksums`);
  }
  return file;
}

function applyChecked(
  path: string,
  file: LtxFile,
  at: LtxPosition | undefined,
  checkpoints: Map<bigint, bigint>,
): LtxPosition {
  const { header } = file;
  const name = `${header.minTxid}-${header.maxTxid}`;
  if (header.minTxid !== 1n && header.preApplyChecksum !== at?.checksum) {
    throw new HistoryError(
      "corruption",
      `file ${name}: pre-apply checksum ${hex(header.preApplyChecksum)}, ` +
        `the database at TXID ${at?.txid} has ${hex(at?.checksum)}`,
    );
  }
  let next: LtxPosition | undefined;
  try {
    next = applyLtxToFile(path, [file], at);
  } catch (e) {
    if (e instanceof LtxError) {
      throw new HistoryError("corruption", `file ${name}: ${e.message}`, { cause: e });
    }
    throw e;
  }
  const expected = checkpoints.get(next!.txid);
  if (expected !== undefined && expected !== next!.checksum) {
    throw new HistoryError(
      "corruption",
      `at TXID ${next!.txid} the database has checksum ${hex(next!.checksum)}, ` +
        `a base says ${hex(expected)}`,
    );
  }
  return next!;
}

function hex(n: bigint | undefined): string {
  return n === undefined ? "none" : n.toString(16).padStart(16, "0");
}
