import assert from "node:assert/strict";
import { readWalCommits, readWalHeader, WalError } from "../../src/sqlite/wal.ts";
import { DatabaseSync } from "node:sqlite";
import { buildWal, filledPage } from "./wal_builder.ts";

const SAMPLE = new URL(
  "../fixtures/litestream-v0.5.11/sample.wal",
  import.meta.url,
);

function fixture(url: URL): Uint8Array {
  return Deno.readFileSync(url);
}

// The fixture's "2 commits" are the inserts and the update; the CREATE TABLE
// before them is a third.
Deno.test("sample.wal: three commits (CREATE TABLE, 20 inserts, the update)", () => {
  const wal = fixture(SAMPLE);
  const { header, commits, endOffset } = readWalCommits(wal);
  assert.equal(header.pageSize, 4096);
  assert.equal(header.bigEndianChecksums, false);
  assert.equal(endOffset, 16512);
  assert.deepEqual(
    commits.map((c) => [c.pages.map((p) => p.pgno), c.dbSize, c.offset, c.endOffset]),
    [[[1, 2], 2, 32, 8272], [[2], 2, 8272, 12392], [[2], 2, 12392, 16512]],
  );
});

Deno.test("sample.wal: the pages rebuild the table after each commit", () => {
  const { commits } = readWalCommits(fixture(SAMPLE));
  const dir = Deno.makeTempDirSync();
  try {
    const image = new Uint8Array(2 * 4096);
    const seen: unknown[] = [];
    commits.forEach((commit, i) => {
      for (const p of commit.pages) image.set(p.data, (p.pgno - 1) * 4096);
      // Rollback-journal mode in bytes 18-19, so SQLite does not look for a WAL.
      const copy = image.slice(0, commit.dbSize * 4096);
      copy[18] = copy[19] = 1;
      const path = `${dir}/${i}.db`;
      Deno.writeFileSync(path, copy);
      const db = new DatabaseSync(path);
      const sql = "SELECT count(*) AS rows, total(name = 'row' || id) AS named, " +
        "total(n = 7 * id) AS base, total(n = 7 * id + 1 AND id <= 10) AS updated FROM t";
      seen.push({ ...db.prepare(sql).get() });
      db.close();
    });
    assert.deepEqual(seen, [
      { rows: 0, named: 0, base: 0, updated: 0 },
      { rows: 20, named: 20, base: 20, updated: 0 },
      { rows: 20, named: 20, base: 10, updated: 10 },
    ]);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("reading resumes at the end offset of an earlier read", () => {
  const wal = fixture(SAMPLE);
  const first = readWalCommits(wal.subarray(0, 8272 + 4000));
  assert.equal(first.commits.length, 1);
  assert.equal(first.endOffset, 8272);
  const rest = readWalCommits(wal, first.endOffset);
  assert.deepEqual(rest.commits.map((c) => c.offset), [8272, 12392]);
  assert.deepEqual(rest.commits[1].pages[0].data, wal.slice(12392 + 24, 16512));
});

Deno.test("frames after a damaged frame are ignored, commits before it kept", () => {
  const wal = fixture(SAMPLE).slice();
  wal[12392 + 24 + 100] ^= 1;
  const { commits, endOffset } = readWalCommits(wal);
  assert.equal(commits.length, 2);
  assert.equal(endOffset, 12392);
});

Deno.test("a frame with another generation's salt ends the read", () => {
  const wal = fixture(SAMPLE).slice();
  wal[8272 + 8] ^= 0xff;
  assert.equal(readWalCommits(wal).commits.length, 1);
});

Deno.test("a torn last frame is ignored", () => {
  const wal = fixture(SAMPLE);
  assert.equal(readWalCommits(wal.subarray(0, wal.length - 1)).commits.length, 2);
});

Deno.test("big-endian checksums, uncommitted tail and truncating commits", () => {
  const page = (b: number) => filledPage(512, b);
  const wal = buildWal(512, true, [
    { pgno: 1, data: page(1), commit: 0 },
    { pgno: 3, data: page(3), commit: 0 },
    { pgno: 1, data: page(9), commit: 3 },
    { pgno: 3, data: page(4), commit: 0 },
    { pgno: 2, data: page(2), commit: 2 },
    { pgno: 1, data: page(5), commit: 0 },
  ]);
  const { header, commits, endOffset } = readWalCommits(wal);
  assert.equal(header.bigEndianChecksums, true);
  assert.equal(header.checkpointSeq, 7);
  assert.deepEqual(
    commits.map((c) => [c.dbSize, c.pages.map((p) => [p.pgno, p.data[0]])]),
    [[3, [[1, 9], [3, 3]]], [2, [[2, 2]]]],
  );
  assert.equal(endOffset, 32 + 5 * (24 + 512));
});

Deno.test("checksums are byte-order specific", () => {
  const wal = buildWal(512, true, [{ pgno: 1, data: filledPage(512, 0x5a), commit: 1 }]);
  assert.equal(readWalCommits(wal).commits.length, 1);
  // The same bytes under the little-endian magic: SQLite would reject the header.
  new DataView(wal.buffer).setUint32(0, 0x377f0682);
  assert.throws(() => readWalCommits(wal), /wal header checksum mismatch/);
});

Deno.test("an unreadable WAL throws a WalError naming the problem", () => {
  assert.throws(() => readWalHeader(new Uint8Array(10)), WalError);
  const wal = fixture(SAMPLE).slice();
  wal[0] = 0;
  assert.throws(() => readWalHeader(wal), /invalid wal magic/);
  assert.throws(() => readWalCommits(fixture(SAMPLE), 100), /not a frame boundary/);
  assert.throws(() => readWalCommits(fixture(SAMPLE), 16512 + 4120), /past the end/);
  const bad = fixture(SAMPLE).slice();
  bad[20] ^= 1;
  assert.throws(() => readWalHeader(bad), /wal header checksum mismatch/);
});
