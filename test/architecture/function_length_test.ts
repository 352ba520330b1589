/**
 * No function in src/node/ or src/http/ is longer than 150 lines (issue
 * 28): the node is assembled from parts and its ports from routes, each
 * small enough to read whole. Read with the TypeScript compiler's parser.
 */

import assert from "node:assert/strict";
// A test's tool, not a dependency of the package: kept out of deno.json's imports.
// deno-lint-ignore no-import-prefix
import ts from "npm:typescript@6.0.3";

const MAX_LINES = 150;
const FOLDERS = ["src/node", "src/http"];
const ROOT = new URL("../../", import.meta.url);

/** Every .ts file under `folder`, relative to the repository. */
async function sourceFiles(folder: string): Promise<string[]> {
  const files: string[] = [];
  for await (const entry of Deno.readDir(new URL(folder + "/", ROOT))) {
    const path = `${folder}/${entry.name}`;
    if (entry.isDirectory) files.push(...await sourceFiles(path));
    else if (entry.name.endsWith(".ts")) files.push(path);
  }
  return files;
}

/** A function's length in lines, from its first line to its last. */
interface Measured {
  where: string;
  lines: number;
}

/** Every function, method, accessor, constructor and arrow function of `text`. */
function functionsOf(path: string, text: string): Measured[] {
  const file = ts.createSourceFile(path, text, ts.ScriptTarget.Latest, true);
  const found: Measured[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && "body" in node && node.body) {
      const start = file.getLineAndCharacterOfPosition(node.getStart(file)).line;
      const end = file.getLineAndCharacterOfPosition(node.getEnd()).line;
      const name = "name" in node && node.name ? node.name.getText(file) : "(anonymous)";
      found.push({ where: `${path}:${start + 1} ${name}`, lines: end - start + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(file);
  return found;
}

Deno.test("the scan finds a function and measures it in lines", () => {
  const [measured] = functionsOf("x.ts", "export const f = () => {\n  return 1;\n};\n");
  assert.equal(measured.lines, 3);
  assert.equal(functionsOf("y.ts", "class A { m() {\n\n} }").at(0)?.lines, 3);
});

Deno.test(`no function in ${FOLDERS.join(" or ")} exceeds ${MAX_LINES} lines`, async () => {
  const tooLong: string[] = [];
  let count = 0;
  for (const folder of FOLDERS) {
    for (const path of await sourceFiles(folder)) {
      const text = await Deno.readTextFile(new URL(path, ROOT));
      for (const { where, lines } of functionsOf(path, text)) {
        count++;
        if (lines > MAX_LINES) tooLong.push(`${where}: ${lines} lines`);
      }
    }
  }
  assert.ok(count > 100, `only ${count} functions found: the scan is broken`);
  assert.deepEqual(tooLong, []);
});
