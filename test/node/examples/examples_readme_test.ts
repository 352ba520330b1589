/**
 * The examples' READMEs against what is built: no sentence says a built
 * feature is still to come, and every `wasmkeep` command line they show
 * names a command and flags the CLI has (its `--help` lists them).
 */

import assert from "node:assert/strict";
import { ROOT, runWasmkeep } from "../../../src/testing/node_process.ts";

const EXAMPLES = `${ROOT}examples`;

/** Wording that says a feature is not built yet. */
const NOT_BUILT = /\b(in the works|coming soon|not (built|available|supported) yet|planned)\b/i;

async function readmes(): Promise<{ name: string; text: string }[]> {
  const found = [];
  for await (const entry of Deno.readDir(EXAMPLES)) {
    const path = `${EXAMPLES}/${entry.name}/README.md`;
    const text = await Deno.readTextFile(path).catch(() => undefined);
    if (entry.isDirectory && text !== undefined) found.push({ name: entry.name, text });
  }
  return found.sort((a, b) => a.name.localeCompare(b.name));
}

/** The `wasmkeep ...` and `deno run -A main.ts ...` lines of a README's sh blocks, continuations joined. */
function commandLines(text: string): string[] {
  const blocks = [...text.matchAll(/```sh\n([\s\S]*?)```/g)].map((m) => m[1]);
  return blocks.flatMap((block) =>
    block.replace(/\\\n\s*/g, " ").split("\n").flatMap((line) => {
      const match = line.match(/^(?:wasmkeep|deno run -A main\.ts) (.*)$/);
      return match ? [match[1].replace(/\s+#.*$/, "")] : [];
    })
  );
}

Deno.test("examples' READMEs say nothing built is still to come", async () => {
  const found = await readmes();
  assert.ok(found.length >= 5, found.map((r) => r.name).join(","));
  for (const { name, text } of found) {
    const line = text.split("\n").find((l) => NOT_BUILT.test(l));
    assert.equal(line, undefined, `examples/${name}/README.md: ${line}`);
  }
});

Deno.test("examples' READMEs show only commands and flags the CLI has", async () => {
  const helps = new Map<string, string>();
  let lines = 0;
  for (const { name, text } of await readmes()) {
    for (const line of commandLines(text)) {
      lines++;
      const command = line.split(" ")[0];
      if (!helps.has(command)) {
        const help = await runWasmkeep([command, "--help"]);
        assert.equal(help.code, 0, `examples/${name}: wasmkeep ${command}: ${help.stderr}`);
        helps.set(command, help.stdout);
      }
      for (const [flag] of line.matchAll(/--[a-z][a-z-]*/g)) {
        assert.ok(
          new RegExp(`^\\s+(-\\w, )?${flag}\\b`, "m").test(helps.get(command)!),
          `examples/${name}/README.md: wasmkeep ${command} has no ${flag}: ${line}`,
        );
      }
    }
  }
  assert.ok(lines >= 5, `only ${lines} command lines found`);
});
