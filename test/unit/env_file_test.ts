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
