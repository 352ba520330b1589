/**
 * The README's CLI reference shows `wasmkeep serve --help` as it prints, and each
 * cluster and actor command as its `--help` names it:
 * a flag added, renamed or explained anew changes both, or this fails.
 */
import assert from "node:assert/strict";

const ROOT = new URL("../../", import.meta.url);

/** The fenced block of `markdown` whose first line starts with `first`. */
function blockStartingWith(markdown: string, first: string): string | undefined {
  for (const match of markdown.matchAll(/^```[^\n]*\n([\s\S]*?)^```$/gm)) {
    if (match[1].startsWith(first)) return match[1].trimEnd();
  }
  return undefined;
}

Deno.test("README: the CLI reference's serve block is serve --help, line for line", async () => {
  const readme = await Deno.readTextFile(new URL("README.md", ROOT));
  const shown = blockStartingWith(readme, "Usage: wasmkeep serve ");
  assert.ok(shown, "README.md shows serve's help in a block starting 'Usage: wasmkeep serve'");
  const output = await new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", "main.ts", "serve", "--help"],
    cwd: ROOT,
    env: { NO_COLOR: "1" },
    stdout: "piped",
    stderr: "piped",
  }).output();
  assert.equal(output.code, 0, new TextDecoder().decode(output.stderr));
  const printed = new TextDecoder().decode(output.stdout).trimEnd();
  assert.equal(shown, printed);
});

Deno.test("README: the CLI reference names every cluster and actor command as its --help's usage line", async () => {
  const readme = await Deno.readTextFile(new URL("README.md", ROOT));
  const reference = blockStartingWith(readme, "wasmkeep serve ");
  assert.ok(reference, "README.md has a CLI reference block starting 'wasmkeep serve'");
  const documented = reference.split("\n").map((line) => line.replace(/\s+#\s.*$/, "").trim());
  const commands: [string[], string][] = [
    ...["status", "fence", "forget", "drain", "undrain"].map((sub): [string[], string] => [
      ["cluster", sub],
      `wasmkeep cluster ${sub} `,
    ]),
    [["actor", "move"], "wasmkeep actor move "],
  ];
  for (const [args, prefix] of commands) {
    const output = await new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", "main.ts", ...args, "--help"],
      cwd: ROOT,
      env: { NO_COLOR: "1" },
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.equal(output.code, 0, new TextDecoder().decode(output.stderr));
    const usage = new TextDecoder().decode(output.stdout).split("\n")[0].replace(/^Usage: /, "");
    assert.ok(usage.startsWith(prefix), usage);
    assert.ok(documented.includes(usage), `the CLI reference lacks '${usage}'`);
  }
});
