import assert from "node:assert/strict";
import { readCoreInterface } from "../../src/actors/abi/core_signatures.ts";
import { directBindingsProblem } from "../../src/actors/abi/direct.ts";
import { loadComponent } from "../../src/actors/component.ts";
import { COUNTER_WASM, KV_WASM, ROOT, TESTBED_WASM } from "../helpers/node_process.ts";

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
