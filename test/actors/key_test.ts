import assert from "node:assert/strict";
import { actorFileStem, actorNameProblem, classNameProblem } from "../../src/actors/key.ts";

Deno.test("actor names: empty, too long, dots, slashes and control characters are refused", () => {
  assert.equal(actorNameProblem("alice"), undefined);
  assert.equal(actorNameProblem("a.b c%d"), undefined);
  assert.equal(actorNameProblem("é".repeat(128)), undefined);
  assert.match(actorNameProblem("é".repeat(129))!, /longer than 256 bytes/);
  assert.match(actorNameProblem("")!, /empty/);
  assert.match(actorNameProblem(".")!, /'\.' or '\.\.'/);
  assert.match(actorNameProblem("..")!, /'\.' or '\.\.'/);
  assert.match(actorNameProblem("a..b")!, /'\.\.'/);
  assert.match(actorNameProblem("a/b")!, /'\/'/);
  assert.match(actorNameProblem("a\nb")!, /control characters/);
  assert.match(actorNameProblem("a\u007fb")!, /control characters/);
  assert.match(actorNameProblem("a\u0085b")!, /control characters/);
  assert.match(actorNameProblem("\u009f")!, /control characters/);
  assert.equal(actorNameProblem("a\u00a0b"), undefined);
});

Deno.test("class names and file stems", () => {
  assert.equal(classNameProblem("chat_room-2"), undefined);
  assert.ok(classNameProblem("Chat"));
  assert.ok(classNameProblem("2chat"));
  assert.ok(classNameProblem(""));
  assert.equal(actorFileStem("a b/c.d*"), "a%20b%2Fc%2Ed%2A");
  assert.ok(!actorFileStem("..").includes("."));
});
