/**
 * What an executor runs for an actor class: a program that makes an
 * instance from the host's imports. A real node's programs are components
 * (the direct bindings of abi/direct.ts, or jco's glue for the others); the
 * simulator gives the runtime a program of its own instead, so that the
 * runtime it runs is the one that ships.
 *
 * @module
 */

import type { ExecutorClass } from "../actors/protocol.ts";
import {
  type ActorExportCalls,
  type ActorImports,
  instantiateDirect,
} from "../actors/abi/direct.ts";

/** An actor class as the runtime runs it. */
export interface ActorProgram {
  /** The class as the node sent it: its name, code version (`hash`) and configuration. */
  spec: ExecutorClass;
  /** A new instance over `imports` (on-init is the runtime's to call). */
  instantiate(imports: ActorImports): Promise<ActorExportCalls>;
}

interface GlueModule {
  instantiate(
    getCoreModule: (name: string) => WebAssembly.Module,
    imports: Record<string, Record<string, unknown>>,
  ): Promise<ActorExportCalls>;
}

/**
 * The program of a component class: its core modules compiled, and jco's
 * glue imported when the direct bindings do not fit it.
 *
 * @example
 * ```ts
 * import { componentProgram } from "./program.ts";
 * import type { ExecutorInit } from "../actors/protocol.ts";
 * declare const init: ExecutorInit;
 * const programs = await Promise.all(init.classes.map(componentProgram));
 * ```
 */
export async function componentProgram(spec: ExecutorClass): Promise<ActorProgram> {
  const modules = new Map<string, WebAssembly.Module>();
  for (const [name, bytes] of Object.entries(spec.coreModules)) {
    if (spec.directModule && name !== spec.directModule) continue;
    modules.set(name, new WebAssembly.Module(bytes as Uint8Array<ArrayBuffer>));
  }
  const direct = spec.directModule;
  if (direct) {
    const module = modules.get(direct)!;
    // A promise's executor turns a link error thrown at once into a rejection.
    return {
      spec,
      instantiate: (imports) =>
        new Promise((resolve) => resolve(instantiateDirect(module, imports))),
    };
  }
  // The glue is generated at run time, so it is imported from memory: a
  // compiled binary has no source tree to import it from.
  const url = URL.createObjectURL(new Blob([spec.glue], { type: "text/javascript" }));
  let glue: GlueModule;
  try {
    glue = await import(url) as GlueModule;
  } finally {
    URL.revokeObjectURL(url);
  }
  return {
    spec,
    instantiate: (imports) => glue.instantiate((name) => modules.get(name)!, jcoImports(imports)),
  };
}

/** The same imports in the nested, camel-cased shape jco's glue asks for. */
function jcoImports(host: ActorImports): Record<string, Record<string, unknown>> {
  return {
    "wasmkeep:actor/storage": {
      exec: host.exec,
      execDurable: host.execDurable,
      inTransaction: host.inTransaction,
      deleteSelf: host.deleteSelf,
    },
    "wasmkeep:actor/actors": { self: host.self, call: host.call },
    "wasmkeep:actor/alarms": { set: host.alarmSet, get: host.alarmGet, delete: host.alarmDelete },
    "wasmkeep:actor/websockets": {
      send: host.wsSend,
      close: host.wsClose,
      connections: host.wsConnections,
    },
    "wasmkeep:actor/config": { get: host.configGet },
    "wasmkeep:actor/log": { log: host.log },
  };
}
