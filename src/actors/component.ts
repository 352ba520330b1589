/**
 * Loading actor components: check that a file is a component targeting the
 * `wasmkeep:actor/actor` world, transpile it with jco once, and cache the
 * result under the data directory by content hash.
 *
 * @module
 */

// Full npm: specifiers here and below, not deno.json's bare name: a program
// importing this package by URL has no import map of ours (docs/dependencies.md).
// deno-lint-ignore no-import-prefix
import type { transpile as Transpile } from "npm:@bytecodealliance/jco@1.35.0";
import { type CoreInterface, readCoreInterface } from "./abi/core_signatures.ts";
import { directBindingsProblem } from "./abi/direct.ts";

/** The interfaces an actor may import, as jco names them. */
export const ACTOR_IMPORTS: readonly string[] = [
  "wasmkeep:actor/storage",
  "wasmkeep:actor/actors",
  "wasmkeep:actor/alarms",
  "wasmkeep:actor/websockets",
  "wasmkeep:actor/config",
  "wasmkeep:actor/log",
];

/** The exports an actor must have: WIT name and the name jco gives it. */
export const ACTOR_EXPORTS: readonly (readonly [wit: string, jco: string])[] = [
  ["on-init", "onInit"],
  ["on-request", "onRequest"],
  ["on-alarm", "onAlarm"],
  ["on-websocket-open", "onWebsocketOpen"],
  ["on-websocket-message", "onWebsocketMessage"],
  ["on-websocket-close", "onWebsocketClose"],
];

/**
 * Imports and exports that may wait (JSPI): the guest's stack is suspended
 * while the host awaits, so a durable write or a call does not block the
 * executor's other actors. jco matches imports by exact
 * `interface@version#function` name (no wildcards) and exports by name.
 */
export const ASYNC_IMPORTS: readonly string[] = [
  "wasmkeep:actor/storage@0.1.0#exec-durable",
  "wasmkeep:actor/storage@0.1.0#delete-self",
  "wasmkeep:actor/actors@0.1.0#call",
];
const ASYNC_EXPORTS = ACTOR_EXPORTS.map(([wit]) => wit);

type TranspileOptions = NonNullable<Parameters<typeof Transpile>[1]>;

/**
 * jco 1.35's `transpile` (through `@bytecodealliance/jco-transpile`) turns
 * JSPI on only for `asyncMode: "jspi"` with the flat `asyncImports` and
 * `asyncExports` lists: it silently drops an `asyncMode` given in
 * js-component-bindgen's own `{ tag: "jspi", val: { imports, exports } }`
 * shape, and the glue is then synchronous (an async import's promise is
 * taken for its result). Typed against jco's options so such a mistake does
 * not compile. `noTypescript` is jco's spelling and is ignored by
 * jco-transpile, which reads `emitTypescriptDeclarations`. A new object each
 * time, since jco fills in the options it is given.
 */
function transpileOptions(): TranspileOptions & { emitTypescriptDeclarations: boolean } {
  return {
    name: "actor",
    instantiation: "async",
    asyncMode: "jspi",
    asyncImports: [...ASYNC_IMPORTS],
    asyncExports: [...ASYNC_EXPORTS],
    noTypescript: true,
    emitTypescriptDeclarations: false,
  };
}

/**
 * Changes whenever the transpile options or the jco version change, so a
 * cache written by another build is not reused.
 */
const TRANSPILE_VERSION = "jco-1.35.0-jspi-3";

/**
 * jco 1.35's glue calls `_debugLog` about a hundred times per event, and
 * each call reads `process.env.JCO_DEBUG`, which in Deno is a call into the
 * runtime: about 25 µs of an 85 µs call of the counter (measured on our
 * machines with jco_cmp in docs/performance.md). The
 * glue's debug log is turned off where it is defined. If jco changes that
 * line, the glue is used as it is (slower, not wrong).
 */
const DEBUG_LOG_CHECK = "if (!globalThis?.process?.env?.JCO_DEBUG) { return; }";

function withoutDebugLog(glue: string): string {
  return glue.replace(DEBUG_LOG_CHECK, "return;");
}

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

interface CachedManifest {
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
    return { glue, coreModules };
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return undefined;
    if (error instanceof SyntaxError) return undefined;
    throw error;
  }
}

async function writeCache(dir: string, glue: string, coreModules: Record<string, Uint8Array>) {
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
 * ```ts ignore
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
  return { className, path, hash, ...cached, ...directFit(cached.coreModules, cached.glue) };
}

/**
 * Reads, checks and transpiles the component at `path` for class
 * `className`, using and filling the cache in `cacheDir`.
 *
 * @example
 * ```ts ignore
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
 * ```ts ignore
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
    return { className, path, hash, ...cached, ...directFit(cached.coreModules, cached.glue) };
  }

  // jco is large (it carries wasm-tools), so it is loaded only when a
  // component is not in the cache yet.
  // deno-lint-ignore no-import-prefix
  const { transpile } = await import("npm:@bytecodealliance/jco@1.35.0");
  let output: Awaited<ReturnType<typeof Transpile>>;
  try {
    output = await transpile(bytes, transpileOptions());
  } catch (error) {
    throw new ComponentError(
      path,
      `is not a valid component: ${String((error as Error).message ?? error)}`,
    );
  }
  const exported = new Set(output.exports.map(([name]) => name));
  const missing = ACTOR_EXPORTS.filter(([, jco]) => !exported.has(jco)).map(([wit]) => wit);
  const foreign = output.imports.filter((name) => !ACTOR_IMPORTS.includes(name));
  if (missing.length > 0 || foreign.length > 0) {
    const parts = [];
    if (missing.length > 0) parts.push(`it lacks the exports ${missing.join(", ")}`);
    if (foreign.length > 0) {
      parts.push(`it imports ${foreign.join(", ")}, which WasmKeep does not provide`);
    }
    throw new ComponentError(
      path,
      `does not target the world wasmkeep:actor/actor: ${parts.join("; ")}`,
    );
  }
  const files = output.files as unknown as Record<string, Uint8Array>;
  const glue = withoutDebugLog(new TextDecoder().decode(files["actor.js"]));
  const coreModules: Record<string, Uint8Array> = {};
  for (const [name, content] of Object.entries(files)) {
    if (name.endsWith(".wasm")) coreModules[name] = content;
  }
  await Deno.mkdir(cacheDir, { recursive: true });
  await writeCache(dir, glue, coreModules);
  return { className, path, hash, glue, coreModules, ...directFit(coreModules, glue) };
}

/** Digits only: the names jco gives the shim's trampolines. */
const TRAMPOLINE = /^\d+$/;

function isShim(core: CoreInterface): boolean {
  return core.importedFunctions.size === 0 && core.otherImports.size === 0 &&
    [...core.exportedFunctions.keys()].every((name) => TRAMPOLINE.test(name)) &&
    [...core.otherExports].every(([, kind]) => kind === "table");
}

function isFixups(core: CoreInterface): boolean {
  return core.exportedFunctions.size === 0 && core.otherExports.size === 0 &&
    [...core.otherImports.values()].every((kind) => kind === "table");
}

/**
 * Whether the component fits the direct bindings: one main core module
 * with the world's exact core signatures, the other modules only the
 * shim and fixups that lower its imports (which the direct bindings replace),
 * and strings in UTF-8 (jco's glue lowers the request's method with the
 * UTF-8 encoder; any UTF-16 lowering rules the component out).
 */
function directFit(
  coreModules: Record<string, Uint8Array>,
  glue: string,
): { directModule?: string; directProblem?: string } {
  let main: string | undefined;
  for (const [name, bytes] of Object.entries(coreModules)) {
    let core: CoreInterface;
    try {
      core = readCoreInterface(bytes);
    } catch (error) {
      return { directProblem: `${name} cannot be read: ${(error as Error).message}` };
    }
    if (core.exportedFunctions.has("on-request")) {
      if (main) return { directProblem: "more than one core module exports on-request" };
      const problem = directBindingsProblem(core);
      if (problem) return { directProblem: problem };
      main = name;
    } else if (!isShim(core) && !isFixups(core)) {
      return { directProblem: `the core module ${name} is neither the actor nor an import shim` };
    }
  }
  if (!main) return { directProblem: "no core module exports on-request" };
  if (!/_utf8AllocateAndEncode\(v0_0,/.test(glue) || /_utf16AllocateAndEncode\(v\d/.test(glue)) {
    return { directProblem: "its strings are not UTF-8" };
  }
  return { directModule: main };
}
