import assert from "node:assert/strict";
import { parseEnvFile } from "../../src/config/env_file.ts";

Deno.test("configuration files: comments, quotes, escapes, export", () => {
  assert.deepEqual(
    parseEnvFile('# c\n\nA=1\nexport B = two words \nC="x\\ny\\"z"\nD=\'raw \\n\'\nE=\n'),
    { A: "1", B: "two words", C: 'x\ny"z', D: "raw \\n", E: "" },
  );
  assert.throws(() => parseEnvFile("A=1\nnot a pair\n"), /line 2: expected NAME=VALUE/);
  assert.throws(() => parseEnvFile("=x\n"), /line 1/);
});

Deno.test("configuration files: a quote not closed, text after a closing quote, or a name given twice is refused, naming the line", () => {
  for (
    const [text, reason] of [
      ['TOKEN="abc\n', /line 1: the " quote is not closed on its line/],
      ["A=1\nTOKEN='abc\n", /line 2: the ' quote is not closed/],
      ['A="\n', /line 1: the " quote is not closed/],
      ['A="abc\\"\n', /line 1: the " quote is not closed/],
      ['A="a"b"\n', /line 1: text after the closing quote/],
      ["A=1\nB=2\nA=3\n", /line 3: A was given on line 1 already/],
    ] as const
  ) {
    assert.throws(() => parseEnvFile(text), reason, JSON.stringify(text));
  }
  // A comment may follow a quoted value; a bare value is taken to the end of its line.
  assert.deepEqual(parseEnvFile('A="value" # note\nB=it\'s # all of it\n'), {
    A: "value",
    B: "it's # all of it",
  });
  // A lone CR ends a line as LF and CRLF do.
  assert.deepEqual(parseEnvFile("A=1\rB=2\r\nC=3\n"), { A: "1", B: "2", C: "3" });
});
