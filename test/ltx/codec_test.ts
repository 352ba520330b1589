import assert from "node:assert/strict";
import { Crc64 } from "../../src/ltx/crc64.ts";
import {
  applyLtx,
  CHECKSUM_FLAG,
  databaseChecksum,
  decodeHeader,
  decodeLtx,
  encodeLtx,
  HEADER_FLAG_NO_CHECKSUM,
  lockPgno,
  LtxEncoder,
  LtxError,
  type LtxPage,
  PAGE_FLAG_SIZE,
  pageChecksum,
} from "../../src/ltx/mod.ts";

const PAGE = 512;

function page(pgno: number, fill: number): LtxPage {
  const data = new Uint8Array(PAGE);
  for (let i = 0; i < PAGE; i += 16) data[i] = (fill + i) & 0xff;
  data[0] = pgno;
  return { pgno, data };
}

function image(pages: LtxPage[]): Uint8Array {
  const out = new Uint8Array(pages.length * PAGE);
  for (const p of pages) out.set(p.data, (p.pgno - 1) * PAGE);
  return out;
}

const base = [page(1, 1), page(2, 2), page(3, 3)];
const snapshotBytes = () =>
  encodeLtx({
    header: { pageSize: PAGE, commit: 3, minTxid: 1n, maxTxid: 1n, timestamp: 1_700_000_000_000 },
    pages: base,
    postApplyChecksum: databaseChecksum(image(base), PAGE),
  });

Deno.test("encode then decode gives back header, pages and checksums", () => {
  const bytes = encodeLtx({
    header: {
      pageSize: PAGE,
      commit: 4,
      minTxid: 2n,
      maxTxid: 5n,
      timestamp: 1_700_000_000_123,
      preApplyChecksum: databaseChecksum(image(base), PAGE),
      walOffset: 32,
      walSize: 4 * (24 + PAGE),
      walSalt1: 0xdeadbeef,
      walSalt2: 7,
      nodeId: 0xfedcba9876543210n,
    },
    pages: [page(2, 20), page(4, 40)],
    postApplyChecksum: CHECKSUM_FLAG | 1234n,
  });
  const file = decodeLtx(bytes);
  assert.deepEqual(file.header, {
    flags: 0,
    pageSize: PAGE,
    commit: 4,
    minTxid: 2n,
    maxTxid: 5n,
    timestamp: 1_700_000_000_123,
    preApplyChecksum: databaseChecksum(image(base), PAGE),
    walOffset: 32,
    walSize: 4 * (24 + PAGE),
    walSalt1: 0xdeadbeef,
    walSalt2: 7,
    nodeId: 0xfedcba9876543210n,
  });
  assert.deepEqual(file.pages, [page(2, 20), page(4, 40)]);
  assert.equal(file.postApplyChecksum, CHECKSUM_FLAG | 1234n);
  assert.equal(file.fileChecksum & CHECKSUM_FLAG, CHECKSUM_FLAG);
});

Deno.test("the byte layout is superfly/ltx's", () => {
  const bytes = snapshotBytes();
  const v = new DataView(bytes.buffer);
  assert.equal(new TextDecoder().decode(bytes.subarray(0, 4)), "LTX1");
  assert.equal(v.getUint32(8), PAGE);
  assert.equal(v.getUint32(12), 3);
  assert.equal(v.getBigUint64(16), 1n);
  assert.deepEqual(bytes.subarray(80, 100), new Uint8Array(20));
  // First page frame: pgno 1, flag "size follows", u32 size, then that many LZ4 bytes.
  assert.equal(v.getUint32(100), 1);
  assert.equal(v.getUint16(104), PAGE_FLAG_SIZE);
  const size = v.getUint32(106);
  assert.equal(v.getUint32(110 + size), 2);
  // The index ends with a 0 pgno, then its own length as a u64, then the 16-byte trailer.
  const indexSize = Number(v.getBigUint64(bytes.length - 24));
  assert.equal(bytes[bytes.length - 24 - 1], 0);
  const indexStart = bytes.length - 24 - indexSize;
  assert.deepEqual([...bytes.subarray(indexStart - 6, indexStart)], [0, 0, 0, 0, 0, 0]);
  assert.deepEqual([...bytes.subarray(indexStart, indexStart + 3)], [1, 100, 10 + size]);
  assert.equal(v.getBigUint64(bytes.length - 16), databaseChecksum(image(base), PAGE));
});

Deno.test("snapshots verify their post-apply checksum against their pages", () => {
  const bytes = snapshotBytes();
  assert.equal(decodeLtx(bytes).pages.length, 3);
  // Replace the post-apply checksum and fix up the file checksum: still caught.
  const v = new DataView(bytes.buffer);
  v.setBigUint64(bytes.length - 16, CHECKSUM_FLAG | 99n);
  const reencoded = encodeLtx({
    header: decodeHeader(bytes),
    pages: base,
    postApplyChecksum: CHECKSUM_FLAG | 99n,
  });
  assert.throws(() => decodeLtx(reencoded), /post-apply checksum mismatch/);
});

Deno.test("every damaged byte is caught, with a message naming the problem", () => {
  const bytes = snapshotBytes();
  assert.deepEqual(decodeLtx(bytes).pages, base);
  const messages = new Set<string>();
  for (let i = 0; i < bytes.length; i++) {
    const damaged = bytes.slice();
    damaged[i] ^= 0x10;
    let error: unknown;
    try {
      const file = decodeLtx(damaged);
      // A flip inside LZ4 data that decodes to the same page changes nothing stored.
      assert.deepEqual(file.pages, base, `byte ${i} changed the pages undetected`);
      assert.ok(i >= 100, `header byte ${i} changed undetected`);
      continue;
    } catch (e) {
      error = e;
    }
    assert.ok(error instanceof LtxError, `byte ${i}: ${error}`);
    messages.add(error.message.replace(/[0-9a-f]{16}/g, "#").replace(/\d+/g, "N"));
  }
  assert.ok(messages.has("file checksum mismatch: trailer #, computed #"));
  assert.ok(messages.size >= 5, [...messages].join("\n"));
});

Deno.test("truncated files are refused", () => {
  const bytes = snapshotBytes();
  for (const n of [0, 50, 99, 100, 120, bytes.length - 17, bytes.length - 1]) {
    assert.throws(() => decodeLtx(bytes.subarray(0, n)), LtxError, `length ${n}`);
  }
});

Deno.test("the encoder refuses what superfly/ltx's refuses", () => {
  const header = { pageSize: PAGE, commit: 3, minTxid: 2n, maxTxid: 2n, timestamp: 0 };
  const pre = databaseChecksum(image(base), PAGE);
  const post = CHECKSUM_FLAG;
  const cases: [Parameters<typeof encodeLtx>[0], RegExp][] = [
    [{ header: { ...header, pageSize: 1000 }, pages: [], postApplyChecksum: post }, /page size/],
    [{ header: { ...header, minTxid: 3n }, pages: [], postApplyChecksum: post }, /out of order/],
    [{ header, pages: [], postApplyChecksum: post }, /pre-apply checksum required/],
    [
      { header: { ...header, preApplyChecksum: pre }, pages: [], postApplyChecksum: 5n },
      /post-apply checksum required/,
    ],
    [
      { header: { ...header, flags: HEADER_FLAG_NO_CHECKSUM }, pages: [], postApplyChecksum: post },
      /post-apply checksum not allowed/,
    ],
    [
      {
        header: { ...header, preApplyChecksum: pre },
        pages: [page(4, 0)],
        postApplyChecksum: post,
      },
      /out-of-bounds/,
    ],
    [
      {
        header: { ...header, preApplyChecksum: pre },
        pages: [page(2, 0), page(1, 0)],
        postApplyChecksum: post,
      },
      /out-of-order/,
    ],
    [
      {
        header: { ...header, minTxid: 1n },
        pages: [page(1, 0), page(3, 0)],
        postApplyChecksum: post,
      },
      /snapshot page 3 follows page 1/,
    ],
    [
      { header: { ...header, minTxid: 1n }, pages: [page(1, 0)], postApplyChecksum: post },
      /snapshot ends at page 1/,
    ],
    [
      { header: { ...header, walSalt1: 1 }, pages: [], postApplyChecksum: post },
      /wal offset required/,
    ],
  ];
  for (const [input, pattern] of cases) assert.throws(() => encodeLtx(input), pattern);
  const lock = lockPgno(PAGE);
  assert.throws(
    () =>
      encodeLtx({
        header: { ...header, commit: lock + 1, preApplyChecksum: pre },
        pages: [{ pgno: lock, data: new Uint8Array(PAGE) }],
        postApplyChecksum: post,
      }),
    /lock page/,
  );
});

Deno.test("applying carries the checksum and checks it against each file", () => {
  const snapshot = decodeLtx(snapshotBytes());
  const before = databaseChecksum(image(base), PAGE);
  const after = [page(1, 1), page(2, 22), page(3, 3), page(4, 44)];
  const next = decodeLtx(encodeLtx({
    header: {
      pageSize: PAGE,
      commit: 4,
      minTxid: 2n,
      maxTxid: 2n,
      timestamp: 0,
      preApplyChecksum: before,
    },
    pages: [page(2, 22), page(4, 44)],
    postApplyChecksum: databaseChecksum(image(after), PAGE),
  }));
  const { db, position } = applyLtx(new Uint8Array(0), [snapshot, next]);
  assert.deepEqual(db, image(after));
  assert.deepEqual(position, { txid: 2n, checksum: databaseChecksum(image(after), PAGE) });

  // Shrinking takes the cut pages out of the checksum.
  const shrunk = decodeLtx(encodeLtx({
    header: {
      pageSize: PAGE,
      commit: 2,
      minTxid: 3n,
      maxTxid: 3n,
      timestamp: 0,
      preApplyChecksum: position!.checksum!,
    },
    pages: [],
    postApplyChecksum: databaseChecksum(image(after.slice(0, 2)), PAGE),
  }));
  assert.deepEqual(applyLtx(db, [shrunk], position).db, image(after.slice(0, 2)));

  // A database that is not what the file was made from is refused.
  const other = image(base).slice();
  other[700] ^= 1;
  assert.throws(() => applyLtx(other, [next], { txid: 1n }), /pre-apply checksum/);
  // A wrong trailer checksum is caught after applying.
  const lying = decodeLtx(encodeLtx({
    header: { ...next.header },
    pages: next.pages,
    postApplyChecksum: CHECKSUM_FLAG | 1n,
  }));
  assert.throws(() => applyLtx(db.slice(0, 3 * PAGE), [lying], { txid: 1n }), /pre-apply/);
  assert.throws(() => applyLtx(image(base), [lying], { txid: 1n }), /post-apply checksum/);
});

Deno.test("the decoder's page checksums are each page's, from the pass that checks the file", () => {
  for (const size of [512, 4096, 65536]) {
    const pages = [1, 2, 3].map((pgno) => {
      const data = new Uint8Array(size);
      crypto.getRandomValues(data.subarray(0, Math.min(size, 65536)));
      return { pgno, data };
    });
    const img = new Uint8Array(3 * size);
    pages.forEach((p) => img.set(p.data, (p.pgno - 1) * size));
    const bytes = encodeLtx({
      header: { pageSize: size, commit: 3, minTxid: 1n, maxTxid: 4n, timestamp: 0 },
      pages,
      postApplyChecksum: databaseChecksum(img, size),
    });
    const file = decodeLtx(bytes);
    assert.deepEqual(file.pageChecksums, pages.map((p) => pageChecksum(p.pgno, p.data)));
    // (The file checksum, over the same pass, was verified by decodeLtx:
    // "every damaged byte is caught" shows a wrong one is refused.)
    // Applying with them or computing them again reaches the same state.
    const withSums = applyLtx(new Uint8Array(0), [file]);
    const without = applyLtx(new Uint8Array(0), [{ ...file, pageChecksums: undefined }]);
    assert.deepEqual(withSums, without);
    assert.deepEqual(withSums.position?.checksum, databaseChecksum(img, size));
  }
  // A file without checksums has none to give.
  const untracked = decodeLtx(encodeLtx({
    header: {
      pageSize: PAGE,
      commit: 1,
      minTxid: 1n,
      maxTxid: 1n,
      timestamp: 0,
      flags: HEADER_FLAG_NO_CHECKSUM,
    },
    pages: [page(1, 1)],
    postApplyChecksum: 0n,
  }));
  assert.equal(untracked.pageChecksums, undefined);
});

Deno.test("LtxEncoder page by page writes what encodeLtx writes; finishView is finish's bytes", () => {
  const pages = [1, 2, 3, 4].map((pgno) => page(pgno, pgno * 7));
  const header = { pageSize: PAGE, commit: 4, minTxid: 1n, maxTxid: 2n, timestamp: 5 };
  const post = databaseChecksum(image(pages), PAGE);
  const whole = encodeLtx({ header, pages, postApplyChecksum: post });
  for (const sized of [undefined, 1, 4, 100]) {
    const encoder = new LtxEncoder(header, post, sized);
    for (const p of pages) encoder.add(p);
    assert.deepEqual(encoder.finish(), whole);
    const viewed = new LtxEncoder(header, post, sized);
    for (const p of pages) viewed.add(p);
    assert.deepEqual(viewed.finishView().slice(), whole);
    assert.throws(() => viewed.add(page(5, 0)), /after the file was finished/);
    assert.throws(() => viewed.finish(), /already finished/);
  }
  const missing = new LtxEncoder(header, post);
  missing.add(pages[0]);
  assert.throws(() => missing.add(pages[2]), /snapshot page 3 follows page 1/);
  const short = new LtxEncoder(header, post);
  short.add(pages[0]);
  assert.throws(() => short.finish(), /snapshot ends at page 1/);
});

Deno.test("page checksums include the page number", () => {
  const data = new Uint8Array(PAGE);
  assert.notEqual(pageChecksum(1, data), pageChecksum(2, data));
  assert.equal(databaseChecksum(new Uint8Array(0), PAGE), CHECKSUM_FLAG);
  assert.throws(() => databaseChecksum(new Uint8Array(PAGE + 1), PAGE), /not a multiple/);
});

// Recomputes the file checksum the way the encoder does (headers and sizes,
// uncompressed pages, then everything up to the trailer's last 8 bytes), so a
// test can reach the checks that come after it.
function resign(bytes: Uint8Array, pages: LtxPage[]): void {
  const v = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const hash = new Crc64().update(bytes.subarray(0, 100));
  let pos = 100;
  for (const p of pages) {
    hash.update(bytes.subarray(pos, pos + 10)).update(p.data);
    pos += 10 + v.getUint32(pos + 6);
  }
  hash.update(bytes.subarray(pos, bytes.length - 8));
  v.setBigUint64(bytes.length - 8, CHECKSUM_FLAG | hash.digest());
}

Deno.test("a page index that disagrees with the frames is refused despite a valid checksum", () => {
  const bytes = snapshotBytes();
  const v = new DataView(bytes.buffer);
  const indexStart = bytes.length - 24 - Number(v.getBigUint64(bytes.length - 24));
  // The entry for page 1 is [1, 100, size]: claim one byte more.
  assert.deepEqual([...bytes.subarray(indexStart, indexStart + 2)], [1, 100]);
  assert.ok(bytes[indexStart + 2] < 127);
  bytes[indexStart + 2] += 1;
  resign(bytes, base);
  assert.throws(() => decodeLtx(bytes), /page index entry for page 1 .* does not match its frame/);
});

Deno.test("bytes between the index and the trailer are refused despite a valid checksum", () => {
  const bytes = snapshotBytes();
  const padded = new Uint8Array(bytes.length + 3);
  padded.set(bytes.subarray(0, bytes.length - 16));
  padded.set(bytes.subarray(bytes.length - 16), bytes.length - 13);
  resign(padded, base);
  assert.throws(() => decodeLtx(padded), /3 unexpected bytes before the trailer/);
});

Deno.test("growing without writing every new page counts the gap as zero pages", () => {
  const snapshot = decodeLtx(snapshotBytes());
  const grown = [...base, { pgno: 4, data: new Uint8Array(PAGE) }, page(5, 5)];
  const file = decodeLtx(encodeLtx({
    header: {
      pageSize: PAGE,
      commit: 5,
      minTxid: 2n,
      maxTxid: 2n,
      timestamp: 0,
      preApplyChecksum: snapshot.postApplyChecksum,
    },
    pages: [page(5, 5)],
    postApplyChecksum: databaseChecksum(image(grown), PAGE),
  }));
  assert.deepEqual(applyLtx(new Uint8Array(0), [snapshot, file]).db, image(grown));
});

Deno.test("the decoder applies the encoder's page rules despite a valid checksum", () => {
  const bytes = snapshotBytes();
  const v = new DataView(bytes.buffer);
  const second = 100 + 10 + v.getUint32(106);
  assert.equal(v.getUint32(second), 2);
  v.setUint32(second, 3);
  resign(bytes, base);
  assert.throws(
    () => decodeLtx(bytes),
    /page 3 at offset \d+: snapshot page 3 follows page 1, expected 2/,
  );
  v.setUint32(second, 9);
  resign(bytes, base);
  assert.throws(() => decodeLtx(bytes), /page number 9 out-of-bounds for commit size 3/);
});
