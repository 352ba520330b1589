/**
 * What one resident counter actor costs, part by part, each measured alone
 * in a fresh process (`counter_bench.ts` runs it twice):
 *
 * - `instances`: N instances of the counter component through jco's
 *   instantiation glue (as an executor makes them with `--abi jco`), each
 *   given stub host imports and run through `on-init` and one `on-request`,
 *   so its linear memory and stack are touched as in the real node.
 * - `direct-instances`: the same through the direct bindings
 *   (`src/actors/abi/direct.ts`), as an executor makes them by default.
 * - `databases`: N open actor databases (`src/sqlite/actor_database.ts`,
 *   as a storage worker holds them), each with the counter's table, the
 *   meta row and one increment.
 *
 * - `databases-small-cache`: the same databases with `PRAGMA cache_size = 8`
 *   run first, before SQLite's page cache is made: shows how much of a
 *   connection is the page cache's initial bulk allocation.
 *
 * Usage: `deno run -A --v8-flags=--expose-gc bench/memory_parts.ts PART N [DIR]`, where
 * DIR is where the temporary databases go (default: the system's temporary directory).
 *
 * Prints one JSON {@linkcode PartResult} line.
 *
 * @module
 */

import { loadComponent } from "../src/actors/component.ts";
import { type ActorImports, instantiateDirect } from "../src/actors/abi/direct.ts";
import { ActorDatabase, type ExecResult } from "../src/sqlite/actor_database.ts";
import { DatabaseSync } from "node:sqlite";
import { ROOT } from "./processes.ts";

/** The parts this script measures. */
export const PARTS = [
  "instances",
  "direct-instances",
  "databases",
  "databases-small-cache",
] as const;
/** One of {@linkcode PARTS}. */
export type Part = typeof PARTS[number];

/** What N of one part cost. */
export interface PartResult {
  part: Part;
  count: number;
  /** VmRSS growth over the N, per item, KiB. */
  rssKiBPerItem: number;
  /** V8 `heapUsed` growth (after a full GC), per item, KiB. */
  heapKiBPerItem: number;
  /** V8 `external` growth (array buffers, Wasm memories), per item, KiB. */
  externalKiBPerItem: number;
  /** Wall time to make one, ms. */
  msPerItem: number;
}

interface Glue {
  instantiate(
    getCoreModule: (name: string) => WebAssembly.Module,
    imports: Record<string, Record<string, unknown>>,
  ): Promise<{ onInit(): Promise<void>; onRequest(request: unknown): Promise<unknown> }>;
}

const gc = (globalThis as { gc?: () => void }).gc;

function rssKiB(): number {
  const match = Deno.readTextFileSync("/proc/self/status").match(/^VmRSS:\s+(\d+) kB/m);
  return Number(match![1]);
}

function settle() {
  for (let i = 0; i < 3; i++) gc?.();
}

async function measure(
  part: PartResult["part"],
  count: number,
  make: (i: number) => Promise<unknown> | unknown,
): Promise<{ result: PartResult; kept: unknown[] }> {
  // One made and dropped first, so code compiled on first use is not counted.
  await make(-1);
  settle();
  const rss0 = rssKiB();
  const mem0 = Deno.memoryUsage();
  const kept: unknown[] = [];
  const t0 = performance.now();
  for (let i = 0; i < count; i++) kept.push(await make(i));
  const ms = performance.now() - t0;
  settle();
  const rss1 = rssKiB();
  const mem1 = Deno.memoryUsage();
  return {
    kept,
    result: {
      part,
      count,
      rssKiBPerItem: (rss1 - rss0) / count,
      heapKiBPerItem: (mem1.heapUsed - mem0.heapUsed) / 1024 / count,
      externalKiBPerItem: (mem1.external - mem0.external) / 1024 / count,
      msPerItem: ms / count,
    },
  };
}

const COUNTER_TABLE =
  "CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY CHECK (id = 1), n INTEGER NOT NULL)";
const INCREMENT =
  "INSERT INTO counter VALUES (1, 1) ON CONFLICT(id) DO UPDATE SET n = n + 1 RETURNING n";

const ONE: ExecResult = {
  columns: ["n"],
  rows: [[{ tag: "integer", val: 1n }]],
  changes: 1n,
  lastInsertRowid: 1n,
};

function stubImports() {
  return {
    "wasmkeep:actor/storage": {
      exec: () => ONE,
      execDurable: () => ONE,
      inTransaction: () => false,
      deleteSelf: () => {},
    },
    "wasmkeep:actor/actors": {
      self: () => ({ tenant: "default", class: "counter", name: "x" }),
      call: () => {},
    },
    "wasmkeep:actor/alarms": { set: () => {}, get: () => undefined, delete: () => {} },
    "wasmkeep:actor/websockets": { send: () => {}, close: () => {}, connections: () => [] },
    "wasmkeep:actor/config": { get: () => undefined },
    "wasmkeep:actor/log": { log: () => {} },
  };
}

const REQUEST = { method: "POST", path: "/", query: "", headers: [], body: new Uint8Array() };

async function instances(count: number, tmp: string): Promise<PartResult> {
  const loaded = await loadComponent(
    "counter",
    `${ROOT}examples/counter/counter.wasm`,
    `${tmp}/cache`,
  );
  const url = URL.createObjectURL(new Blob([loaded.glue], { type: "text/javascript" }));
  const glue = await import(url) as Glue;
  const modules = new Map<string, WebAssembly.Module>();
  for (const [name, bytes] of Object.entries(loaded.coreModules)) {
    modules.set(name, new WebAssembly.Module(bytes as Uint8Array<ArrayBuffer>));
  }
  const { result, kept } = await measure("instances", count, async () => {
    // Each instance gets its own import object, as each actor does.
    const exports = await glue.instantiate((name) => modules.get(name)!, stubImports());
    await exports.onInit();
    await exports.onRequest(REQUEST);
    return exports;
  });
  if (kept.length !== count) throw new Error("lost instances");
  return result;
}

function stubDirectImports(): ActorImports {
  const result: ExecResult = {
    columns: ["n"],
    rows: [[{ tag: "integer", val: 1n }]],
    changes: 1n,
    lastInsertRowid: 1n,
  };
  return {
    exec: () => result,
    execDurable: () => result,
    inTransaction: () => false,
    deleteSelf: () => {},
    self: () => ({ tenant: "default", class: "counter", name: "x" }),
    call: () => ({ status: 200, headers: [], body: new Uint8Array() }),
    alarmSet: () => {},
    alarmGet: () => undefined,
    alarmDelete: () => {},
    wsSend: () => {},
    wsClose: () => {},
    wsConnections: () => [],
    configGet: () => undefined,
    log: () => {},
  };
}

async function directInstances(count: number, tmp: string): Promise<PartResult> {
  const loaded = await loadComponent(
    "counter",
    `${ROOT}examples/counter/counter.wasm`,
    `${tmp}/cache`,
  );
  if (!loaded.directModule) throw new Error(`no direct bindings: ${loaded.directProblem}`);
  const module = new WebAssembly.Module(
    loaded.coreModules[loaded.directModule] as Uint8Array<ArrayBuffer>,
  );
  const { result, kept } = await measure("direct-instances", count, async () => {
    // Each instance gets its own import object, as each actor does.
    const exports = instantiateDirect(module, stubDirectImports());
    await exports.onInit();
    await exports.onRequest(REQUEST);
    return exports;
  });
  if (kept.length !== count) throw new Error("lost instances");
  return result;
}

/**
 * What `ActorDatabase` opens, on a raw connection whose page cache is bounded
 * to 8 pages before SQLite makes it (the cache's first allocation is sized
 * by its bound); only to show what that costs and saves.
 */
function smallCacheDatabase(path: string): { close(): void } {
  const db = new DatabaseSync(path);
  db.exec("PRAGMA cache_size = 8");
  db.exec("PRAGMA locking_mode = EXCLUSIVE");
  db.exec("PRAGMA journal_mode = WAL");
  db.exec("PRAGMA synchronous = NORMAL");
  db.exec("CREATE TABLE IF NOT EXISTS _wasmkeep_meta (key TEXT PRIMARY KEY, value TEXT)");
  db.exec(COUNTER_TABLE);
  db.prepare("INSERT INTO _wasmkeep_meta VALUES (?, ?)").run("init_version", "x".repeat(64));
  db.prepare(INCREMENT).get();
  return db;
}

async function databases(count: number, tmp: string, part: Part): Promise<PartResult> {
  const { result, kept } = await measure(part, count, (i) => {
    const path = `${tmp}/${i < 0 ? "warm" : i}.db`;
    if (part === "databases-small-cache") return smallCacheDatabase(path);
    const db = new ActorDatabase(path);
    db.exec(COUNTER_TABLE, []);
    db.setMeta("init_version", "x".repeat(64));
    db.exec(INCREMENT, []);
    return db;
  });
  for (const db of kept as { close(): void }[]) db.close();
  return result;
}

if (import.meta.main) {
  const [part, n, dir] = Deno.args as [Part, string, string | undefined];
  const count = Number(n);
  if (!gc || !PARTS.includes(part) || !(count > 0)) {
    console.error(
      `usage: deno run -A --v8-flags=--expose-gc bench/memory_parts.ts ${PARTS.join("|")} N [DIR]`,
    );
    Deno.exit(2);
  }
  const tmp = await Deno.makeTempDir({ prefix: "wasmkeep-memparts-", dir });
  try {
    const result = part === "instances"
      ? await instances(count, tmp)
      : part === "direct-instances"
      ? await directInstances(count, tmp)
      : await databases(count, tmp, part);
    console.log(JSON.stringify(result));
  } finally {
    await Deno.remove(tmp, { recursive: true });
  }
}
