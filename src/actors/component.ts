/**
 * Loading actor components: check that a file is a component targeting the
 * `wasmkeep:actor/actor` world, transpile it with jco once, and cache the
 * result under the data directory by content hash.
 *
 * @module
 */

import type { Transpiled } from "./component_transpile.ts";
import { decodeTranspiled } from "./transpile_process.ts";
import { MAX_SPARE_CACHED_COMPONENTS } from "../limits.ts";
// Where the component's users have always found them.
export { ACTOR_EXPORTS, ACTOR_IMPORTS, ASYNC_IMPORTS } from "./component_transpile.ts";

/**
 * Changes whenever the transpile options (component_transpile.ts), the jco
 * version or the cache's manifest change, so a cache written by another
 * build is not reused. 4: the manifest keeps whether the direct bindings
 * fit, so a cached load parses no core module.
 */
const TRANSPILE_VERSION = "jco-1.35.0-jspi-4";

/** Largest component file accepted. */
export const MAX_COMPONENT_BYTES = 64 * 1024 * 1024;

/** A transpiled component, ready to instantiate in an executor. */
export interface LoadedComponent {
  /** The class name it serves. */
  className: string;
  /** The file it came from. */
  path: string;
  /** Hex SHA-256 of the component's bytes: its code version. */
  hash: string;
  /** jco's instantiation-mode glue, as JavaScript source. */
  glue: string;
  /** The core modules the glue asks for, by file name. */
  coreModules: Record<string, Uint8Array>;
  /** The core module the direct bindings instantiate, when the component fits them. */
  directModule?: string;
  /** Why the component does not fit the direct bindings (it then uses jco's glue). */
  directProblem?: string;
}

/** Raised when a component is refused; the message names the file and the problem. */
export class ComponentError extends Error {
  /**
   * A refusal of the component at `path`, for `problem`.
   *
   * @example
   * ```ts
   * import { ComponentError } from "./component.ts";
   * new ComponentError("counter.wasm", "not a component").message; // "counter.wasm: not a component"
   * ```
   */
  constructor(path: string, problem: string) {
    super(`${path}: ${problem}`);
    this.name = "ComponentError";
  }
}

/**
 * Raised when the transpile process failed (it was killed, or wrote what
 * cannot be read): not a refusal of the component, which a later try may
 * transpile; the message names the file.
 */
export class TranspileFailure extends Error {
  /**
   * The failure of the component at `path`'s transpile, for `why`.
   *
   * @example
   * ```ts
   * import { TranspileFailure } from "./component.ts";
   * new TranspileFailure("a.wasm", "killed by SIGKILL").message;
   * // "a.wasm: cannot be transpiled: the transpile process failed: killed by SIGKILL"
   * ```
   */
  constructor(path: string, why: string) {
    super(`${path}: cannot be transpiled: the transpile process failed: ${why}`);
    this.name = "TranspileFailure";
  }
}

const COMPONENT_VERSION = [0x0d, 0x00, 0x01, 0x00];
const CORE_VERSION = [0x01, 0x00, 0x00, 0x00];

function headerProblem(bytes: Uint8Array): string | undefined {
  const magic = bytes.length >= 8 && bytes[0] === 0 && bytes[1] === 0x61 && bytes[2] === 0x73 &&
    bytes[3] === 0x6d;
  if (!magic) return "not a WebAssembly file (no \\0asm header)";
  const version = [...bytes.subarray(4, 8)];
  if (version.every((b, i) => b === CORE_VERSION[i])) {
    return "a core WebAssembly module, not a component; make a component of it " +
      "(jco new, or componentEmbed with wit/wasmkeep.wit then componentNew)";
  }
  if (!version.every((b, i) => b === COMPONENT_VERSION[i])) {
    return `an unsupported WebAssembly version (${version.join(" ")})`;
  }
  return undefined;
}

async function sha256Hex(bytes: Uint8Array): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

/** Whether the direct bindings fit a component (component_transpile.ts). */
interface DirectFit {
  directModule?: string;
  directProblem?: string;
}

interface CachedManifest extends DirectFit {
  version: string;
  glue: string;
  coreModules: string[];
}

async function readCache(
  dir: string,
): Promise<Omit<LoadedComponent, "className" | "path" | "hash"> | undefined> {
  try {
    const manifest = JSON.parse(await Deno.readTextFile(`${dir}/manifest.json`)) as CachedManifest;
    if (manifest.version !== TRANSPILE_VERSION) return undefined;
    const glue = await Deno.readTextFile(`${dir}/${manifest.glue}`);
    const coreModules: Record<string, Uint8Array> = {};
    for (const name of manifest.coreModules) {
      coreModules[name] = await Deno.readFile(`${dir}/${name}`);
    }
    const { directModule, directProblem } = manifest;
    // Its last use, for pruneComponentCache.
    const now = new Date();
    await Deno.utime(dir, now, now).catch(() => {});
    return { glue, coreModules, directModule, directProblem };
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return undefined;
    if (error instanceof SyntaxError) return undefined;
    throw error;
  }
}

async function writeCache(
  dir: string,
  glue: string,
  coreModules: Record<string, Uint8Array>,
  fit: DirectFit,
) {
  // Written beside and renamed, so a crash never leaves a half-written
  // cache entry that a later start would trust.
  const temp = `${dir}.tmp-${crypto.randomUUID()}`;
  await Deno.mkdir(temp, { recursive: true });
  await Deno.writeTextFile(`${temp}/glue.js`, glue);
  for (const [name, bytes] of Object.entries(coreModules)) {
    await Deno.writeFile(`${temp}/${name}`, bytes);
  }
  const manifest: CachedManifest = {
    version: TRANSPILE_VERSION,
    glue: "glue.js",
    coreModules: Object.keys(coreModules),
    ...fit,
  };
  await Deno.writeTextFile(`${temp}/manifest.json`, JSON.stringify(manifest));
  try {
    await Deno.rename(temp, dir);
  } catch {
    // Another process cached the same component first; theirs is identical.
    await Deno.remove(temp, { recursive: true });
  }
}

/**
 * The component `hash` from the cache in `cacheDir`, transpiled before, or
 * `undefined` when it is not there (a node that follows an app reads it
 * from the bucket then).
 *
 * @example
 * ```ts
 * import { cachedComponent } from "./component.ts";
 * const cached = await cachedComponent("counter", "ab12...", "components", ".wasmkeep/cache");
 * ```
 */
export async function cachedComponent(
  className: string,
  hash: string,
  path: string,
  cacheDir: string,
): Promise<LoadedComponent | undefined> {
  const cached = await readCache(`${cacheDir}/${hash}`);
  if (!cached) return undefined;
  return { className, path, hash, ...cached };
}

/**
 * Reads, checks and transpiles the component at `path` for class
 * `className`, using and filling the cache in `cacheDir`.
 *
 * @example
 * ```ts
 * import { loadComponent } from "./component.ts";
 * const counter = await loadComponent("counter", "examples/counter/counter.wasm", ".wasmkeep/cache");
 * ```
 */
export async function loadComponent(
  className: string,
  path: string,
  cacheDir: string,
): Promise<LoadedComponent> {
  let bytes: Uint8Array;
  try {
    const info = await Deno.stat(path);
    if (!info.isFile) throw new ComponentError(path, "not a file");
    if (info.size > MAX_COMPONENT_BYTES) {
      throw new ComponentError(path, `larger than ${MAX_COMPONENT_BYTES} bytes`);
    }
    bytes = await Deno.readFile(path);
  } catch (error) {
    if (error instanceof ComponentError) throw error;
    if (error instanceof Deno.errors.NotFound) throw new ComponentError(path, "no such file");
    throw new ComponentError(path, `cannot be read: ${(error as Error).message}`);
  }
  return await componentFromBytes(className, path, bytes, cacheDir);
}

/**
 * Checks and transpiles a component's `bytes` for class `className`, using
 * and filling the cache in `cacheDir`; `path` names it in errors (a file, or
 * the bucket object a deployed version names).
 *
 * @example
 * ```ts
 * import { componentFromBytes } from "./component.ts";
 * const bytes = await Deno.readFile("examples/counter/counter.wasm");
 * const counter = await componentFromBytes("counter", "counter.wasm", bytes, ".wasmkeep/cache");
 * ```
 */
export async function componentFromBytes(
  className: string,
  path: string,
  bytes: Uint8Array,
  cacheDir: string,
): Promise<LoadedComponent> {
  if (bytes.length > MAX_COMPONENT_BYTES) {
    throw new ComponentError(path, `larger than ${MAX_COMPONENT_BYTES} bytes`);
  }
  const problem = headerProblem(bytes);
  if (problem) throw new ComponentError(path, `is ${problem}`);

  const hash = await sha256Hex(bytes);
  const dir = `${cacheDir}/${hash}`;
  const cached = await readCache(dir);
  if (cached) {
    return { className, path, hash, ...cached };
  }

  let made: Transpiled;
  try {
    made = await transpileOffThread(bytes);
  } catch (error) {
    throw new TranspileFailure(path, (error as Error).message);
  }
  if (!made.ok) throw new ComponentError(path, made.problem);
  const { glue, coreModules, directModule, directProblem } = made;
  const fit = { directModule, directProblem };
  await Deno.mkdir(cacheDir, { recursive: true });
  await writeCache(dir, glue, coreModules, fit);
  return { className, path, hash, glue, coreModules, ...fit };
}

/** A cache entry being written (`writeCache`) this long ago was left by a crash. */
const ABANDONED_WRITE_MS = 3_600_000;

/**
 * Deletes what the cache in `cacheDir` no longer needs: the entries of
 * components other than `keep` past the {@linkcode MAX_SPARE_CACHED_COMPONENTS}
 * most recently used, and the entries a crash left half written. An entry
 * that cannot be deleted stays, for the next time.
 *
 * @example
 * ```ts
 * import { pruneComponentCache } from "./component.ts";
 * await pruneComponentCache(".wasmkeep/data/cache/components", ["ab12..."]);
 * ```
 */
export async function pruneComponentCache(
  cacheDir: string,
  keep: Iterable<string>,
  spare = MAX_SPARE_CACHED_COMPONENTS,
  now = Date.now(),
): Promise<string[]> {
  const kept = new Set(keep);
  const others: { name: string; usedAt: number }[] = [];
  const removed: string[] = [];
  const remove = async (name: string) => {
    try {
      await Deno.remove(`${cacheDir}/${name}`, { recursive: true });
      removed.push(name);
    } catch {
      // Left for the next prune.
    }
  };
  try {
    for await (const entry of Deno.readDir(cacheDir)) {
      if (!entry.isDirectory || kept.has(entry.name)) continue;
      const info = await Deno.stat(`${cacheDir}/${entry.name}`).catch(() => undefined);
      if (!info) continue;
      // An entry's time is its last use (readCache touches it).
      const usedAt = info.mtime?.getTime() ?? 0;
      if (entry.name.includes(".tmp-")) {
        if (now - usedAt > ABANDONED_WRITE_MS) await remove(entry.name);
        continue;
      }
      others.push({ name: entry.name, usedAt });
    }
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return removed;
    throw error;
  }
  others.sort((a, b) => b.usedAt - a.usedAt);
  for (const { name } of others.slice(spare)) await remove(name);
  return removed;
}

/**
 * Transpiles at once in a node: each holds jco (with wasm-tools) and the
 * component's output in memory; the others wait their turn (a version has
 * at most `MAX_APP_CLASSES` classes).
 */
const TRANSPILES_AT_ONCE = 1;
let transpiles = 0;
const waitingToTranspile: (() => void)[] = [];

/**
 * Transpiles `bytes` in a process of its own (transpile_process.ts), so that
 * a large component (seconds of jco's time) never holds the node's main
 * thread, where its leases, heartbeats and routing run, and jco's memory goes
 * back to the system when it ends.
 */
async function transpileOffThread(bytes: Uint8Array): Promise<Transpiled> {
  if (transpiles < TRANSPILES_AT_ONCE) transpiles++;
  else await new Promise<void>((resolve) => waitingToTranspile.push(resolve));
  try {
    return await inProcess(bytes);
  } finally {
    // The place passes to the next in line, or frees up.
    const next = waitingToTranspile.shift();
    if (next) next();
    else transpiles--;
  }
}

async function inProcess(bytes: Uint8Array): Promise<Transpiled> {
  const { program, args } = transpileCommand();
  const child = new Deno.Command(program, {
    args,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const output = child.output();
  try {
    const writer = child.stdin.getWriter();
    await writer.write(bytes);
    await writer.close();
  } catch {
    // It died before it read everything: its exit says why.
  }
  const { code, signal, stdout, stderr } = await output;
  if (signal) throw new Error(`killed by ${signal} (out of memory?)`);
  if (code !== 0) {
    throw new Error(
      new TextDecoder().decode(stderr).trim().split("\n").pop() || `exit code ${code}`,
    );
  }
  return decodeTranspiled(stdout);
}

/**
 * How to start a transpile: the compiled binary runs itself with a hidden
 * command; `deno run` runs the module by its URL (a file, or JSR).
 */
function transpileCommand(): { program: string; args: string[] } {
  const program = Deno.execPath();
  const binary = program.split(/[\\/]/).pop()!;
  if (!/^deno(\.exe)?$/.test(binary)) return { program, args: ["__transpile"] };
  const module = new URL("./transpile_process.ts", import.meta.url).href;
  return { program, args: ["run", "-A", "--no-prompt", module] };
}
