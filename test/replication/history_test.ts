import assert from "node:assert/strict";
import type { ObjectInfo } from "../../src/bucket/bucket.ts";
import { actorPrefix } from "../../src/bucket/keys.ts";
import { CHECKSUM_FLAG } from "../../src/ltx/checksum.ts";
import {
  type ActorHistory,
  baseKey,
  type BaseRecord,
  basesToRead,
  decodeBase,
  decodeDeleted,
  deletedKey,
  type DeletedRecord,
  EMPTY_DATABASE_CHECKSUM,
  encodeBase,
  encodeDeleted,
  formatGeneration,
  HistoryError,
  type HistoryErrorKind,
  type LocalPosition,
  parseHistory,
  planRestore,
  type RestorePlan,
  supersededDelete,
  walFileKey,
} from "../../src/replication/history.ts";
import { ACTOR } from "./source_db.ts";

// A synthetic checksum for the state at a TXID: distinct per TXID, top bit set.
const sum = (txid: bigint, fork = 0n) => CHECKSUM_FLAG | (fork << 32n) | txid;

const info = (key: string, lastModified = 0): ObjectInfo => ({
  key,
  etag: '"e"',
  size: 100,
  lastModified,
});
const file = (gen: bigint, min: bigint, max: bigint) => info(walFileKey(ACTOR, gen, min, max));
const base = (gen: bigint) => info(baseKey(ACTOR, gen));
const record = (generation: bigint, txid: bigint, checksum = sum(txid)): BaseRecord => ({
  generation,
  txid,
  checksum,
  node: "a",
  at: 0,
});
const marker = (generation: bigint, txid: bigint): DeletedRecord => ({
  generation,
  txid,
  node: "a",
  at: 0,
});

function plan(
  objects: ObjectInfo[],
  bases: BaseRecord[] = [],
  deleted?: DeletedRecord,
  local?: LocalPosition,
): RestorePlan {
  const history = parseHistory(objects, ACTOR);
  return planRestore(history, new Map(bases.map((b) => [b.generation, b])), deleted, local);
}

// The walk as "gen:min-max" strings, the start first.
function walk(p: RestorePlan): string[] {
  const start = p.start.kind === "snapshot"
    ? `${p.start.file.generation}:1-${p.start.txid}`
    : `empty@${p.start.txid}`;
  return [start, ...p.files.map((f) => `${f.generation}:${f.minTxid}-${f.maxTxid}`)];
}

function throwsHistory(run: () => unknown, kind: HistoryErrorKind): HistoryError {
  let caught: unknown;
  try {
    run();
  } catch (e) {
    caught = e;
  }
  assert.ok(caught instanceof HistoryError, `expected a HistoryError, got ${caught}`);
  assert.equal(caught.kind, kind, caught.message);
  assert.equal(caught.status, 500);
  return caught;
}

Deno.test("history keys: ADR 0002's layout", () => {
  assert.equal(formatGeneration(3n), "0000000000000003");
  assert.throws(() => formatGeneration(0n), RangeError);
  assert.equal(
    walFileKey(ACTOR, 2n, 1n, 255n),
    "actors/acme/room/lobby/wal/0000000000000002/0000000000000001-00000000000000ff.ltx",
  );
  assert.equal(baseKey(ACTOR, 2n), "actors/acme/room/lobby/wal/0000000000000002/base");
  assert.equal(deletedKey(ACTOR), "actors/acme/room/lobby/deleted");
  assert.throws(() => walFileKey(ACTOR, 1n, 5n, 4n), RangeError);
});

Deno.test("parseHistory: sorts the listing and ignores keys of other shapes", () => {
  const prefix = actorPrefix(ACTOR);
  const history: ActorHistory = parseHistory([
    file(2n, 4n, 4n),
    base(2n),
    file(1n, 2n, 3n),
    file(1n, 1n, 1n),
    info(deletedKey(ACTOR)),
    info(`${prefix}wal/0000000000000000/base`), // generation 0
    info(`${prefix}wal/000000000000000A/base`), // upper-case hex
    info(`${prefix}wal/0000000000000001/0000000000000000-0000000000000001.ltx`), // min 0
    info(`${prefix}wal/0000000000000001/0000000000000005-0000000000000004.ltx`), // min > max
    info(`${prefix}wal/0000000000000001/notes.txt`),
    info(`${prefix}other`),
    info("actors/acme/room/other/wal/0000000000000001/base"),
  ], ACTOR);
  assert.deepEqual(history.generations, [1n, 2n]);
  assert.deepEqual([...history.bases.keys()], [2n]);
  assert.deepEqual(
    history.files.map((f) => [f.generation, f.minTxid, f.maxTxid]),
    [[1n, 1n, 1n], [1n, 2n, 3n], [2n, 4n, 4n]],
  );
  assert.equal(history.deleted?.key, deletedKey(ACTOR));
  assert.equal(history.ignored.length, 7);
});

Deno.test("base and deleted codecs: round trip, ADR 0002's JSON, strict validation", () => {
  const b = record(3n, 200n, 0x8f3a_0000_0000_0001n);
  const bytes = encodeBase(b);
  assert.deepEqual(JSON.parse(new TextDecoder().decode(bytes)), {
    version: 1,
    generation: "0000000000000003",
    txid: "00000000000000c8",
    checksum: "8f3a000000000001",
    node: "a",
    at: 0,
  });
  assert.deepEqual(decodeBase(bytes), b);
  const d = marker(4n, 12n);
  assert.deepEqual(decodeDeleted(encodeDeleted(d)), d);
  assert.equal(
    JSON.parse(new TextDecoder().decode(encodeDeleted(d))).checksum,
    "8000000000000000",
  );

  const good = JSON.parse(new TextDecoder().decode(bytes));
  const bad = (patch: Record<string, unknown>) =>
    new TextEncoder().encode(JSON.stringify({ ...good, ...patch }));
  for (
    const patch of [
      { version: 2 },
      { generation: "0000000000000000" },
      { generation: 3 },
      { txid: "00000000000000C8" },
      { txid: "c8" },
      { checksum: "0f3a000000000001" },
      { node: "" },
      { at: -1 },
      { at: 1.5 },
    ]
  ) {
    throwsHistory(() => decodeBase(bad(patch)), "malformed");
  }
  throwsHistory(() => decodeBase(new TextEncoder().encode("[1]")), "malformed");
  throwsHistory(() => decodeBase(new TextEncoder().encode("{")), "malformed");
  throwsHistory(() => decodeBase(new Uint8Array([0xff, 0xfe])), "malformed");
  // A marker says the database after it is empty.
  throwsHistory(() => decodeDeleted(bytes), "malformed");
  assert.throws(() => encodeBase(record(1n, 1n, 5n)), RangeError);
});

Deno.test("planRestore: a snapshot and the files after it", () => {
  const p = plan([file(1n, 1n, 5n), file(1n, 6n, 6n), file(1n, 7n, 9n), base(1n)], [
    record(1n, 0n, EMPTY_DATABASE_CHECKSUM),
  ]);
  assert.deepEqual(walk(p), ["1:1-5", "1:6-6", "1:7-9"]);
  assert.equal(p.target, 9n);
  assert.equal(p.highestGeneration, 1n);
  // The base at TXID 0 lies before the start: not a checkpoint.
  assert.deepEqual([...p.checkpoints], []);
});

Deno.test("planRestore: the newest snapshot is the start; equal TXIDs go to the higher generation", () => {
  const p = plan([
    file(1n, 1n, 5n),
    file(1n, 1n, 9n),
    file(1n, 6n, 9n),
    file(2n, 1n, 9n),
    file(2n, 10n, 10n),
  ]);
  assert.deepEqual(walk(p), ["2:1-9", "2:10-10"]);
  assert.equal(p.start.txid, 9n);
});

Deno.test("planRestore: no file where the walk needs one is a gap", () => {
  const e = throwsHistory(() => plan([file(1n, 1n, 5n), file(1n, 7n, 8n)]), "gap");
  assert.match(e.message, /stops at TXID 5.*target is 8/);
  // Files but no snapshot: nothing starts at TXID 1.
  throwsHistory(() => plan([file(1n, 2n, 3n)]), "gap");
  // A base further than any file: the target it sets is not reached.
  throwsHistory(
    () => plan([file(1n, 1n, 5n), base(2n)], [record(2n, 7n)]),
    "gap",
  );
});

Deno.test("planRestore: the cap drops a late upload of an older generation", () => {
  // Generation 1 lost the actor at TXID 4; its 5-5 and 6-7 landed after generation 2's base.
  const p = plan([
    base(1n),
    file(1n, 1n, 3n),
    file(1n, 4n, 4n),
    file(1n, 5n, 5n),
    file(1n, 6n, 7n),
    base(2n),
    file(2n, 5n, 6n),
    file(2n, 7n, 7n),
  ], [record(1n, 0n, EMPTY_DATABASE_CHECKSUM), record(2n, 4n)]);
  assert.deepEqual(walk(p), ["1:1-3", "1:4-4", "2:5-6", "2:7-7"]);
  assert.deepEqual(
    p.dropped.map((d) => d.key),
    [walFileKey(ACTOR, 1n, 5n, 5n), walFileKey(ACTOR, 1n, 6n, 7n)],
  );
  assert.match(p.dropped[0].reason, /cap 4/);
  assert.deepEqual([...p.checkpoints], [[4n, sum(4n)]]);
});

Deno.test("planRestore: the cap is the next higher generation that has a base", () => {
  // Generation 2 never wrote a base (it wrote nothing); generation 3's caps generation 1.
  const p = plan([
    file(1n, 1n, 3n),
    file(1n, 4n, 6n),
    file(1n, 7n, 7n),
    base(3n),
    file(3n, 7n, 8n),
  ], [record(3n, 6n)]);
  assert.deepEqual(walk(p), ["1:1-3", "1:4-6", "3:7-8"]);
  assert.deepEqual(p.dropped.map((d) => d.key), [walFileKey(ACTOR, 1n, 7n, 7n)]);
});

Deno.test("planRestore: the walk is duplicate-free across generations", () => {
  // The same TXIDs in two generations (generation 2 took over at 3) and a
  // resend spanning more commits in one generation.
  const p = plan([
    file(1n, 1n, 3n),
    file(1n, 4n, 4n),
    base(2n),
    file(2n, 4n, 4n),
    file(2n, 5n, 5n),
    file(2n, 5n, 7n),
    file(2n, 8n, 8n),
  ], [record(2n, 3n)]);
  assert.deepEqual(walk(p), ["1:1-3", "2:4-4", "2:5-7", "2:8-8"]);
  const positions = [p.start.txid, ...p.files.map((f) => f.maxTxid)];
  for (let i = 1; i < positions.length; i++) {
    assert.equal(p.files[i - 1].minTxid, positions[i - 1] + 1n);
    assert.ok(positions[i] > positions[i - 1]);
  }
});

Deno.test("planRestore: a non-snapshot file at or before its own base is malformed and dropped", () => {
  const p = plan([
    file(1n, 1n, 5n),
    base(2n),
    file(2n, 5n, 6n),
    file(2n, 6n, 6n),
  ], [record(2n, 5n)]);
  assert.deepEqual(walk(p), ["1:1-5", "2:6-6"]);
  assert.match(p.dropped[0].reason, /malformed/);
});

Deno.test("planRestore: the deleted marker drops older generations and earlier files", () => {
  const history = parseHistory([
    file(1n, 1n, 5n),
    file(1n, 6n, 6n),
    base(2n),
    file(2n, 1n, 7n),
    file(2n, 8n, 8n),
    info(deletedKey(ACTOR)),
    base(3n),
    file(3n, 1n, 10n),
    file(3n, 11n, 11n),
  ], ACTOR);
  const deleted = marker(2n, 9n);
  assert.deepEqual(basesToRead(history).map((b) => b.generation), [2n, 3n]);
  const bases = new Map([[2n, record(2n, 6n)], [3n, record(3n, 9n, EMPTY_DATABASE_CHECKSUM)]]);
  const p = planRestore(history, bases, deleted);
  assert.deepEqual(walk(p), ["3:1-10", "3:11-11"]);
  assert.equal(p.dropped.length, 4);
  assert.equal(p.highestGeneration, 3n);

  // Nothing after the delete: the empty database at its TXID.
  const only = plan([file(1n, 1n, 5n), base(1n), info(deletedKey(ACTOR))], [
    record(1n, 0n, EMPTY_DATABASE_CHECKSUM),
  ], marker(1n, 6n));
  assert.deepEqual(walk(only), ["empty@6"]);
  assert.equal(only.target, 6n);

  // Files that follow the empty database at the delete's TXID.
  const after = plan([base(2n), file(2n, 7n, 8n)], [record(2n, 6n, EMPTY_DATABASE_CHECKSUM)], {
    ...marker(1n, 6n),
  });
  assert.deepEqual(walk(after), ["empty@6", "2:7-8"]);
  assert.deepEqual([...after.checkpoints], [[6n, EMPTY_DATABASE_CHECKSUM]]);
});

Deno.test("planRestore: a deleted marker a later generation's base starts below was lost: the walk ignores it", () => {
  // Generation 1 wrote up to 8 and deleted the actor at 9, but its marker
  // landed late: generation 2 had restored at 6 without it and wrote 7.
  const history = parseHistory([
    file(1n, 1n, 5n),
    file(1n, 6n, 6n),
    file(1n, 7n, 8n),
    base(1n),
    info(deletedKey(ACTOR)),
    base(2n),
    file(2n, 7n, 7n),
  ], ACTOR);
  const deleted = marker(1n, 9n);
  assert.deepEqual(basesToRead(history).map((b) => b.generation), [1n, 2n]);
  const bases = new Map([
    [1n, record(1n, 0n, EMPTY_DATABASE_CHECKSUM)],
    [2n, record(2n, 6n)],
  ]);
  assert.equal(supersededDelete(bases, deleted), true);
  const p = planRestore(history, bases, deleted);
  assert.deepEqual(walk(p), ["1:1-5", "1:6-6", "2:7-7"]);
  assert.ok(p.dropped.some((d) => d.key === deletedKey(ACTOR) && /was lost/.test(d.reason)));
  assert.equal(p.target, 7n);
  // A later base at the delete with the empty database, or above it,
  // restored with it: the marker stands.
  assert.equal(
    supersededDelete(new Map([[2n, record(2n, 9n, EMPTY_DATABASE_CHECKSUM)]]), deleted),
    false,
  );
  assert.equal(supersededDelete(new Map([[2n, record(2n, 10n)]]), deleted), false);
  // At the delete with a database that is not empty, it restored without it.
  assert.equal(supersededDelete(new Map([[2n, record(2n, 9n)]]), deleted), true);
});

Deno.test("planRestore: bases that disagree with the walk are corruption", () => {
  // Two bases at the same TXID on the walk with different checksums.
  throwsHistory(
    () =>
      plan([file(1n, 1n, 4n), base(2n), base(3n), file(3n, 5n, 5n)], [
        record(2n, 4n, sum(4n)),
        record(3n, 4n, sum(4n, 1n)),
      ]),
    "corruption",
  );
  // The empty start with a base there that is not empty.
  throwsHistory(() => plan([base(1n)], [record(1n, 0n, sum(0n, 7n))]), "corruption");
  // A base whose body names another generation than its key.
  const history = parseHistory([file(1n, 1n, 4n), base(2n)], ACTOR);
  throwsHistory(
    () => planRestore(history, new Map([[2n, record(3n, 4n)]]), undefined),
    "malformed",
  );
});

Deno.test("planRestore: nothing at all is the empty database at 0", () => {
  const p = plan([]);
  assert.deepEqual(walk(p), ["empty@0"]);
  assert.equal(p.target, 0n);
  assert.equal(p.highestGeneration, 0n);
  const only = plan([base(1n)], [record(1n, 0n, EMPTY_DATABASE_CHECKSUM)]);
  assert.deepEqual([...only.checkpoints], [[0n, EMPTY_DATABASE_CHECKSUM]]);
});

Deno.test("planRestore: a local database on the chain resumes; off the chain it does not", () => {
  const objects = [
    file(1n, 1n, 5n),
    file(1n, 6n, 6n),
    file(1n, 7n, 9n),
    base(2n),
    file(2n, 10n, 12n),
  ];
  const bases = [record(2n, 9n)];
  const at = (txid: bigint, checksum = sum(txid)) =>
    plan(objects, bases, undefined, { txid, checksum });

  const mid = at(6n).resume!;
  assert.deepEqual(mid.files.map((f) => f.maxTxid), [9n, 12n]);
  assert.equal(mid.confirm, undefined);
  // At the start: every file after the snapshot, and the snapshot not read.
  assert.deepEqual(at(5n).resume!.files.map((f) => f.maxTxid), [6n, 9n, 12n]);
  // At the target, the last file confirms the checksum.
  const top = at(12n).resume!;
  assert.deepEqual(top.files, []);
  assert.equal(top.confirm?.maxTxid, 12n);
  // At a base: planning confirms it, or refuses a different checksum.
  assert.deepEqual(at(9n).resume!.files.map((f) => f.maxTxid), [12n]);
  assert.equal(at(9n, sum(9n, 1n)).resume, undefined);
  // Not a position of the walk, before the start, past the target.
  assert.equal(at(8n).resume, undefined);
  assert.equal(at(3n).resume, undefined);
  assert.equal(at(13n).resume, undefined);

  // The empty start confirms only the empty checksum.
  const empty = plan([], [], undefined, { txid: 0n, checksum: EMPTY_DATABASE_CHECKSUM });
  assert.deepEqual(empty.resume, {
    from: { txid: 0n, checksum: EMPTY_DATABASE_CHECKSUM },
    files: [],
  });
  assert.equal(plan([], [], undefined, { txid: 0n, checksum: sum(0n, 7n) }).resume, undefined);
  // Only a snapshot, the local database at it: the snapshot confirms.
  const snap = plan([file(1n, 1n, 5n)], [], undefined, { txid: 5n, checksum: sum(5n) }).resume!;
  assert.equal(snap.confirm?.maxTxid, 5n);
});
