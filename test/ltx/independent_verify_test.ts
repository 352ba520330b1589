// The independent LTX verifier (test/tools/ltx_verify.py, written from the
// superfly/ltx format definition) run on third-party files and on our encoder's.
import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { encodeLtx } from "../../src/ltx/encoder.ts";
import { databaseChecksum, pageChecksum } from "../../src/ltx/checksum.ts";
import {
  runLtxVerify,
  verifyLtxChain,
  verifyLtxChainBytes,
  verifyLtxFiles,
} from "../helpers/ltx_verify.ts";

const FIXTURES = new URL("../fixtures/litestream-v0.5.11/", import.meta.url);
const FIXTURE_LTX = new URL("replica/ltx/0/", FIXTURES);

function fixturePaths(): string[] {
  return [...Deno.readDirSync(FIXTURE_LTX)].map((e) => e.name).filter((n) => n.endsWith(".ltx"))
    .sort().map((n) => new URL(n, FIXTURE_LTX).pathname);
}

// deno-lint-ignore no-explicit-any
function jsonLines(output: string): any[] {
  return output.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l));
}

const hex = (v: bigint) => v.toString(16).padStart(16, "0");
const ltxName = (min: bigint, max: bigint) => `${hex(min)}-${hex(max)}.ltx`;

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

Deno.test("litestream v0.5.11 files pass the verifier one by one and as a chain", async () => {
  const paths = fixturePaths();
  assert.equal(paths.length, 6);
  const files = await verifyLtxFiles(paths);
  assert.ok(files.ok, files.output);
  const lines = jsonLines(files.output);
  assert.equal(lines.length, 6);
  lines.forEach((l, i) => {
    assert.equal(l.file, paths[i]);
    assert.equal(l.min_txid, i + 1);
    assert.equal(l.max_txid, i + 1);
    assert.equal(l.commit, 5);
    assert.equal(l.page_size, 4096);
    assert.equal(l.pages, 5);
    assert.equal(l.flags, 2); // no checksum tracking: both database checksums are zero
    assert.equal(l.pre_apply, "0000000000000000");
    assert.equal(l.post_apply, "0000000000000000");
    assert.equal(l.encoding, "frame"); // legacy LZ4-frame page payloads
  });

  const dir = await Deno.makeTempDir();
  try {
    for (let n = 1; n <= 6; n++) {
      const out = `${dir}/upto${n}.db`;
      const chain = await verifyLtxChain(paths.slice(0, n), out);
      assert.ok(chain.ok, chain.output);
      const [summary] = jsonLines(chain.output);
      assert.equal(summary.max_txid, n);
      assert.equal(summary.checksums_checked, 0);
      // The fixture README: up to TXID n the kv table is as after round n - 1.
      const rows: Record<string, string> = { a: n === 1 ? "1" : `upd${n - 1}`, b: "2", c: "3" };
      for (let i = 1; i < n; i++) rows[`k${i}`] = `v${i}`;
      assert.deepEqual(kv(out), { check: "ok", rows });
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("the verifier rejects damaged fixtures and broken chains", async () => {
  const paths = fixturePaths();
  const dir = await Deno.makeTempDir();
  try {
    const bytes = await Deno.readFile(paths[1]);
    const inHeader = bytes.slice();
    inHeader[39] ^= 0x01; // the timestamp: only the file checksum covers it
    await Deno.writeFile(`${dir}/header.ltx`, inHeader);
    const inFrame = bytes.slice();
    inFrame[150] ^= 0x01; // a literal inside page 1's LZ4 frame
    await Deno.writeFile(`${dir}/frame.ltx`, inFrame);
    const res = await verifyLtxFiles([`${dir}/header.ltx`, `${dir}/frame.ltx`]);
    assert.equal(res.ok, false);
    assert.match(res.output, /header\.ltx: file-checksum: file checksum mismatch/);
    assert.match(res.output, /frame\.ltx: lz4-frame: page frame 0 \(pgno 1\) at offset 100:/);

    const gap = await verifyLtxChain([paths[0], paths[2]]);
    assert.equal(gap.ok, false);
    assert.match(gap.output, /0000000000000003\.ltx: txid-contiguity: min TXID 3 does not follow/);
    const noSnapshot = await verifyLtxChain([paths[1]]);
    assert.equal(noSnapshot.ok, false);
    assert.match(noSnapshot.output, /chain-start: the first file must be a snapshot/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

// --- Files our encoder writes, from a real SQLite database. ---

const PAGE = 1024;

interface Built {
  dir: string;
  images: Uint8Array[]; // the database file after each step
  paths: string[]; // the LTX files: a snapshot, then two incremental files
  specs: { min: bigint; max: bigint; pages: number; pre: bigint; post: bigint; commit: number }[];
}

function changedPages(before: Uint8Array, after: Uint8Array): { pgno: number; data: Uint8Array }[] {
  const pages = [];
  for (let off = 0; off < after.length; off += PAGE) {
    const data = after.subarray(off, off + PAGE);
    const old = before.subarray(off, off + PAGE);
    if (old.length !== PAGE || !data.every((b, i) => b === old[i])) {
      pages.push({ pgno: off / PAGE + 1, data });
    }
  }
  return pages;
}

// Header fields no checksum covers the meaning of: the verifier reads them back.
const WAL_FIELDS = {
  walOffset: 32,
  walSize: 7 * (24 + PAGE),
  walSalt1: 0xdeadbeef,
  walSalt2: 0x01020304,
  nodeId: 0xfedcba9876543210n,
};

async function buildOurs(): Promise<Built> {
  const dir = await Deno.makeTempDir();
  const dbPath = `${dir}/source.db`;
  const images: Uint8Array[] = [];
  const step = (sql: string) => {
    const db = new DatabaseSync(dbPath);
    try {
      db.exec(sql);
    } finally {
      db.close();
    }
    images.push(Deno.readFileSync(dbPath));
  };
  const body = (i: number) => `'${`row ${i} `.repeat(1 + (i * 7) % 23)}'`;
  const values = (from: number, to: number) =>
    Array.from({ length: to - from }, (_, k) => `(${from + k}, ${body(from + k)})`).join(",");
  step(
    `PRAGMA page_size=${PAGE}; PRAGMA journal_mode=DELETE;
     CREATE TABLE items(id INTEGER PRIMARY KEY, body TEXT NOT NULL);
     CREATE INDEX items_body ON items(body);
     INSERT INTO items VALUES ${values(0, 150)};`,
  );
  step(
    `INSERT INTO items VALUES ${values(150, 400)};
     UPDATE items SET body = 'changed ' || id WHERE id % 10 = 3;`,
  );
  step(`DELETE FROM items WHERE id % 3 <> 0; VACUUM;`);

  const specs: Built["specs"] = [];
  const paths: string[] = [];
  const txids: [bigint, bigint][] = [[1n, 1n], [2n, 2n], [3n, 5n]];
  images.forEach((after, i) => {
    const before = i === 0 ? new Uint8Array(0) : images[i - 1];
    const [min, max] = txids[i];
    const pages = changedPages(before, after);
    const pre = i === 0 ? 0n : databaseChecksum(before, PAGE);
    const post = databaseChecksum(after, PAGE);
    const commit = after.length / PAGE;
    const bytes = encodeLtx({
      header: {
        pageSize: PAGE,
        commit,
        minTxid: min,
        maxTxid: max,
        timestamp: 1_700_000_000_000 + i,
        preApplyChecksum: pre,
        ...(i === 1 ? WAL_FIELDS : {}),
      },
      pages,
      postApplyChecksum: post,
    });
    const path = `${dir}/${ltxName(min, max)}`;
    Deno.writeFileSync(path, bytes);
    paths.push(path);
    specs.push({ min, max, pages: pages.length, pre, post, commit });
  });
  return { dir, images, paths, specs };
}

Deno.test("our encoder's snapshot and incremental files pass and rebuild the database", async () => {
  const b = await buildOurs();
  try {
    // The steps really grow, then shrink the database.
    const sizes = b.images.map((img) => img.length / PAGE);
    assert.ok(sizes[1] > sizes[0] && sizes[2] < sizes[1], `sizes ${sizes}`);
    assert.ok(b.specs[1].pages < sizes[1], "the first incremental file is not a full copy");

    const files = await verifyLtxFiles(b.paths);
    assert.ok(files.ok, files.output);
    const lines = jsonLines(files.output);
    assert.equal(lines.length, 3);
    lines.forEach((l, i) => {
      const s = b.specs[i];
      assert.equal(l.file, b.paths[i]);
      assert.equal(BigInt(l.min_txid), s.min);
      assert.equal(BigInt(l.max_txid), s.max);
      assert.equal(l.commit, s.commit);
      assert.equal(l.page_size, PAGE);
      assert.equal(l.pages, s.pages);
      assert.equal(l.flags, 0);
      assert.equal(l.timestamp, 1_700_000_000_000 + i);
      const wal = i === 1
        ? WAL_FIELDS
        : { walOffset: 0, walSize: 0, walSalt1: 0, walSalt2: 0, nodeId: 0n };
      assert.deepEqual(
        [l.wal_offset, l.wal_size, l.wal_salt1, l.wal_salt2, l.node_id],
        [wal.walOffset, wal.walSize, wal.walSalt1, wal.walSalt2, hex(wal.nodeId)],
      );
      assert.equal(l.pre_apply, hex(s.pre));
      assert.equal(l.post_apply, hex(s.post));
      assert.equal(l.encoding, "block"); // size-prefixed LZ4 blocks, as the current format writes
    });

    for (let n = 1; n <= 3; n++) {
      const out = `${b.dir}/restored${n}.db`;
      const chain = await verifyLtxChain(b.paths.slice(0, n), out);
      assert.ok(chain.ok, chain.output);
      const [summary] = jsonLines(chain.output);
      assert.equal(summary.checksums_checked, n);
      assert.equal(summary.checksum, hex(databaseChecksum(b.images[n - 1], PAGE)));
      assert.deepEqual(Deno.readFileSync(out), b.images[n - 1]);
    }

    const inMemory = await verifyLtxChainBytes(b.paths.map((p) => Deno.readFileSync(p)));
    assert.ok(inMemory.ok, inMemory.output);
    assert.deepEqual(inMemory.image, b.images[2]);
  } finally {
    await Deno.remove(b.dir, { recursive: true });
  }
});

Deno.test("our page and database checksums agree with the verifier's", async () => {
  const b = await buildOurs();
  try {
    const image = b.images[1];
    const dbPath = `${b.dir}/step2.db`;
    Deno.writeFileSync(dbPath, image);
    const res = await runLtxVerify(["dbchecksum", "--page-size", String(PAGE), "--pages", dbPath]);
    assert.ok(res.ok, res.output);
    const [out] = jsonLines(res.output);
    assert.equal(out.checksum, hex(databaseChecksum(image, PAGE)));
    assert.equal(out.page_checksums.length, image.length / PAGE);
    out.page_checksums.forEach((sum: string, i: number) => {
      assert.equal(sum, hex(pageChecksum(i + 1, image.subarray(i * PAGE, (i + 1) * PAGE))));
    });
    const empty = `${b.dir}/empty.db`;
    Deno.writeFileSync(empty, new Uint8Array(0));
    const none = await runLtxVerify(["dbchecksum", "--page-size", String(PAGE), empty]);
    assert.equal(
      jsonLines(none.output)[0].checksum,
      hex(databaseChecksum(new Uint8Array(0), PAGE)),
    );
  } finally {
    await Deno.remove(b.dir, { recursive: true });
  }
});

// Offsets of every byte of an LTX file that is not LZ4 payload: the header,
// each page header and size prefix, the end marker, the page index and the
// trailer. All of them are covered by the file checksum.
function structuralOffsets(bytes: Uint8Array): number[] {
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const offsets: number[] = [];
  const take = (from: number, n: number) => {
    for (let i = 0; i < n; i++) offsets.push(from + i);
  };
  take(0, 100);
  let pos = 100;
  while (v.getUint32(pos) !== 0) {
    assert.equal(v.getUint16(pos + 4), 1, "size-prefixed frame");
    take(pos, 10);
    pos += 10 + v.getUint32(pos + 6);
  }
  take(pos, bytes.length - pos);
  return offsets;
}

Deno.test("a flipped byte in our files is rejected", async () => {
  const b = await buildOurs();
  try {
    // A small file (three of step 2's pages) keeps the byte-by-byte sweep quick.
    const [before, after] = b.images;
    const bytes = encodeLtx({
      header: {
        pageSize: PAGE,
        commit: after.length / PAGE,
        minTxid: 2n,
        maxTxid: 2n,
        timestamp: 1_700_000_000_001,
        preApplyChecksum: databaseChecksum(before, PAGE),
      },
      pages: changedPages(before, after).slice(0, 3),
      postApplyChecksum: databaseChecksum(after, PAGE),
    });
    const good = `${b.dir}/good.ltx`;
    Deno.writeFileSync(good, bytes);
    const ok = await verifyLtxFiles([good]);
    assert.ok(ok.ok, ok.output);

    const offsets = structuralOffsets(bytes);
    // And the first bytes of each LZ4 payload: a token, then literals or a
    // literal-length byte, so changing them changes the page or breaks it.
    // (Not every payload byte: two LZ4 encodings of the same page are both
    // valid, and the file checksum covers the decompressed page by design.)
    const v = new DataView(bytes.buffer);
    for (let pos = 100; v.getUint32(pos) !== 0; pos += 10 + v.getUint32(pos + 6)) {
      offsets.push(pos + 10, pos + 11, pos + 12);
    }
    const bad: string[] = [];
    for (const off of offsets) {
      const copy = bytes.slice();
      copy[off] ^= 0x10;
      const path = `${b.dir}/flip-${off}.ltx`;
      Deno.writeFileSync(path, copy);
      bad.push(path);
    }
    const res = await verifyLtxFiles(bad);
    assert.equal(res.ok, false);
    assert.deepEqual(jsonLines(res.output), [], "no damaged file is accepted");
    const errors = res.output.split("\n").filter((l) => l.startsWith("ltx_verify: "));
    assert.equal(errors.length, bad.length);

    // One flipped byte exits 1 on its own, too.
    const one = await runLtxVerify(["file", bad[39]]);
    assert.equal(one.ok, false);
    assert.match(one.output, /flip-39\.ltx: file-checksum: file checksum mismatch/);
  } finally {
    await Deno.remove(b.dir, { recursive: true });
  }
});

Deno.test("a chain with a wrong pre- or post-apply checksum is rejected", async () => {
  const b = await buildOurs();
  try {
    const [before, after] = b.images;
    const pages = changedPages(before, after);
    const write = (name: string, pre: bigint, post: bigint) => {
      const path = `${b.dir}/${name}/${ltxName(2n, 2n)}`;
      Deno.mkdirSync(`${b.dir}/${name}`);
      Deno.writeFileSync(
        path,
        encodeLtx({
          header: {
            pageSize: PAGE,
            commit: after.length / PAGE,
            minTxid: 2n,
            maxTxid: 2n,
            timestamp: 1_700_000_000_001,
            preApplyChecksum: pre,
          },
          pages,
          postApplyChecksum: post,
        }),
      );
      return path;
    };
    const pre = databaseChecksum(before, PAGE);
    const post = databaseChecksum(after, PAGE);
    const wrongPre = write("pre", pre ^ 1n, post);
    const wrongPost = write("post", pre, post ^ 1n);

    // Each file is well-formed on its own.
    const alone = await verifyLtxFiles([wrongPre, wrongPost]);
    assert.ok(alone.ok, alone.output);

    const a = await verifyLtxChain([b.paths[0], wrongPre, b.paths[2]]);
    assert.equal(a.ok, false);
    assert.match(
      a.output,
      new RegExp(`pre/${ltxName(2n, 2n).replace(".", "\\.")}: pre-apply: pre-apply checksum`),
    );
    const c = await verifyLtxChain([b.paths[0], wrongPost]);
    assert.equal(c.ok, false);
    assert.match(c.output, /post\/0000000000000002-0000000000000002\.ltx: post-apply:/);
    // The right file in the wrong place: file 3 after the snapshot.
    const gap = await verifyLtxChain([b.paths[0], b.paths[2]]);
    assert.equal(gap.ok, false);
    assert.match(
      gap.output,
      /txid-contiguity: min TXID 3 does not follow the previous file's max TXID 1/,
    );
  } finally {
    await Deno.remove(b.dir, { recursive: true });
  }
});
