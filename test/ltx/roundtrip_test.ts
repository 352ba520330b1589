import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import {
  applyLtxToFile,
  databaseChecksum,
  decodeLtx,
  encodeLtx,
  formatLtxFilename,
  type LtxPage,
  parseLtxFilename,
} from "../../src/ltx/mod.ts";
import { readWalCommits, type WalCommit } from "../../src/sqlite/wal.ts";

// Replays commits onto an image, the way a checkpoint would.
function applyCommits(image: Uint8Array, commits: WalCommit[], pageSize: number): Uint8Array {
  for (const c of commits) {
    const next = new Uint8Array(c.dbSize * pageSize);
    next.set(image.subarray(0, Math.min(image.length, next.length)));
    for (const p of c.pages) next.set(p.data, (p.pgno - 1) * pageSize);
    image = next;
  }
  return image;
}

// One LTX file for a run of commits: each page once, at its last content.
function ltxFor(
  commits: WalCommit[],
  firstTxid: bigint,
  before: Uint8Array,
  pageSize: number,
  salts: { salt1: number; salt2: number },
): { name: string; bytes: Uint8Array; after: Uint8Array } {
  const after = applyCommits(before, commits, pageSize);
  const dbSize = commits[commits.length - 1].dbSize;
  const snapshot = firstTxid === 1n;
  let pages: LtxPage[];
  if (snapshot) {
    pages = Array.from({ length: dbSize }, (_, i) => ({
      pgno: i + 1,
      data: after.subarray(i * pageSize, (i + 1) * pageSize),
    }));
  } else {
    const latest = new Map<number, Uint8Array>();
    for (const c of commits) for (const p of c.pages) latest.set(p.pgno, p.data);
    pages = [...latest].filter(([pgno]) => pgno <= dbSize).sort(([a], [b]) => a - b)
      .map(([pgno, data]) => ({ pgno, data }));
  }
  const maxTxid = firstTxid + BigInt(commits.length) - 1n;
  const bytes = encodeLtx({
    header: {
      pageSize,
      commit: dbSize,
      minTxid: firstTxid,
      maxTxid,
      timestamp: 1_700_000_000_000 + Number(firstTxid),
      preApplyChecksum: snapshot ? 0n : databaseChecksum(before, pageSize),
      walOffset: commits[0].offset,
      walSize: commits[commits.length - 1].endOffset - commits[0].offset,
      walSalt1: salts.salt1,
      walSalt2: salts.salt2,
    },
    pages,
    postApplyChecksum: databaseChecksum(after, pageSize),
  });
  return { name: formatLtxFilename(firstTxid, maxTxid), bytes, after };
}

function rows(path: string, readOnly = false): { check: string; items: unknown; byName: unknown } {
  const db = new DatabaseSync(path, { readOnly });
  try {
    return {
      check: String(db.prepare("PRAGMA integrity_check").get()?.integrity_check),
      items: db.prepare("SELECT id, name, hex(body) AS body FROM items ORDER BY id").all(),
      byName: db.prepare("SELECT id FROM items INDEXED BY items_name ORDER BY name, id").all(),
    };
  } finally {
    db.close();
  }
}

Deno.test("SQLite WAL -> commits -> LTX -> decode -> apply rebuilds the database", () => {
  const dir = Deno.makeTempDirSync();
  try {
    const path = `${dir}/source.db`;
    const db = new DatabaseSync(path);
    db.exec("PRAGMA page_size=1024; PRAGMA journal_mode=WAL; PRAGMA wal_autocheckpoint=0;");
    const base = Deno.readFileSync(path);

    db.exec(`CREATE TABLE items(id INTEGER PRIMARY KEY, name TEXT, body BLOB);
      CREATE INDEX items_name ON items(name);`);
    const insert = db.prepare("INSERT INTO items(name, body) VALUES (?, randomblob(?))");
    db.exec("BEGIN");
    for (let i = 0; i < 200; i++) insert.run(`name-${(i * 37) % 200}`, 50 + (i % 300));
    db.exec("COMMIT");
    for (let i = 0; i < 5; i++) insert.run(`single-${i}`, 10);
    const wal1 = Deno.readFileSync(`${path}-wal`);
    const first = readWalCommits(wal1);
    // CREATE TABLE, CREATE INDEX, the 200-row transaction, five single inserts.
    assert.equal(first.commits.length, 8);

    insert.run("overflow", 20_000);
    db.exec("UPDATE items SET name = name || '!' WHERE id % 5 = 0");
    db.exec("DELETE FROM items WHERE id % 3 = 0");
    db.exec("VACUUM");
    insert.run("after-vacuum", 100);
    const wal2 = Deno.readFileSync(`${path}-wal`);
    const rest = readWalCommits(wal2, first.endOffset);
    assert.equal(rest.commits.length, 5);
    assert.deepEqual(readWalCommits(wal2).commits, [...first.commits, ...rest.commits]);
    // VACUUM shrank the database: the reader reports the smaller size.
    const sizes = rest.commits.map((c) => c.dbSize);
    assert.ok(sizes[3] < sizes[2], `sizes ${sizes}`);

    const pageSize = first.header.pageSize;
    assert.equal(pageSize, 1024);
    const salts = first.header;
    // Snapshot at TXID 1, one file per commit up to TXID 8, then one file for TXIDs 9-13.
    const files: { name: string; bytes: Uint8Array }[] = [];
    let image: Uint8Array = base;
    const runs = [...first.commits.map((c) => [c]), rest.commits];
    let txid = 1n;
    for (const run of runs) {
      const built = ltxFor(run, txid, image, pageSize, salts);
      files.push(built);
      image = built.after;
      txid += BigInt(run.length);
    }
    assert.deepEqual(files.map((f) => f.name).slice(-2), [
      formatLtxFilename(8n, 8n),
      formatLtxFilename(9n, 13n),
    ]);

    const restored = `${dir}/restored.db`;
    const decoded = files.map((f) => decodeLtx(f.bytes));
    decoded.forEach((f, i) => {
      assert.deepEqual(parseLtxFilename(files[i].name), {
        minTxid: f.header.minTxid,
        maxTxid: f.header.maxTxid,
      });
    });
    const position = applyLtxToFile(restored, decoded);
    assert.equal(position?.txid, 13n);
    const restoredBytes = Deno.readFileSync(restored);
    assert.equal(position?.checksum, databaseChecksum(restoredBytes, pageSize));
    assert.deepEqual(restoredBytes, image);

    // Checkpointing the source writes the same pages into its file: byte-identical.
    db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    assert.deepEqual(Deno.readFileSync(path), restoredBytes);
    const expected = rows(path);
    db.close();
    const got = rows(restored, true);
    assert.deepEqual(got, expected);
    assert.equal(got.check, "ok");
    assert.equal((got.items as unknown[]).length, 206 - 68 + 1);
  } finally {
    Deno.removeSync(dir, { recursive: true });
  }
});
