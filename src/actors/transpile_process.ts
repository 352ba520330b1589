/**
 * The process that transpiles one component for the node (component.ts): it
 * reads the component's bytes from stdin to their end, and writes one
 * {@linkcode Transpiled} to stdout in the shape {@linkcode encodeTranspiled}
 * makes. A process of its own, not a Worker: a transpile loads jco (with
 * wasm-tools) and leaves about 45 MB in a process that ran it, which a Worker's
 * end does not give back to the system (docs/performance.md "Idle memory").
 * It ends with its transpile, even when the node died meanwhile (its output
 * pipe is then closed).
 *
 * @module
 */

import { transpileComponent, type Transpiled } from "./component_transpile.ts";

/**
 * Transpiles the component on stdin and writes what it made to stdout; what
 * `wasmkeep __transpile` and `deno run` of this module do.
 *
 * @example
 * ```ts
 * import { runTranspile } from "./transpile_process.ts";
 * await runTranspile(); // the component on stdin, the transpiled result on stdout
 * ```
 */
export async function runTranspile(): Promise<void> {
  const bytes = new Uint8Array(await new Response(Deno.stdin.readable).arrayBuffer());
  let made: Transpiled;
  try {
    made = await transpileComponent(bytes);
  } catch (error) {
    made = {
      ok: false,
      problem: `cannot be transpiled: ${String((error as Error)?.message ?? error)}`,
    };
  }
  const out = encodeTranspiled(made);
  const writer = Deno.stdout.writable.getWriter();
  await writer.write(out);
  await writer.close();
}

/** What precedes the core modules' bytes: the result without them, and their names and sizes. */
type Header =
  | (Omit<Extract<Transpiled, { ok: true }>, "coreModules"> & { modules: [string, number][] })
  | Extract<Transpiled, { ok: false }>;

/**
 * A transpile's result as bytes: a JSON header line, then the core modules'
 * bytes one after the other.
 *
 * @example
 * ```ts
 * import { decodeTranspiled, encodeTranspiled } from "./transpile_process.ts";
 * const made = decodeTranspiled(encodeTranspiled({ ok: false, problem: "is empty" }));
 * console.log(made.ok); // false
 * ```
 */
export function encodeTranspiled(made: Transpiled): Uint8Array {
  if (!made.ok) return new TextEncoder().encode(`${JSON.stringify(made)}\n`);
  const { coreModules, ...rest } = made;
  const modules = Object.entries(coreModules);
  const header: Header = { ...rest, modules: modules.map(([name, bytes]) => [name, bytes.length]) };
  const head = new TextEncoder().encode(`${JSON.stringify(header)}\n`);
  const out = new Uint8Array(
    head.length + modules.reduce((sum, [, bytes]) => sum + bytes.length, 0),
  );
  out.set(head);
  let at = head.length;
  for (const [, bytes] of modules) {
    out.set(bytes, at);
    at += bytes.length;
  }
  return out;
}

/**
 * The result {@linkcode encodeTranspiled} wrote; throws when `bytes` are not
 * in its shape (a transpile process that died half way).
 *
 * @example
 * ```ts
 * import { decodeTranspiled, encodeTranspiled } from "./transpile_process.ts";
 * const bytes = encodeTranspiled({ ok: true, glue: "", coreModules: { "a.wasm": new Uint8Array(2) } });
 * console.log(decodeTranspiled(bytes)); // { ok: true, glue: "", coreModules: { "a.wasm": Uint8Array(2) } }
 * ```
 */
export function decodeTranspiled(bytes: Uint8Array): Transpiled {
  const newline = bytes.indexOf(10);
  if (newline < 0) throw new Error("the transpile's output has no header line");
  const header = JSON.parse(new TextDecoder().decode(bytes.subarray(0, newline))) as Header;
  if (!header.ok) return header;
  const { modules, ...rest } = header;
  const coreModules: Record<string, Uint8Array> = {};
  let at = newline + 1;
  for (const [name, length] of modules) {
    if (at + length > bytes.length) throw new Error("the transpile's output is cut short");
    coreModules[name] = bytes.slice(at, at + length);
    at += length;
  }
  if (at !== bytes.length) throw new Error("the transpile's output is longer than its header says");
  return { ...rest, coreModules };
}

if (import.meta.main) await runTranspile();
