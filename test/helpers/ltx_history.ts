/**
 * An actor's replicated history in the bucket, read and judged apart from
 * `src/replication/`: the keys and the restore rule are written here from
 * docs/adr/0002-replication-keys-and-fencing.md, and every LTX file is
 * decoded by the independent verifier (`test/tools/ltx_verify.py`), so a
 * mistake of the restore code cannot hide itself.
 *
 * @module
 */

import type { Bucket } from "../../src/bucket/bucket.ts";
import { listAll } from "../../src/bucket/bucket.ts";
import { runLtxVerify } from "./ltx_verify.ts";

/** The checksum of an empty database: the flag alone (ADR 0002). */
export const EMPTY_CHECKSUM = "8000000000000000";

/** One LTX file under `wal/<gen>/`. */
export interface HistoryFile {
  /** The key relative to the actor's `wal/`. */
  key: string;
  generation: number;
  min: number;
  max: number;
  /** When the bucket stored it (its clock). */
  lastModified: number;
}

/** A generation's `base`: where its owner's database stood when it took the actor. */
export interface HistoryBase {
  generation: number;
  txid: number;
  /** 16 lowercase hex digits. */
  checksum: string;
  node: string;
  lastModified: number;
}

/** Everything under an actor's `actors/<tenant>/<class>/<name>/`. */
export interface History {
  files: HistoryFile[];
  bases: Map<number, HistoryBase>;
  /** Keys under the actor's prefix of no shape ADR 0002 names (a `deleted` marker included). */
  unknown: string[];
}

/** What the restore rule of ADR 0002 makes of a history. */
export interface ChainPlan {
  /** The files a restore applies, in order; the first a snapshot. */
  chain: HistoryFile[];
  /** Files of a generation past the next generation's base: a former owner's late uploads. */
  late: HistoryFile[];
  /** Non-snapshot files of a generation at or below its own base's TXID. */
  malformed: HistoryFile[];
  /** The TXID a restore must reach. */
  target: number;
  /** The TXID the walk reached (less than `target`: a gap). */
  reached: number;
}

const FILE_KEY = /^([0-9a-f]{16})\/([0-9a-f]{16})-([0-9a-f]{16})\.ltx$/;
const BASE_KEY = /^([0-9a-f]{16})\/base$/;

const hex = (text: string) => parseInt(text, 16);

/** Lists and reads the history of actor `actorPrefix` (`actors/<t>/<c>/<n>/`). */
export async function readHistory(bucket: Bucket, actorPrefix: string): Promise<History> {
  const history: History = { files: [], bases: new Map(), unknown: [] };
  const walPrefix = `${actorPrefix}wal/`;
  for await (const object of listAll(bucket, actorPrefix)) {
    const rest = object.key.startsWith(walPrefix) ? object.key.slice(walPrefix.length) : undefined;
    const file = rest === undefined ? null : FILE_KEY.exec(rest);
    const base = rest === undefined ? null : BASE_KEY.exec(rest);
    if (file) {
      history.files.push({
        key: rest!,
        generation: hex(file[1]),
        min: hex(file[2]),
        max: hex(file[3]),
        lastModified: object.lastModified,
      });
    } else if (base) {
      const stored = await bucket.get(object.key);
      if (!stored) throw new Error(`${object.key} was listed but cannot be read`);
      const json = JSON.parse(new TextDecoder().decode(stored.body));
      history.bases.set(hex(base[1]), {
        generation: hex(base[1]),
        txid: hex(json.txid),
        checksum: json.checksum,
        node: json.node,
        lastModified: object.lastModified,
      });
    } else {
      history.unknown.push(object.key);
    }
  }
  return history;
}

/**
 * The chain ADR 0002's restore accepts, for a history without a `deleted`
 * marker: each generation capped at the next base's TXID, the newest
 * snapshot as the start, then the file whose min follows (the higher
 * generation on a tie) until none does.
 */
export function planChain(history: History): ChainPlan {
  const generations = [...history.bases.keys()].sort((a, b) => a - b);
  const capOf = (generation: number) => {
    const next = generations.find((g) => g > generation);
    return next === undefined ? Infinity : history.bases.get(next)!.txid;
  };
  const late: HistoryFile[] = [];
  const malformed: HistoryFile[] = [];
  const kept: HistoryFile[] = [];
  for (const file of history.files) {
    const base = history.bases.get(file.generation);
    if (file.max > capOf(file.generation)) late.push(file);
    else if (file.min !== 1 && base && file.min <= base.txid) malformed.push(file);
    else kept.push(file);
  }
  const keptBases = generations.map((g) => history.bases.get(g)!.txid);
  const target = Math.max(0, ...kept.map((f) => f.max), ...keptBases);
  const newer = (a: HistoryFile, b: HistoryFile) => a.generation > b.generation ? a : b;
  const snapshots = kept.filter((f) => f.min === 1);
  const start = snapshots.reduce<HistoryFile | undefined>(
    (best, f) =>
      !best || f.max > best.max || (f.max === best.max && f.generation > best.generation)
        ? f
        : best,
    undefined,
  );
  const chain: HistoryFile[] = start ? [start] : [];
  let position = start?.max ?? 0;
  while (true) {
    const next = kept.filter((f) => f.min === position + 1).reduce<HistoryFile | undefined>(
      (best, f) => best ? newer(best, f) : f,
      undefined,
    );
    if (!next) break;
    chain.push(next);
    position = next.max;
  }
  return { chain, late, malformed, target, reached: position };
}

/**
 * Every delta from the actor's first snapshot (the smallest one at TXID 1)
 * on, as if no periodic snapshot existed: with the default retention nothing
 * was collected, so the whole history must still be one unbroken chain.
 * Late and malformed files are left out, as a restore leaves them out.
 */
export function fullChain(history: History, plan: ChainPlan): HistoryFile[] {
  const dropped = new Set([...plan.late, ...plan.malformed]);
  const kept = history.files.filter((f) => !dropped.has(f));
  const first = kept.filter((f) => f.min === 1).sort((a, b) => a.max - b.max)[0];
  if (!first) return [];
  const chain = [first];
  let position = first.max;
  while (true) {
    const next = kept.filter((f) => f.min === position + 1 && f.min !== 1)
      .sort((a, b) => b.generation - a.generation)[0];
    if (!next) return chain;
    chain.push(next);
    position = next.max;
  }
}

/** What {@linkcode checkHistory} found. */
export interface HistoryReport {
  /** Each broken rule, in words; empty when the history is sound. */
  problems: string[];
  /** The database a restore builds (the planned chain, rebuilt by the verifier). */
  image?: Uint8Array;
  /** Its LTX checksum, 16 hex digits. */
  checksum?: string;
  files: number;
  generations: number;
  /** The highest generation with a base. */
  lastGeneration: number;
  late: number;
  /** TXIDs of the planned chain's first (snapshot) and last file. */
  snapshotTxid: number;
  target: number;
}

interface Decoded {
  file: string;
  max_txid: number;
  post_apply: string;
}

/**
 * Reads actor `actorPrefix`'s history from the bucket and checks it, with
 * scratch space in `dir`:
 *
 * - every key has a shape ADR 0002 names, every file's generation has a
 *   base, and no file is malformed;
 * - generations never go backwards: a later generation's base never stands
 *   at a lower TXID than an earlier one's;
 * - within a generation the deltas follow each other from its base on;
 * - every file decodes, and the whole history from the first snapshot on is
 *   one chain (TXIDs contiguous, each pre- and post-apply checksum that of
 *   the database built so far) that reaches the restore's target;
 * - every snapshot and every base carries the checksum the full chain has
 *   at its TXID;
 * - the chain a restore applies rebuilds the same database as the full one.
 */
export async function checkHistory(
  bucket: Bucket,
  actorPrefix: string,
  dir: string,
): Promise<HistoryReport> {
  const walPrefix = `${actorPrefix}wal/`;
  const history = await readHistory(bucket, actorPrefix);
  const plan = planChain(history);
  const problems: string[] = [];
  const generations = [...history.bases.keys()].sort((a, b) => a - b);
  const report: HistoryReport = {
    problems,
    files: history.files.length,
    generations: generations.length,
    lastGeneration: generations.at(-1) ?? 0,
    late: plan.late.length,
    snapshotTxid: plan.chain[0]?.max ?? 0,
    target: plan.target,
  };
  for (const key of history.unknown) problems.push(`a key of no known shape: ${key}`);
  for (const file of plan.malformed) {
    problems.push(`malformed: ${file.key} starts at or below its generation's base`);
  }
  for (const file of history.files) {
    if (!history.bases.has(file.generation)) {
      problems.push(`${file.key}: its generation has no base`);
    }
  }
  for (let i = 1; i < generations.length; i++) {
    const [before, after] = [
      history.bases.get(generations[i - 1])!,
      history.bases.get(generations[i])!,
    ];
    if (after.txid < before.txid) {
      problems.push(
        `TXIDs went backwards: generation ${after.generation} (node ${after.node}) starts at ${after.txid}, generation ${before.generation} (node ${before.node}) at ${before.txid}`,
      );
    }
  }
  for (const generation of generations) {
    let position = history.bases.get(generation)!.txid;
    // An actor's first file is a snapshot: from an empty database, it is
    // the first step; any other snapshot repeats what the deltas hold.
    const mine = history.files.filter((f) => f.generation === generation)
      .sort((a, b) => a.min - b.min || a.max - b.max);
    const first = position === 0 ? mine.find((f) => f.min === 1) : undefined;
    for (const file of mine.filter((f) => f.min !== 1 || f === first)) {
      if (file.min !== position + 1) {
        problems.push(`generation ${generation}: ${file.key} does not follow TXID ${position}`);
      }
      position = file.max;
    }
  }
  if (plan.reached !== plan.target) {
    problems.push(
      `a gap: the restore's walk stops at TXID ${plan.reached}, the target is ${plan.target}`,
    );
  }

  const paths = new Map<string, string>();
  for (const file of history.files) {
    const stored = await bucket.get(`${walPrefix}${file.key}`);
    if (!stored) throw new Error(`${walPrefix}${file.key} was listed but cannot be read`);
    const path = `${dir}/${file.key.replace("/", "-")}`;
    await Deno.writeFile(path, stored.body);
    paths.set(file.key, path);
  }
  if (history.files.length === 0) return report;
  const each = await runLtxVerify(["file", ...paths.values()]);
  if (!each.ok) problems.push(`a file does not decode: ${each.output.trim()}`);
  const decoded = new Map<string, Decoded>();
  const keyOf = new Map([...paths].map(([key, path]) => [path, key]));
  for (const line of each.output.split("\n")) {
    if (line.startsWith("{")) {
      const summary = JSON.parse(line) as Decoded;
      decoded.set(keyOf.get(summary.file)!, summary);
    }
  }

  const full = fullChain(history, plan);
  const fullRun = await runLtxVerify(["chain", ...full.map((f) => paths.get(f.key)!)]);
  if (!fullRun.ok) problems.push(`the whole history is not one chain: ${fullRun.output.trim()}`);
  const fullEnd = full.at(-1)?.max ?? 0;
  if (fullEnd !== plan.target) {
    problems.push(`the whole history stops at TXID ${fullEnd}, the target is ${plan.target}`);
  }
  // Once the full chain verified, each file's post-apply checksum is the
  // database's checksum at its max TXID.
  const checksumAt = new Map<number, string>([[0, EMPTY_CHECKSUM]]);
  for (const file of full) {
    const summary = decoded.get(file.key);
    if (summary) checksumAt.set(file.max, summary.post_apply);
  }
  for (const file of history.files.filter((f) => f.min === 1 && !plan.late.includes(f))) {
    const expected = checksumAt.get(file.max);
    const got = decoded.get(file.key)?.post_apply;
    if (expected !== undefined && got !== undefined && got !== expected) {
      problems.push(`snapshot ${file.key} has checksum ${got}, the history has ${expected} there`);
    }
  }
  for (const base of history.bases.values()) {
    const expected = checksumAt.get(base.txid);
    if (expected === undefined) {
      problems.push(
        `the base of generation ${base.generation} stands at TXID ${base.txid}, where no file of the history ends`,
      );
    } else if (base.checksum !== expected) {
      problems.push(
        `the base of generation ${base.generation} has checksum ${base.checksum}, the history has ${expected} at TXID ${base.txid}`,
      );
    }
  }

  const imagePath = `${dir}/restored.db`;
  const restore = await runLtxVerify([
    "chain",
    "--out",
    imagePath,
    ...plan.chain.map((f) => paths.get(f.key)!),
  ]);
  if (!restore.ok) {
    problems.push(`the restore's chain does not verify: ${restore.output.trim()}`);
    return report;
  }
  report.checksum = JSON.parse(restore.output.split("\n")[0]).checksum;
  report.image = await Deno.readFile(imagePath);
  if (report.checksum !== checksumAt.get(plan.target)) {
    problems.push(
      `the restore's chain ends at checksum ${report.checksum}, the whole history at ${
        checksumAt.get(plan.target)
      }`,
    );
  }
  return report;
}
