import assert from "node:assert/strict";
import {
  asciiText,
  decodePlain,
  decodePlainAt,
  encodePlain,
  encodePlainAt,
  MAX_ASCII_TEXT,
  MessageTooLarge,
  type Plain,
} from "../../src/actors/codec.ts";

Deno.test("the codec round-trips every kind of value", () => {
  const value: Plain = {
    op: "exec",
    sql: "SELECT ?, 'é✓'",
    params: [
      null,
      true,
      false,
      1.5,
      -0,
      2n ** 63n - 1n,
      -(2n ** 63n),
      new Uint8Array([0, 255]),
      "",
      undefined,
    ],
    nested: { empty: [], obj: {} },
  };
  const buffer = new Uint8Array(1024);
  const length = encodePlain(value, buffer);
  assert.deepEqual(decodePlain(buffer.subarray(0, length)), value);
});

Deno.test("short strings take the ASCII path, and anything else the UTF-8 one, alike", () => {
  const buffer = new Uint8Array(4096);
  for (
    const text of [
      "",
      "host",
      "a".repeat(64),
      "a".repeat(65),
      "é",
      "ascii then é",
      "\u0000\u007f",
      "✓".repeat(30),
    ]
  ) {
    const length = encodePlain({ [text]: text }, buffer);
    assert.deepEqual(decodePlain(buffer.subarray(0, length)), { [text]: text });
  }
});

Deno.test("a message larger than its buffer is refused, not truncated", () => {
  assert.throws(() => encodePlain("x".repeat(100), new Uint8Array(50)), MessageTooLarge);
  assert.throws(() => encodePlain(new Uint8Array(60), new Uint8Array(50)), MessageTooLarge);
  assert.throws(() => decodePlain(new Uint8Array([42])), /unknown tag 42/);
});

Deno.test("recently decoded strings are reused only for the same bytes", () => {
  const bytes = (text: string) => new TextEncoder().encode(text);
  // Many distinct strings, so slots are shared and overwritten.
  const texts = Array.from({ length: 20_000 }, (_, i) => `k${i}`);
  for (let round = 0; round < 2; round++) {
    for (const text of texts) assert.equal(asciiText(bytes(text), 0, text.length), text);
  }
  const long = "s".repeat(MAX_ASCII_TEXT);
  assert.equal(asciiText(bytes(long), 0, long.length), long);
  assert.equal(asciiText(bytes(long + "s"), 0, long.length + 1), undefined);
  assert.equal(asciiText(bytes("é"), 0, 2), undefined);
  assert.equal(asciiText(bytes("xhostx"), 1, 4), "host");
  assert.equal(asciiText(bytes(""), 0, 0), "");
});

Deno.test("values are written and read at an offset of a larger buffer", () => {
  const buffer = new Uint8Array(4096).fill(0xee);
  const values: Plain[] = [
    { type: "event", seq: 7, body: new Uint8Array(64).fill(1) },
    { big: new Uint8Array(65).fill(2), n: -3n, x: 0.5, list: ["a", "é", ""] },
  ];
  let at = 10;
  const spans: [number, number][] = [];
  for (const value of values) {
    const length = encodePlainAt(value, buffer, at, buffer.length - at);
    spans.push([at, at + length]);
    at += length + 3;
  }
  values.forEach((value, i) => assert.deepEqual(decodePlainAt(buffer, ...spans[i]), value));
  assert.throws(() => encodePlainAt("x".repeat(40), buffer, 3000, 20), MessageTooLarge);
  // A truncated message is refused, not read past its end.
  const [start, end] = spans[1];
  assert.throws(() => decodePlainAt(buffer, start, end - 1), RangeError);
  const bytes = decodePlainAt(buffer, ...spans[0]) as { body: Uint8Array };
  buffer.fill(0);
  assert.deepEqual(bytes.body, new Uint8Array(64).fill(1), "byte arrays are copied out");
});

Deno.test("the names of protocol messages and any other names round-trip alike", () => {
  const message: Plain = {
    type: "event",
    seq: 7,
    actor: { tenant: "default", class: "counter", name: "type" },
    request: {
      method: "POST",
      headers: [["content-length", "0"]],
      body: new Uint8Array([1]),
      "not a protocol name": { seq: "x", "é": 1 },
    },
    ["k".repeat(300)]: null,
  };
  const buffer = new Uint8Array(4096);
  const length = encodePlain(message, buffer);
  const decoded = decodePlain(buffer.subarray(0, length)) as Record<string, Plain>;
  assert.deepEqual(decoded, message);
  assert.deepEqual(Object.keys(decoded), Object.keys(message));
});

Deno.test("an unknown name byte is a corrupt message", () => {
  const buffer = new Uint8Array(64);
  const length = encodePlain({ type: "ready" }, buffer);
  // Tag, a 4-byte count, then the name's byte.
  buffer[5] = 200;
  assert.throws(() => decodePlain(buffer.subarray(0, length)), /unknown key 200/);
  assert.throws(() => decodePlain(buffer.subarray(0, 5)), /past the end/);
});
