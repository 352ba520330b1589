import assert from "node:assert/strict";
import { decodePlain, encodePlain, MessageTooLarge, type Plain } from "../../src/actors/codec.ts";

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
