import assert from "node:assert/strict";
import { describeError } from "../src/describe_error.ts";

Deno.test("describeError: an Error's message, name and message, or stack; anything else as String gives it", () => {
  const error = new RangeError("too far");
  assert.equal(describeError(error), "too far");
  assert.equal(describeError(error, "message"), "too far");
  assert.equal(describeError(error, "named"), "RangeError: too far");
  assert.equal(describeError(error, "stack"), error.stack);
  const stackless = new Error("no stack");
  stackless.stack = undefined;
  assert.equal(describeError(stackless, "stack"), "no stack");
  for (const form of ["message", "named", "stack"] as const) {
    assert.equal(describeError("thrown text", form), "thrown text");
    assert.equal(describeError(42, form), "42");
    assert.equal(describeError(undefined, form), "undefined");
  }
});
