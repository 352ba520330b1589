import assert from "node:assert/strict";
import { pageChecksum } from "../../src/ltx/checksum.ts";
import { Crc64, crc64 } from "../../src/ltx/crc64.ts";
import { LtxError } from "../../src/ltx/errors.ts";
import { formatLtxFilename, formatTxid, parseLtxFilename } from "../../src/ltx/filename.ts";
import { compressBlock, decompressBlock } from "../../src/ltx/lz4_block.ts";
import { decodeLz4Frame } from "../../src/ltx/lz4_frame.ts";
import { appendUvarint, readUvarint } from "../../src/ltx/varint.ts";
import { xxhash32 } from "../../src/ltx/xxhash32.ts";

const text = (s: string) => new TextEncoder().encode(s);

// A deterministic mix of runs, repeats and noise, like database pages.
function samplePage(size: number, seed: number): Uint8Array {
  const out = new Uint8Array(size);
  let x = seed;
  for (let i = 0; i < size; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    const mode = (i >> 9) % 3;
    out[i] = mode === 0 ? 0 : mode === 1 ? (i % 7) * 3 : x >>> 24;
  }
  return out;
}

function randomBytes(size: number): Uint8Array {
  const out = new Uint8Array(size);
  for (let i = 0; i < size; i += 65536) crypto.getRandomValues(out.subarray(i, i + 65536));
  return out;
}

Deno.test("crc64 matches CRC-64/GO-ISO check values", () => {
  assert.equal(crc64(text("123456789")), 0xb90956c775a41001n);
  assert.equal(crc64(new Uint8Array(0)), 0n);
  assert.notEqual(crc64(text("123456780")), crc64(text("123456789")));
});

// Bit at a time over BigInt, straight from the definition: nothing shared
// with the table-driven code under test.
function crc64Bitwise(bytes: Uint8Array): bigint {
  const mask = (1n << 64n) - 1n;
  let crc = mask;
  for (const b of bytes) {
    crc ^= BigInt(b);
    for (let bit = 0; bit < 8; bit++) {
      crc = crc & 1n ? (crc >> 1n) ^ 0xd800000000000000n : crc >> 1n;
    }
  }
  return crc ^ mask;
}

Deno.test("crc64 equals the bitwise definition at every length, offset and split", () => {
  const bytes = randomBytes(300);
  for (let length = 0; length <= 140; length++) {
    for (const offset of [0, 1, 2, 3, 5, 8]) {
      const slice = bytes.subarray(offset, offset + length);
      const expected = crc64Bitwise(slice);
      assert.equal(crc64(slice), expected, `length ${length} at offset ${offset}`);
      const split = length >> 1;
      assert.equal(
        new Crc64().update(slice.subarray(0, split)).update(slice.subarray(split)).digest(),
        expected,
      );
    }
  }
  const page = randomBytes(4096);
  assert.equal(crc64(page), crc64Bitwise(page));
  // An odd offset into a larger buffer: the unaligned head, then words.
  const unaligned = randomBytes(5000).subarray(7, 4103);
  assert.equal(crc64(unaligned), crc64Bitwise(unaligned));
});

Deno.test("updatePrefixed feeds the bytes and returns the CRC of the prefix and the bytes", () => {
  const bytes = randomBytes(70_000);
  for (const length of [0, 1, 100, 255, 256, 257, 512, 4095, 4096, 65536]) {
    for (const offset of [0, 3]) {
      const data = bytes.subarray(offset, offset + length);
      const lead = bytes.subarray(66_000, 66_000 + 37);
      const hash = new Crc64().update(lead);
      const prefix = (0x80000000 + length * 7919 + offset) >>> 0;
      const prefixed = new Uint8Array(4 + length);
      new DataView(prefixed.buffer).setUint32(0, prefix);
      prefixed.set(data, 4);
      assert.equal(hash.updatePrefixed(prefix, data), crc64Bitwise(prefixed), `length ${length}`);
      const fed = new Uint8Array(lead.length + length);
      fed.set(lead);
      fed.set(data, lead.length);
      assert.equal(hash.digest(), crc64Bitwise(fed), `length ${length}, the running hash`);
    }
  }
});

Deno.test("pageChecksum is the CRC-64 of the big-endian page number and the page", () => {
  const page = randomBytes(4096);
  for (const pgno of [1, 2, 255, 256, 65_537, 0xfffffffe]) {
    const prefixed = new Uint8Array(4 + page.length);
    new DataView(prefixed.buffer).setUint32(0, pgno);
    prefixed.set(page, 4);
    assert.equal(pageChecksum(pgno, page), (1n << 63n) | crc64Bitwise(prefixed));
  }
});

Deno.test("xxhash32 matches the reference vectors", () => {
  assert.equal(xxhash32(new Uint8Array(0)), 0x02cc5d05);
  assert.equal(xxhash32(text("a")), 0x550d7456);
  assert.equal(xxhash32(text("Nobody inspects the spammish repetition")), 0xe2293b2f);
});

Deno.test("varints round trip and are LEB128", () => {
  const out: number[] = [];
  for (const v of [0, 1, 127, 128, 300, 2 ** 32 + 5, Number.MAX_SAFE_INTEGER]) {
    appendUvarint(out, v);
  }
  assert.deepEqual(out.slice(0, 7), [0, 1, 127, 0x80, 1, 0xac, 2]);
  const bytes = new Uint8Array(out);
  const back: number[] = [];
  for (let pos = 0; pos < bytes.length;) {
    const { value, next } = readUvarint(bytes, pos);
    back.push(value);
    pos = next;
  }
  assert.deepEqual(back, [0, 1, 127, 128, 300, 2 ** 32 + 5, Number.MAX_SAFE_INTEGER]);
  assert.throws(() => readUvarint(new Uint8Array([0x80, 0x80]), 0), /past the end/);
});

Deno.test("file names format and parse", () => {
  assert.equal(formatLtxFilename(1n, 0xabcn), "0000000000000001-0000000000000abc.ltx");
  assert.deepEqual(parseLtxFilename("00000000000000ff-ffffffffffffffff.ltx"), {
    minTxid: 255n,
    maxTxid: 0xffffffffffffffffn,
  });
  for (const bad of ["1-2.ltx", "0000000000000001-0000000000000002.LTX", "x.ltx"]) {
    assert.throws(() => parseLtxFilename(bad), LtxError);
  }
  assert.throws(() => parseLtxFilename("00000000000000FF-0000000000000100.ltx"), LtxError);
  assert.throws(() => formatTxid(1n << 64n), /out of range/);
});

Deno.test("lz4 blocks round trip: zeros, mixed pages, random data, tiny inputs", () => {
  const inputs = [
    new Uint8Array(4096),
    samplePage(4096, 1),
    samplePage(65536, 2),
    randomBytes(4096),
    new Uint8Array(0),
    text("abc"),
    text("abcdabcdabcdabcd"),
  ];
  for (const input of inputs) {
    const packed = compressBlock(input);
    assert.deepEqual(decompressBlock(packed, input.length), input);
  }
  assert.ok(compressBlock(new Uint8Array(4096)).length < 40);
  assert.ok(compressBlock(samplePage(4096, 1)).length < 2000);
});

// Random data with short repeats, long repeats at several periods (matches
// overlapping themselves), runs, and a match right after noise (found only
// once the search steps more than one byte, then extended backwards).
function mixedInput(size: number, seed: number): Uint8Array {
  const out = randomBytes(size);
  let x = seed;
  const next = () => (x = (Math.imul(x, 1103515245) + 12345) >>> 0) >>> 8;
  for (let p = 0; p < size;) {
    const len = 1 + next() % 300;
    const kind = next() % 5;
    if (kind === 0) out.fill(next() & 0xff, p, p + len);
    else if (kind === 1 && p > 0) {
      const period = 1 + next() % Math.min(p, 70);
      for (let k = 0; k < len && p + k < size; k++) out[p + k] = out[p + k - period];
    } else if (kind === 2 && p > 2000) {
      const from = next() % (p - len);
      out.copyWithin(p, from, from + Math.min(len, size - p));
    }
    p += len;
  }
  return out;
}

Deno.test("lz4 blocks round trip mixed inputs, the same whatever was compressed before", () => {
  const inputs = Array.from({ length: 40 }, (_, k) => mixedInput(k % 3 ? 4096 : 20_000, k + 1));
  const first = inputs.map((input) => compressBlock(input));
  for (let k = 0; k < inputs.length; k++) {
    assert.deepEqual(decompressBlock(first[k], inputs[k].length), inputs[k], `input ${k}`);
  }
  // The hash table is shared between calls: entries of earlier inputs must
  // never be taken as matches (the output would differ, or be wrong).
  for (let k = inputs.length - 1; k >= 0; k--) {
    assert.deepEqual(compressBlock(inputs[k]), first[k], `input ${k} again`);
  }
  // A subarray at an odd offset of a larger buffer.
  const big = mixedInput(9000, 99);
  const part = big.subarray(13, 13 + 4096);
  assert.deepEqual(decompressBlock(compressBlock(part), 4096), part);
  // Incompressible data costs at most the bound, and still round trips.
  const noise = randomBytes(4096);
  const packed = compressBlock(noise);
  assert.ok(packed.length <= 4096 + 4096 / 255 + 16);
  assert.deepEqual(decompressBlock(packed, 4096), noise);
});

Deno.test("lz4 block decoding rejects malformed input", () => {
  const packed = compressBlock(samplePage(4096, 3));
  assert.throws(() => decompressBlock(packed, 4095), /larger than expected/);
  assert.throws(() => decompressBlock(packed, 4097), /decompressed to 4096 bytes, expected 4097/);
  assert.throws(() => decompressBlock(packed.subarray(0, 100), 4096), LtxError);
  // Token: no literals, match; offset 5 with nothing written yet.
  assert.throws(() => decompressBlock(new Uint8Array([0x00, 5, 0, 0x00]), 8), /outside/);
});

// Builds an LZ4 frame by hand (format spec), with one block per `blocks` entry.
function frame(
  blocks: { bytes: Uint8Array; stored: boolean }[],
  content: Uint8Array,
  flags: { blockChecksum?: boolean; contentSize?: boolean } = {},
): Uint8Array {
  const out: number[] = [0x04, 0x22, 0x4d, 0x18];
  const flg = 0x40 | 0x20 | 0x04 | (flags.blockChecksum ? 0x10 : 0) |
    (flags.contentSize ? 0x08 : 0);
  const desc = [flg, 0x40];
  if (flags.contentSize) {
    const size = new Uint8Array(8);
    new DataView(size.buffer).setBigUint64(0, BigInt(content.length), true);
    desc.push(...size);
  }
  out.push(...desc, (xxhash32(new Uint8Array(desc)) >>> 8) & 0xff);
  const u32 = (n: number) => out.push(n & 0xff, (n >>> 8) & 0xff, (n >>> 16) & 0xff, n >>> 24);
  for (const b of blocks) {
    u32((b.bytes.length | (b.stored ? 0x80000000 : 0)) >>> 0);
    out.push(...b.bytes);
    if (flags.blockChecksum) u32(xxhash32(b.bytes));
  }
  u32(0);
  u32(xxhash32(content));
  return new Uint8Array(out);
}

Deno.test("lz4 frames decode with stored and compressed blocks and all checksums", () => {
  const page = samplePage(4096, 4);
  const half = [page.subarray(0, 2048), page.subarray(2048)];
  const built = frame(
    [{ bytes: compressBlock(half[0]), stored: false }, { bytes: half[1], stored: true }],
    page,
    { blockChecksum: true, contentSize: true },
  );
  const trailing = new Uint8Array(built.length + 10);
  trailing.set(built);
  const { data, length } = decodeLz4Frame(trailing, 4096);
  assert.deepEqual(data, page);
  assert.equal(length, built.length);

  const damaged = built.slice();
  damaged[built.length - 2] ^= 1;
  assert.throws(() => decodeLz4Frame(damaged, 4096), /content checksum mismatch/);
  const badBlock = built.slice();
  badBlock[30] ^= 1;
  assert.throws(() => decodeLz4Frame(badBlock, 4096), /block checksum mismatch/);
  const badHeader = built.slice();
  badHeader[5] = 0x50;
  assert.throws(() => decodeLz4Frame(badHeader, 4096), /header checksum mismatch/);
  assert.throws(() => decodeLz4Frame(built, 4000), /content size 4096, expected 4000/);
  assert.throws(() => decodeLz4Frame(built.subarray(0, 40), 4096), /truncated/);
});

const lz4Cli = (() => {
  try {
    return Deno.statSync("/usr/bin/lz4").isFile;
  } catch {
    return false;
  }
})();

async function lz4(args: string[], input: Uint8Array): Promise<Uint8Array> {
  const child = new Deno.Command("/usr/bin/lz4", {
    args,
    stdin: "piped",
    stdout: "piped",
    stderr: "null",
  })
    .spawn();
  const writer = child.stdin.getWriter();
  await writer.write(input);
  await writer.close();
  const { code, stdout } = await child.output();
  assert.equal(code, 0);
  return stdout;
}

Deno.test({
  name: "lz4 interop with the reference lz4 tool, both directions",
  ignore: !lz4Cli,
  fn: async () => {
    const page = samplePage(65536 * 3, 5);
    // Ours -> lz4: our blocks inside a hand-built frame decode with the real tool.
    const blocks = [0, 1, 2].map((i) => ({
      bytes: compressBlock(page.subarray(i * 65536, (i + 1) * 65536)),
      stored: false,
    }));
    assert.deepEqual(await lz4(["-d", "-c"], frame(blocks, page)), page);
    // lz4 -> ours: independent blocks with block checksums, and linked blocks.
    for (const args of [["-c", "-BX"], ["-c", "-BD", "-B4"], ["-c", "-9", "--content-size"]]) {
      const packed = await lz4(args, page);
      assert.deepEqual(decodeLz4Frame(packed, page.length).data, page);
    }
  },
});
