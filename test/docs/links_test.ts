/**
 * No link in the documentation leads nowhere (issue 28, item 7): every
 * relative markdown link in README.md, docs/ and examples/ names a file or
 * folder that exists (and, with a `#`, a heading of that file), and every
 * `ADR NNNN` or `docs/adr/NNNN` the docs or the code cite is a file in
 * docs/adr/. A number the spec gives a decision is written "the spec's ADR
 * NNNN" and must be a row of docs/adr/README.md's table of the spec's numbers.
 */
import assert from "node:assert/strict";
import { dirname, join, relative, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const ADR_DIR = join(ROOT, "docs/adr");

/** Files whose relative links and ADR mentions are checked. */
async function markdownFiles(): Promise<string[]> {
  const files = [join(ROOT, "README.md")];
  for (const dir of ["docs", "examples"]) {
    for await (const path of walk(join(ROOT, dir), ".md")) files.push(path);
  }
  return files;
}

/** Source files whose comments and messages may cite ADRs. */
async function sourceFiles(): Promise<string[]> {
  const files = [join(ROOT, "mod.ts"), join(ROOT, "main.ts")];
  for (const dir of ["src", "cli", "sim", "test", "bench", "examples"]) {
    for await (const path of walk(join(ROOT, dir), ".ts")) files.push(path);
  }
  return files;
}

async function* walk(dir: string, suffix: string): AsyncGenerator<string> {
  for await (const entry of Deno.readDir(dir)) {
    const path = join(dir, entry.name);
    if (entry.isDirectory) {
      if (entry.name === "node_modules" || entry.name === "fixtures") continue;
      yield* walk(path, suffix);
    } else if (entry.isFile && entry.name.endsWith(suffix)) {
      yield path;
    }
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return false;
    throw error;
  }
}

/** The text outside fenced code blocks, line numbers kept. */
function proseLines(text: string): string[] {
  let fenced = false;
  return text.split("\n").map((line) => {
    if (/^\s*(```|~~~)/.test(line)) {
      fenced = !fenced;
      return "";
    }
    return fenced ? "" : line;
  });
}

/** The names of the files in docs/adr/. */
async function adrFiles(): Promise<Set<string>> {
  const names = new Set<string>();
  for await (const entry of Deno.readDir(ADR_DIR)) names.add(entry.name);
  return names;
}

/** The project's ADR numbers, from docs/adr/NNNN-title.md. */
function adrNumbers(files: Set<string>): Set<string> {
  return new Set([...files].flatMap((name) => /^(\d{4})-.+\.md$/.exec(name)?.[1] ?? []));
}

/** The heading of docs/adr/README.md's table of the spec's numbers. */
const SPEC_TABLE_HEADING = "## The spec's ADR numbers";

/** The spec's ADR numbers that docs/adr/README.md's table maps. */
async function specNumbersMapped(): Promise<Set<string>> {
  const path = join(ADR_DIR, "README.md");
  const index = await exists(path) ? await Deno.readTextFile(path) : "";
  const at = index.indexOf(SPEC_TABLE_HEADING);
  const table = at < 0 ? "" : index.slice(at);
  return new Set([...table.matchAll(/^\|\s*(\d{4})\s*\|/gm)].map((match) => match[1]));
}

/**
 * Every dangling citation in `text`: an `ADR NNNN` with no file (unless it is
 * "the spec's ADR NNNN", which the index must map) and a `docs/adr/NNNN...`
 * path that names no file.
 */
function danglingAdrs(
  text: string,
  files: Set<string>,
  specMapped: Set<string>,
  where: string,
): string[] {
  const adrs = adrNumbers(files);
  const found: string[] = [];
  const lines = text.split("\n");
  lines.forEach((line, index) => {
    for (const match of line.matchAll(/(spec's\s+)?\bADRs?\s+(\d{4})\b/g)) {
      const [, spec, number] = match;
      if (spec ? !specMapped.has(number) : !adrs.has(number)) {
        found.push(`${where}:${index + 1}: ${match[0]}`);
      }
    }
    for (const match of line.matchAll(/\badr\/(\d{4})([-\w.]*)/g)) {
      const [, number, rest] = match;
      const named = rest.endsWith(".md") ? [`${number}${rest}`] : [];
      if (!adrs.has(number) || named.some((name) => !files.has(name))) {
        found.push(`${where}:${index + 1}: ${match[0]}`);
      }
    }
  });
  return found;
}

/**
 * The anchors of a markdown file's headings, as GitHub makes them: lower
 * case, code marks and punctuation dropped, spaces as `-`, a repeated one
 * numbered `-1`, `-2`...
 */
function headingAnchors(text: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  for (const line of proseLines(text)) {
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const words = heading[1].replace(/\[([^\]]*)\]\([^)]*\)/g, "$1").toLowerCase();
    const slug = words.replace(/[^\p{L}\p{N}\s_-]/gu, "").replace(/\s/g, "-");
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return anchors;
}

/** Every relative link of `file` to a missing file or folder, or to a missing heading. */
async function danglingLinks(file: string): Promise<{ dangling: string[]; checked: number }> {
  const text = await Deno.readTextFile(file);
  const dangling: string[] = [];
  let checked = 0;
  for (const [index, line] of proseLines(text).entries()) {
    for (const match of line.matchAll(/\]\(([^)\s]+)(?:\s+"[^"]*")?\)/g)) {
      const target = match[1];
      if (/^[a-z][a-z0-9+.-]*:/i.test(target)) continue;
      const [pathPart, anchor] = target.split("#", 2);
      const path = pathPart === "" ? file : resolve(dirname(file), decodeURIComponent(pathPart));
      checked++;
      let found = await exists(path);
      if (found && anchor !== undefined && path.endsWith(".md")) {
        found = headingAnchors(await Deno.readTextFile(path)).has(decodeURIComponent(anchor));
      }
      if (!found) dangling.push(`${relative(ROOT, file)}:${index + 1}: ${target}`);
    }
  }
  return { dangling, checked };
}

Deno.test("docs: every relative markdown link names a file, folder or heading that exists", async () => {
  const dangling: string[] = [];
  let checked = 0;
  for (const file of await markdownFiles()) {
    const found = await danglingLinks(file);
    dangling.push(...found.dangling);
    checked += found.checked;
  }
  assert.ok(checked > 10, `only ${checked} relative links found: is the scan broken?`);
  assert.deepEqual(dangling, [], `links to nothing:\n${dangling.join("\n")}`);
});

Deno.test("docs and code: every ADR cited is a file in docs/adr/", async () => {
  const files = await adrFiles();
  const specMapped = await specNumbersMapped();
  const dangling: string[] = [];
  for (const file of [...await markdownFiles(), ...await sourceFiles()]) {
    if (file === fileURLToPath(import.meta.url)) continue;
    const text = await Deno.readTextFile(file);
    const prose = file.endsWith(".md") ? proseLines(text).join("\n") : text;
    dangling.push(...danglingAdrs(prose, files, specMapped, relative(ROOT, file)));
  }
  assert.deepEqual(
    dangling,
    [],
    `ADRs cited that docs/adr/ does not have:\n${dangling.join("\n")}`,
  );
});

Deno.test("docs/adr/README.md indexes every ADR", async () => {
  const index = await Deno.readTextFile(join(ADR_DIR, "README.md"));
  const missing = [...await adrFiles()].filter((name) =>
    name !== "README.md" && !index.includes(`(${name})`)
  );
  assert.deepEqual(missing, [], `ADRs the index does not link: ${missing.join(", ")}`);
});

Deno.test("headingAnchors: GitHub's anchors, code marks, punctuation and repeats", () => {
  const text =
    "# Moving from `--access`\n## The spec's ADR numbers\n### The CPU work: before and after\n" +
    "```sh\n# not a heading\n```\n## Results\n## Results\n";
  assert.deepEqual([...headingAnchors(text)], [
    "moving-from---access",
    "the-specs-adr-numbers",
    "the-cpu-work-before-and-after",
    "results",
    "results-1",
  ]);
});

Deno.test("the check finds a dangling ADR, a spec number not mapped, and a bad adr/ path", () => {
  const adrs = new Set(["0001-processes.md", "0004-node-leases.md"]);
  const mapped = new Set(["0020"]);
  assert.deepEqual(danglingAdrs("as ADR 0004 says", adrs, mapped, "x"), []);
  assert.deepEqual(danglingAdrs("the spec's ADR 0020", adrs, mapped, "x"), []);
  assert.deepEqual(danglingAdrs("(ADR 0013)", adrs, mapped, "x"), ["x:1: ADR 0013"]);
  assert.deepEqual(danglingAdrs("\nthe spec's ADR 0014", adrs, mapped, "x"), [
    "x:2: spec's ADR 0014",
  ]);
  assert.deepEqual(
    danglingAdrs("docs/adr/0004-node-leases.md, docs/adr/0001", adrs, mapped, "x"),
    [],
  );
  assert.deepEqual(danglingAdrs("docs/adr/0009-alarms.md", adrs, mapped, "x"), [
    "x:1: adr/0009-alarms.md",
  ]);
  assert.deepEqual(danglingAdrs("docs/adr/0004-leases.md", adrs, mapped, "x"), [
    "x:1: adr/0004-leases.md",
  ]);
});
