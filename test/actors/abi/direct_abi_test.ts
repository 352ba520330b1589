import assert from "node:assert/strict";
import { readCoreInterface } from "../../../src/actors/abi/core_signatures.ts";
import { directBindingsProblem, instantiateDirect } from "../../../src/actors/abi/direct.ts";
import type { ExecResult } from "../../../src/sqlite/actor_database.ts";
import { loadComponent } from "../../../src/actors/component.ts";
import { COUNTER_WASM, KV_WASM, ROOT, TESTBED_WASM } from "../../../src/testing/node_process.ts";

Deno.test("core signatures are read from a module's binary", async () => {
  const core = readCoreInterface(
    await Deno.readFile(`${ROOT}test/fixtures/components/not_a_component.wasm`),
  );
  assert.deepEqual([...core.exportedFunctions], [["run", "() -> (i32)"]]);
  assert.equal(core.importedFunctions.size, 0);
});

Deno.test("the examples fit the direct bindings; a changed signature does not", async () => {
  const cache = await Deno.makeTempDir();
  try {
    for (
      const [name, path] of [["counter", COUNTER_WASM], ["kv", KV_WASM], ["testbed", TESTBED_WASM]]
    ) {
      const loaded = await loadComponent(name, path, cache);
      assert.equal(loaded.directProblem, undefined, name);
      assert.ok(loaded.directModule, name);
      const core = readCoreInterface(loaded.coreModules[loaded.directModule!]);
      assert.equal(directBindingsProblem(core), undefined);

      const wrongImport = structuredClone(core);
      wrongImport.importedFunctions.set("wasmkeep:actor/storage@0.1.0#exec", "(i32 i32) -> ()");
      assert.match(
        directBindingsProblem(wrongImport)!,
        /exec has the core type \(i32 i32\) -> \(\)/,
      );
      const unknownImport = structuredClone(core);
      unknownImport.importedFunctions.set(
        "wasi:cli/environment@0.2.0#get-environment",
        "(i32) -> ()",
      );
      assert.match(directBindingsProblem(unknownImport)!, /it imports wasi:cli/);
      const wrongExport = structuredClone(core);
      wrongExport.exportedFunctions.set("on-request", "(i32) -> (i32)");
      assert.match(directBindingsProblem(wrongExport)!, /its export on-request has the core type/);
    }
  } finally {
    await Deno.remove(cache, { recursive: true });
  }
});

Deno.test("the direct bindings carry strings, bytes and SQL values both ways, ASCII or not, as the guest's memory grows", async () => {
  const cache = await Deno.makeTempDir();
  try {
    const loaded = await loadComponent("testbed", TESTBED_WASM, cache);
    const module = new WebAssembly.Module(
      loaded.coreModules[loaded.directModule!] as Uint8Array<ArrayBuffer>,
    );
    const statements: string[] = [];
    const result: ExecResult = {
      columns: ["plain", "é"],
      rows: [
        [{ tag: "text", val: "ascii" }, { tag: "text", val: "é✓" }],
        [{ tag: "integer", val: -5n }, { tag: "text", val: "x".repeat(300) }],
      ],
      changes: 0n,
      lastInsertRowid: 0n,
    };
    const fail = () => {
      throw new Error("not used");
    };
    const actor = instantiateDirect(module, {
      exec: (sql) => {
        statements.push(sql);
        return result;
      },
      execDurable: fail,
      inTransaction: () => false,
      deleteSelf: fail,
      self: () => ({ tenant: "default", class: "testbed", name: "é" }),
      call: fail,
      alarmSet: fail,
      alarmGet: () => undefined,
      alarmDelete: fail,
      wsSend: fail,
      wsClose: fail,
      wsConnections: () => [],
      configGet: () => undefined,
      log: () => {},
    });
    await actor.onInit();
    const text = (body: Uint8Array) => new TextDecoder().decode(body);
    for (const sql of ["SELECT 'ascii'", "SELECT 'é✓'", `SELECT '${"y".repeat(300)}'`]) {
      const response = await actor.onRequest({
        method: "GET",
        path: "/sql",
        query: encodeURIComponent(sql),
        headers: [["x-plain", "a"], ["x-latin", "caf\u00e9"]],
        body: new Uint8Array(),
      });
      assert.equal(response.status, 200);
      assert.equal(statements.at(-1), sql);
      const body = text(response.body);
      assert.ok(body.includes("ascii|é✓"), body);
      assert.ok(body.includes("x".repeat(300)), body);
    }
    // Bodies larger than the guest's memory make it grow while lowering.
    for (const size of [0, 10, 100, 300_000, 1_000_000]) {
      const body = new Uint8Array(size).map((_, i) => 97 + (i % 26));
      const response = await actor.onRequest({
        method: "PUT",
        path: "/echo",
        query: "q=%C3%A9&r=é",
        headers: [["x-big", "v".repeat(size % 5000)]],
        body,
      });
      assert.equal(response.status, 200);
      assert.equal(text(response.body), `PUT\n/echo\nq=%C3%A9&r=é\n${text(body)}`);
      assert.ok(response.headers.length > 0);
    }
    const self = await actor.onRequest({
      method: "GET",
      path: "/self",
      query: "",
      headers: [],
      body: new Uint8Array(),
    });
    assert.equal(text(self.body), "default/testbed/é");
  } finally {
    await Deno.remove(cache, { recursive: true });
  }
});
