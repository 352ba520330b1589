import assert from "node:assert/strict";
import { assertNodeId, isNodeId } from "../../src/node_id.ts";

Deno.test("isNodeId: lower-case letters, digits and '-', at most 63, not first or last", () => {
  for (const id of ["a", "0", "node-a", "a".repeat(63), "a-b-1"]) {
    assert.equal(isNodeId(id), true, id);
  }
  for (const id of ["", "-a", "a-", "A", "node_a", "a.b", "a/b", "a".repeat(64), " a"]) {
    assert.equal(isNodeId(id), false, id);
  }
  assert.equal(isNodeId(7), false);
  assert.equal(isNodeId(undefined), false);
});

Deno.test("assertNodeId: a RangeError naming what was given and the rule", () => {
  assertNodeId("node-b", "the node to fence");
  assert.throws(() => assertNodeId("Bad_Id", "the node to fence"), {
    name: "RangeError",
    message:
      "the node to fence: 'Bad_Id' is not a node id (lower-case letters, digits and '-', at most 63, not first or last)",
  });
  assert.throws(() => assertNodeId(undefined, "the node id of a certificate"), {
    name: "RangeError",
    message: /^the node id of a certificate: undefined is not a node id/,
  });
});
