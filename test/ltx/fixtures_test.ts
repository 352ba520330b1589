import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import {
  applyLtx,
  applyLtxToFile,
  databaseChecksum,
  decodeLtx,
  encodeLtx,
  HEADER_FLAG_NO_CHECKSUM,
  type LtxFile,
  parseLtxFilename,
} from "../../src/ltx/mod.ts";

const DIR = new URL(
  "../fixtures/litestream-v0.5.11/replica/ltx/0/",
  import.meta.url,
);

function loadFixtures(): { name: string; bytes: Uint8Array; file: LtxFile }[] {
  return [...Deno.readDirSync(DIR)].map((e) => e.name).sort().map((name) => {
    const bytes = Deno.readFileSync(new URL(name, DIR));
    return { name, bytes, file: decodeLtx(bytes) };
  });
}

function kv(path: string): { check: string; rows: Record<string, string> } {
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    const check = String(db.prepare("PRAGMA integrity_check").get()?.integrity_check);
    const rows: Record<string, string> = {};
    for (const r of db.prepare("SELECT k, v FROM kv ORDER BY k").all()) {
      rows[String(r.k)] = String(r.v);
    }
    return { check, rows };
  } finally {
    db.close();
  }
}

// The kv table after round n of the fixture's script (round 0: the three seed rows).
function expectedAfterRound(n: number): Record<string, string> {
  const rows: Record<string, string> = { a: n === 0 ? "1" : `upd${n}`, b: "2", c: "3" };
  for (let i = 1; i <= n; i++) rows[`k${i}`] = `v${i}`;
  return rows;
}

Deno.test("litestream v0.5.11 files decode: frame-format pages, file checksums verified", () => {
  const fixtures = loadFixtures();
  assert.equal(fixtures.length, 6);
  fixtures.forEach(({ name, file }, i) => {
    const txid = BigInt(i + 1);
    assert.deepEqual(parseLtxFilename(name), { minTxid: txid, maxTxid: txid });
    assert.equal(file.header.minTxid, txid);
    assert.equal(file.header.maxTxid, txid);
    assert.equal(file.header.flags, HEADER_FLAG_NO_CHECKSUM);
    assert.equal(file.header.pageSize, 4096);
    assert.equal(file.header.commit, 5);
    assert.equal(file.header.walOffset, 32);
    assert.equal(file.postApplyChecksum, 0n);
    assert.deepEqual(file.pages.map((p) => p.pgno), [1, 2, 3, 4, 5]);
  });
  assert.equal(fixtures[0].file.header.timestamp, 0x19e76c6cec3);
  assert.equal(fixtures[0].file.fileChecksum, 0xc32b58ca29a2beacn);
});

Deno.test("restoring TXIDs 1..n+1 gives the state after round n", () => {
  const fixtures = loadFixtures();
  const dir = Deno.makeTempDirSync();
  try {
    for (let n = 0; n <= 5; n++) {
      const path = `${dir}/round${n}.db`;
      const position = applyLtxToFile(path, fixtures.slice(0, n + 1).map((f) => f.file));
      assert.equal(position?.txid, BigInt(n + 1));
      assert.equal(position?.checksum, databaseChecksum(Deno.readFileSync(path), 4096));
      assert.deepEqual(kv(path), { check: "ok", rows: expectedAfterRound(n) });
    }
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("restoring in memory and on disk give the same bytes", () => {
  const files = loadFixtures().map((f) => f.file);
  const dir = Deno.makeTempDirSync();
  try {
    const path = `${dir}/all.db`;
    applyLtxToFile(path, files.slice(0, 3));
    const position = applyLtxToFile(path, files.slice(3), { txid: 3n });
    const { db } = applyLtx(new Uint8Array(0), files);
    assert.equal(db.length, 5 * 4096);
    assert.deepEqual(Deno.readFileSync(path), db);
    assert.equal(position?.txid, 6n);
    assert.deepEqual(kv(path), { check: "ok", rows: expectedAfterRound(5) });
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});

Deno.test("a gap in the TXIDs is refused", () => {
  const files = loadFixtures().map((f) => f.file);
  assert.throws(
    () => applyLtx(new Uint8Array(0), [files[0], files[2]]),
    /ltx file 3-3 does not follow TXID 1/,
  );
  assert.throws(() => applyLtx(new Uint8Array(0), [files[1]]), /not a snapshot/);
});

Deno.test("a damaged fixture byte is caught", () => {
  const { bytes } = loadFixtures()[1];
  // A literal inside page 1's LZ4 frame: the frame's content checksum catches it.
  const inFrame = bytes.slice();
  inFrame[150] ^= 0x01;
  assert.throws(() => decodeLtx(inFrame), /page 1 at offset 100: lz4/);
  // In the header's timestamp: only the file checksum covers it.
  const inHeader = bytes.slice();
  inHeader[39] ^= 0x01;
  assert.throws(() => decodeLtx(inHeader), /file checksum mismatch/);
});

Deno.test("a file of another page size than the database is refused", () => {
  const { db } = applyLtx(new Uint8Array(0), loadFixtures().map((f) => f.file));
  const small = decodeLtx(encodeLtx({
    header: { pageSize: 1024, commit: 20, minTxid: 7n, maxTxid: 7n, timestamp: 0, flags: 2 },
    pages: [{ pgno: 20, data: new Uint8Array(1024) }],
    postApplyChecksum: 0n,
  }));
  assert.throws(
    () => applyLtx(db, [small], { txid: 6n }),
    /ltx file 7-7 has page size 1024, the database 4096/,
  );
});
