/**
 * The layers of `src/` (docs/architecture.md, "Layers"): its folders in one
 * order, each importing only from itself and the folders below it, no file
 * in an import cycle, `src/` importing nothing outside itself and `cli/`
 * nothing but `src/` and itself.
 *
 * The imports are Deno's own module graph (`deno info --json` from a root that
 * imports every `.ts` file of `src/` and `cli/`): static imports, `export ...
 * from`, type-only imports, and dynamic `import()` of a string literal, each
 * resolved as Deno resolves it. The imports JSDoc examples write count too:
 * a reader follows them.
 */

import assert from "node:assert/strict";

/**
 * The folders of `src/`, bottom to top, with why each sits where it does.
 * `.` is the files at `src/` itself. docs/architecture.md lists the same
 * order (a test below keeps them equal).
 */
const LAYERS: readonly { folder: string; why: string }[] = [
  {
    folder: ".",
    why: "the base: assertions, the logger, limits, errors as text, actor key and node id rules",
  },
  { folder: "time", why: "the Clock and Random seams, which every timer and draw goes through" },
  { folder: "os", why: "the process-liveness seam" },
  { folder: "config", why: "`--config` files, plain text parsed before anything runs" },
  { folder: "ltx", why: "the LTX file format: bytes only" },
  { folder: "bucket", why: "the Bucket contract and its stores; needs clocks, not what is stored" },
  { folder: "sqlite", why: "actor databases and their WAL, read out as LTX" },
  {
    folder: "net",
    why: "bytes between nodes below HTTP's meaning: HTTP/1.1 wire, relays, RFC 6455 keys",
  },
  {
    folder: "security",
    why: "node ids in certificates, the cluster secret in the bucket, signed calls",
  },
  { folder: "replication", why: "an actor's history in the bucket: SQLite's WAL as LTX files" },
  {
    folder: "actors",
    why: "actors as the node sees them: keys, protocol, host, executor pool, calls",
  },
  {
    folder: "alarms",
    why: "actors' alarms: their index in the bucket, the node's timer, the sweep",
  },
  { folder: "deploy", why: "apps in the bucket: versions, classes, access rules; names no node" },
  {
    folder: "http",
    why: "the client and cluster ports and the forwarder, given the node's answers",
  },
  {
    folder: "cluster",
    why: "leases, membership, ownership, routing and forwarding over http's forwarder",
  },
  {
    folder: "websockets",
    why: "actors' sockets: opened here, relayed to the owner by cluster routing",
  },
  { folder: "metrics", why: "the node's counters, labelled by what cluster/ and http/ count" },
  {
    folder: "executor",
    why: "the executor process: runs actors, their alarms and socket messages",
  },
  {
    folder: "handover",
    why: "drains and moves: their requests in the bucket, and handing actors to another node",
  },
  { folder: "node", why: "a node assembled from all of the above, from start to stop" },
  {
    folder: "testing",
    why:
      "what tests, benchmarks and the simulator share (moto, node processes); nothing in src/ uses it",
  },
];

const ROOT = new URL("../../", import.meta.url);
const rootPath = decodeURIComponent(ROOT.pathname);

/** An import from one file of the repository to another, by paths from its root. */
interface Edge {
  from: string;
  to: string;
  /** Written in a JSDoc example of `from`, not imported by the module itself. */
  example?: boolean;
}

function tsFiles(dir: string): string[] {
  const found: string[] = [];
  for (const entry of Deno.readDirSync(new URL(dir, ROOT))) {
    const path = `${dir}${entry.name}`;
    if (entry.isDirectory) found.push(...tsFiles(`${path}/`));
    else if (entry.isFile && entry.name.endsWith(".ts")) found.push(path);
  }
  return found;
}

/** The imports between the repository's files, from every `.ts` file of `src/` and `cli/`. */
async function importEdges(): Promise<Edge[]> {
  const files = [...tsFiles("src/"), ...tsFiles("cli/")];
  const rootModule = await Deno.makeTempFile({ suffix: ".ts" });
  try {
    await Deno.writeTextFile(
      rootModule,
      files.map((file) => `import ${JSON.stringify(new URL(file, ROOT).href)};\n`).join(""),
    );
    const output = await new Deno.Command(Deno.execPath(), {
      args: ["info", "--json", "--config", `${rootPath}deno.json`, rootModule],
      cwd: rootPath,
      stdout: "piped",
      stderr: "piped",
    }).output();
    assert.ok(output.success, new TextDecoder().decode(output.stderr));
    const graph = JSON.parse(new TextDecoder().decode(output.stdout)) as {
      modules: {
        specifier: string;
        error?: string;
        dependencies?: {
          code?: { specifier?: string };
          type?: { specifier?: string };
        }[];
      }[];
    };
    const inRepo = (specifier: string | undefined) =>
      specifier?.startsWith(ROOT.href) ? specifier.slice(ROOT.href.length) : undefined;
    const edges: Edge[] = [];
    for (const module of graph.modules) {
      const from = inRepo(module.specifier);
      if (from === undefined) continue;
      assert.equal(module.error, undefined, `${from}: ${module.error}`);
      for (const dependency of module.dependencies ?? []) {
        for (const resolved of [dependency.code, dependency.type]) {
          const to = inRepo(resolved?.specifier);
          if (to !== undefined) edges.push({ from, to });
        }
      }
    }
    return [...edges, ...files.flatMap(exampleEdges)];
  } finally {
    await Deno.remove(rootModule);
  }
}

/**
 * What the JSDoc examples of `file` import of the repository: an example
 * shows the module as a reader meets it, so it may not lean on a layer above
 * either, nor make a cycle a reader would follow.
 */
function exampleEdges(file: string): Edge[] {
  const text = Deno.readTextFileSync(new URL(file, ROOT));
  const edges: Edge[] = [];
  for (
    const line of text.matchAll(/^\s*\*\s*(?:import|export)\b[^"'\n]*\sfrom\s+["'](\.[^"']+)["']/gm)
  ) {
    const to = new URL(line[1], new URL(file, ROOT)).href.slice(ROOT.href.length);
    if (to !== file) edges.push({ from: file, to, example: true });
  }
  return edges;
}

/** The folder of a file of `src/`: its first folder there, `.` for the files at `src/` itself. */
function folderOf(path: string): string {
  const parts = path.split("/");
  return parts.length > 2 ? parts[1] : ".";
}

/** The cycles of `graph`: its strongly connected parts of more than one node, or with a loop. */
function cycles(graph: Map<string, Set<string>>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string) => {
    index.set(node, index.size);
    low.set(node, index.get(node)!);
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!index.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) {
        low.set(node, Math.min(low.get(node)!, index.get(next)!));
      }
    }
    if (low.get(node) !== index.get(node)) return;
    const part: string[] = [];
    let member: string;
    do {
      member = stack.pop()!;
      onStack.delete(member);
      part.push(member);
    } while (member !== node);
    if (part.length > 1 || graph.get(node)?.has(node)) found.push(cyclePath(graph, new Set(part)));
  };
  for (const node of [...graph.keys()].sort()) if (!index.has(node)) visit(node);
  return found;
}

/** One cycle through the first node of `part` (a strongly connected part), as a path back to it. */
function cyclePath(graph: Map<string, Set<string>>, part: Set<string>): string[] {
  const start = [...part].sort()[0];
  const cameFrom = new Map<string, string>();
  const queue = [start];
  while (queue.length > 0) {
    const node = queue.shift()!;
    for (const next of [...(graph.get(node) ?? [])].sort()) {
      if (!part.has(next)) continue;
      if (next === start) {
        const path = [start];
        for (let at = node; at !== start; at = cameFrom.get(at)!) path.splice(1, 0, at);
        return [...path, start];
      }
      if (!cameFrom.has(next)) {
        cameFrom.set(next, node);
        queue.push(next);
      }
    }
  }
  return [...part];
}

function graphOf(pairs: Iterable<readonly [string, string]>): Map<string, Set<string>> {
  const graph = new Map<string, Set<string>>();
  for (const [from, to] of pairs) {
    if (!graph.has(from)) graph.set(from, new Set());
    graph.get(from)!.add(to);
  }
  return graph;
}

const shown = (edge: Edge) =>
  `${edge.from} imports ${edge.to}${edge.example ? " (in an example)" : ""}`;
const edges = await importEdges();
const srcEdges = edges.filter((edge) => edge.from.startsWith("src/") && edge.to.startsWith("src/"));

Deno.test("layers: the module graph of src/ and cli/ was read", () => {
  const read = new Set(edges.filter((edge) => !edge.example).map((edge) => edge.from));
  for (const folder of ["src/node/", "src/cluster/", "src/bucket/", "cli/"]) {
    assert.ok([...read].some((file) => file.startsWith(folder)), `no import read in ${folder}`);
  }
  const imports = srcEdges.filter((edge) => !edge.example).length;
  assert.ok(imports > 500, `only ${imports} imports in src/`);
});

Deno.test("layers: no file of src/ or cli/ is in an import cycle", () => {
  const found = cycles(graphOf(edges.map((edge) => [edge.from, edge.to] as const)));
  assert.deepEqual(found.map((cycle) => cycle.join(" -> ")), [], "file import cycles");
});

Deno.test("layers: no folder of src/ is in an import cycle with another", () => {
  const byFolders = new Map<string, Edge>();
  for (const edge of srcEdges) {
    const from = folderOf(edge.from);
    const to = folderOf(edge.to);
    const key = `${from}\n${to}`;
    // A module's own import names the edge before an example's does.
    if (from === to || byFolders.has(key) && !byFolders.get(key)!.example) {
      continue;
    }
    byFolders.set(key, edge);
  }
  const found = cycles(
    graphOf([...byFolders.keys()].map((key) => key.split("\n") as [string, string])),
  );
  const paths = found.map((cycle) =>
    cycle.slice(1).map((folder, i) => {
      const edge = byFolders.get(`${cycle[i]}\n${folder}`)!;
      return `${cycle[i]} -> ${folder} (${shown(edge)})`;
    }).join(", ")
  );
  assert.deepEqual(paths, [], "folder import cycles");
});

Deno.test("layers: every folder of src/ has a layer, and imports only from its own and lower ones", () => {
  const rank = new Map(LAYERS.map((layer, i) => [layer.folder, i]));
  const unplaced = new Set(
    tsFiles("src/").map(folderOf).filter((folder) => !rank.has(folder)),
  );
  assert.deepEqual([...unplaced], [], "folders of src/ missing from LAYERS");
  const climbs = srcEdges.filter((edge) =>
    rank.get(folderOf(edge.to))! > rank.get(folderOf(edge.from))!
  );
  assert.deepEqual(
    climbs.map(shown),
    [],
    `imports against the layers (${LAYERS.map((layer) => layer.folder).join(" < ")})`,
  );
});

Deno.test("layers: src/ imports only src/, and cli/ only src/ and cli/", () => {
  const outside = edges.filter((edge) =>
    edge.from.startsWith("src/") ? !edge.to.startsWith("src/") : edge.from.startsWith("cli/") &&
      !edge.to.startsWith("src/") && !edge.to.startsWith("cli/")
  );
  assert.deepEqual(outside.map(shown), []);
});

Deno.test("layers: docs/architecture.md lists the layers in this order", async () => {
  const doc = await Deno.readTextFile(new URL("docs/architecture.md", ROOT));
  const section = doc.split(/^## Layers$/m)[1]?.split(/^## /m)[0];
  assert.ok(section, "docs/architecture.md has no '## Layers' section");
  const listed = [...section.matchAll(/^\| *\d+ *\| *`([^`]+)` *\|/gm)].map((row) => row[1]);
  const expected = LAYERS.map((layer) =>
    layer.folder === "." ? "src/*.ts" : `src/${layer.folder}/`
  );
  assert.deepEqual(listed, [...expected].reverse());
});
