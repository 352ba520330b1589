import assert from "node:assert/strict";
import { type ActorExportCalls, GuestError } from "../../src/actors/abi/direct.ts";
import { ASYNC_IMPORTS, loadComponent } from "../../src/actors/component.ts";
import type { ActorRequest } from "../../src/actors/protocol.ts";
import { TESTBED_WASM } from "../../src/testing/node_process.ts";

interface Glue {
  instantiate(
    getCoreModule: (name: string) => WebAssembly.Module,
    imports: Record<string, Record<string, unknown>>,
  ): Promise<ActorExportCalls>;
}

const utf8 = new TextDecoder();

function get(path: string): ActorRequest {
  return { method: "GET", path, query: "", headers: [], body: new Uint8Array() };
}

/** Resolves on a later turn of the event loop, so the guest must really wait. */
function later<T>(value: () => T): Promise<T> {
  return new Promise((resolve, reject) =>
    setTimeout(() => {
      try {
        resolve(value());
      } catch (error) {
        reject(error);
      }
    }, 5)
  );
}

const EXEC_RESULT = { columns: [], rows: [], changes: 1n, lastInsertRowid: 1n };

/**
 * The host imports in the shape executor_main.ts's jcoImports gives them,
 * with the three that may wait answering through promises.
 */
function imports(fail: boolean): Record<string, Record<string, unknown>> {
  const refuse = (payload: unknown) => () => {
    throw new GuestError(payload);
  };
  return {
    "wasmkeep:actor/storage": {
      exec: () => EXEC_RESULT,
      inTransaction: () => false,
      execDurable: () =>
        later(fail ? refuse({ code: "busy", message: "durable refused" }) : () => EXEC_RESULT),
      deleteSelf: () =>
        later(fail ? refuse({ code: "busy", message: "delete refused" }) : () => undefined),
    },
    "wasmkeep:actor/actors": {
      self: () => ({ tenant: "default", class: "testbed", name: "x" }),
      call: () =>
        later(
          fail ? refuse("call refused") : () => ({
            status: 203,
            headers: [],
            body: new TextEncoder().encode("from the callee"),
          }),
        ),
    },
    "wasmkeep:actor/alarms": { set: () => {}, get: () => undefined, delete: () => {} },
    "wasmkeep:actor/websockets": { send: () => {}, close: () => {}, connections: () => [] },
    "wasmkeep:actor/config": { get: () => undefined },
    "wasmkeep:actor/log": { log: () => {} },
  };
}

Deno.test("jco's glue suspends the guest on exec-durable, delete-self and call", async () => {
  const cache = await Deno.makeTempDir();
  try {
    const loaded = await loadComponent("testbed", TESTBED_WASM, cache);
    // Each import that may wait is marked for JSPI, and the exports are promising.
    for (const name of ASYNC_IMPORTS) {
      const [iface, fn] = name.split("#");
      const camel = fn.replace(/-(\w)/g, (_, c: string) => c.toUpperCase());
      const marked = new RegExp(
        `(_trampoline\\d+)\\.fnName = '${iface}#${camel}';\\s*\\1\\.manuallyAsync = true;`,
      );
      assert.match(loaded.glue, marked, `${name} is not marked async in the glue`);
    }
    assert.match(loaded.glue, /WebAssembly\.promising\(exports\d+\['on-request'\]\)/);

    const modules = new Map(
      Object.entries(loaded.coreModules).map((
        [name, bytes],
      ) => [name, new WebAssembly.Module(bytes as Uint8Array<ArrayBuffer>)]),
    );
    const url = URL.createObjectURL(new Blob([loaded.glue], { type: "text/javascript" }));
    let glue: Glue;
    try {
      glue = await import(url) as Glue;
    } finally {
      URL.revokeObjectURL(url);
    }

    const ok = await glue.instantiate((name) => modules.get(name)!, imports(false));
    await ok.onInit();
    const answers: [string, number, string][] = [];
    for (const path of ["/durable", "/delete", "/call"]) {
      const response = await ok.onRequest(get(path));
      answers.push([path, response.status, utf8.decode(response.body)]);
    }
    assert.deepEqual(answers, [
      ["/durable", 200, "ok"],
      ["/delete", 200, "deleted"],
      ["/call", 203, "from the callee"],
    ]);

    const failing = await glue.instantiate((name) => modules.get(name)!, imports(true));
    await failing.onInit();
    answers.length = 0;
    for (const path of ["/durable", "/delete", "/call"]) {
      const response = await failing.onRequest(get(path));
      answers.push([path, response.status, utf8.decode(response.body)]);
    }
    assert.deepEqual(answers, [
      ["/durable", 500, "durable refused"],
      ["/delete", 500, "delete refused"],
      ["/call", 502, "call refused"],
    ]);
  } finally {
    await Deno.remove(cache, { recursive: true });
  }
});
