/**
 * `src/testing/` holds what tests, benchmarks and the simulator share (moto,
 * the counting proxy, node processes): only test/, bench/ and sim/ import
 * it, and it is not published (deno.json publish.exclude).
 */

import assert from "node:assert/strict";

const ROOT = new URL("../../", import.meta.url).pathname;

/** The `.ts` files under `dir` (relative to the repository), recursively. */
function* sources(dir: string): Generator<string> {
  for (const entry of Deno.readDirSync(`${ROOT}${dir}`)) {
    const path = `${dir}/${entry.name}`;
    if (entry.isDirectory) yield* sources(path);
    else if (entry.name.endsWith(".ts")) yield path;
  }
}

Deno.test("src/testing/ is imported by test/, bench/ and sim/ only, and is not published", () => {
  const importers: string[] = [];
  for (const dir of ["src", "cli"]) {
    for (const path of sources(dir)) {
      if (path.startsWith("src/testing/")) continue;
      const text = Deno.readTextFileSync(`${ROOT}${path}`);
      if (/from\s+["'][^"']*\/testing\/[^"']*["']/.test(text)) importers.push(path);
    }
  }
  for (const path of ["main.ts", "mod.ts"]) {
    if (/\/testing\//.test(Deno.readTextFileSync(`${ROOT}${path}`))) importers.push(path);
  }
  assert.deepEqual(importers, []);
  const config = JSON.parse(Deno.readTextFileSync(`${ROOT}deno.json`));
  assert.ok(config.publish.exclude.includes("src/testing/"));
  // What moved here from test/helpers is used from here.
  assert.ok([...sources("bench")].every((path) =>
    !/test\/helpers/.test(
      Deno.readTextFileSync(`${ROOT}${path}`).split("\n").filter((l) => /import/.test(l)).join(
        "\n",
      ),
    )
  ));
});
