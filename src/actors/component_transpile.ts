/**
 * The transpile of a component by jco, and what its output must show: the
 * world's exports, only the world's imports, and whether the direct
 * bindings fit it. Run in a process of its own (transpile_process.ts),
 * since a large component takes jco seconds.
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

/** What a transpile made of a component, or why it refused it. */
export type Transpiled =
  | {
    ok: true;
    /** jco's instantiation-mode glue, as JavaScript source. */
    glue: string;
    /** The core modules the glue asks for, by file name. */
    coreModules: Record<string, Uint8Array>;
    directModule?: string;
    directProblem?: string;
  }
  | { ok: false; problem: string };

/**
 * Transpiles a component's `bytes` and checks them against the world
 * `wasmkeep:actor/actor`, in this thread.
 *
 * @example
 * ```ts
 * import { transpileComponent } from "./component_transpile.ts";
 * const made = await transpileComponent(await Deno.readFile("counter.wasm"));
 * if (!made.ok) console.log(made.problem);
 * ```
 */
export async function transpileComponent(bytes: Uint8Array): Promise<Transpiled> {
  // jco is large (it carries wasm-tools), so it is loaded only when a
  // component is not in the cache yet.
  // deno-lint-ignore no-import-prefix
  const { transpile } = await import("npm:@bytecodealliance/jco@1.35.0");
  let output: Awaited<ReturnType<typeof Transpile>>;
  try {
    output = await transpile(bytes, transpileOptions());
  } catch (error) {
    return { ok: false, problem: `is not a valid component: ${oneLine(error)}` };
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
    return {
      ok: false,
      problem: `does not target the world wasmkeep:actor/actor: ${parts.join("; ")}`,
    };
  }
  const files = output.files as unknown as Record<string, Uint8Array>;
  const glue = withoutDebugLog(new TextDecoder().decode(files["actor.js"]));
  const coreModules: Record<string, Uint8Array> = {};
  for (const [name, content] of Object.entries(files)) {
    if (name.endsWith(".wasm")) coreModules[name] = content;
  }
  return { ok: true, glue, coreModules, ...directFit(coreModules, glue) };
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

/**
 * wasm-tools' error on one line: its "Caused by:" chain joined with ": ",
 * so that the refusal stays the CLI's one line.
 */
function oneLine(error: unknown): string {
  return String((error as Error)?.message ?? error)
    .split("\n")
    .map((line) => line.trim())
    .filter((line) => line !== "" && line !== "Caused by:")
    .map((line) => line.replace(/^\d+: /, ""))
    .join(": ");
}
