/**
 * Reads the function signatures a core WebAssembly module imports and
 * exports, from its binary (the JavaScript API does not expose them). Used to
 * check that an actor's main module has exactly the canonical ABI shape the
 * direct bindings expect before they are trusted with it.
 *
 * @module
 */

/** A core function type as text, e.g. `(i32 i32) -> (i32)`. */
export type CoreSignature = string;

/** What a module imports and exports, by name. */
export interface CoreInterface {
  /** `module#name` of each imported function, with its signature. */
  importedFunctions: Map<string, CoreSignature>;
  /** Kinds of the other imports (`table`, `memory`, `global`, `tag`), by `module#name`. */
  otherImports: Map<string, string>;
  /** Each exported function's signature, by export name. */
  exportedFunctions: Map<string, CoreSignature>;
  /** Kinds of the other exports, by name. */
  otherExports: Map<string, string>;
}

const VALUE_TYPES: Record<number, string> = {
  0x7f: "i32",
  0x7e: "i64",
  0x7d: "f32",
  0x7c: "f64",
  0x7b: "v128",
  0x70: "funcref",
  0x6f: "externref",
};
const KINDS = ["function", "table", "memory", "global", "tag"];

class Reader {
  offset = 0;
  constructor(readonly bytes: Uint8Array) {}
  byte(): number {
    if (this.offset >= this.bytes.length) throw new Error("unexpected end of module");
    return this.bytes[this.offset++];
  }
  u32(): number {
    let result = 0;
    let shift = 0;
    while (true) {
      const b = this.byte();
      result += (b & 0x7f) * 2 ** shift;
      if ((b & 0x80) === 0) return result;
      shift += 7;
      if (shift > 35) throw new Error("LEB128 number too long");
    }
  }
  name(): string {
    const length = this.u32();
    const text = new TextDecoder("utf-8", { fatal: true }).decode(
      this.bytes.subarray(this.offset, this.offset + length),
    );
    this.offset += length;
    return text;
  }
  valueType(): string {
    const type = VALUE_TYPES[this.byte()];
    if (!type) throw new Error("a value type this reader does not know");
    return type;
  }
  limits() {
    const flags = this.byte();
    this.u32();
    if (flags & 1) this.u32();
  }
}

/**
 * Reads the imports and exports of the core module `bytes`. Throws for a
 * module using encodings it does not know (GC types, for one): such a module
 * is simply not given the direct bindings.
 *
 * @example
 * ```ts
 * import { readCoreInterface } from "./core_signatures.ts";
 * const shape = readCoreInterface(await Deno.readFile("actor.core.wasm"));
 * shape.exportedFunctions.get("on-init"); // "() -> (i32)"
 * ```
 */
export function readCoreInterface(bytes: Uint8Array): CoreInterface {
  const reader = new Reader(bytes);
  reader.offset = 8;
  const types: CoreSignature[] = [];
  const functionTypes: number[] = [];
  const result: CoreInterface = {
    importedFunctions: new Map(),
    otherImports: new Map(),
    exportedFunctions: new Map(),
    otherExports: new Map(),
  };
  const exports: [string, number, number][] = [];
  while (reader.offset < bytes.length) {
    const id = reader.byte();
    const size = reader.u32();
    const end = reader.offset + size;
    if (id === 1) {
      for (let count = reader.u32(); count > 0; count--) {
        if (reader.byte() !== 0x60) throw new Error("a type that is not a plain function type");
        const params = Array.from({ length: reader.u32() }, () => reader.valueType());
        const results = Array.from({ length: reader.u32() }, () => reader.valueType());
        types.push(`(${params.join(" ")}) -> (${results.join(" ")})`);
      }
    } else if (id === 2) {
      for (let count = reader.u32(); count > 0; count--) {
        const key = `${reader.name()}#${reader.name()}`;
        const kind = reader.byte();
        if (kind === 0) {
          const type = reader.u32();
          functionTypes.push(type);
          result.importedFunctions.set(key, types[type]);
        } else {
          if (kind === 1) {
            reader.byte();
            reader.limits();
          } else if (kind === 2) {
            reader.limits();
          } else if (kind === 3) {
            reader.valueType();
            reader.byte();
          } else if (kind === 4) {
            reader.byte();
            reader.u32();
          } else {
            throw new Error(`an import of unknown kind ${kind}`);
          }
          result.otherImports.set(key, KINDS[kind]);
        }
      }
    } else if (id === 3) {
      for (let count = reader.u32(); count > 0; count--) functionTypes.push(reader.u32());
    } else if (id === 7) {
      for (let count = reader.u32(); count > 0; count--) {
        exports.push([reader.name(), reader.byte(), reader.u32()]);
      }
    }
    reader.offset = end;
  }
  for (const [name, kind, index] of exports) {
    if (kind === 0) result.exportedFunctions.set(name, types[functionTypes[index]]);
    else result.otherExports.set(name, KINDS[kind] ?? `kind ${kind}`);
  }
  return result;
}
