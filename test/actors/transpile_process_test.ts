import assert from "node:assert/strict";
import { decodeTranspiled, encodeTranspiled } from "../../src/actors/transpile_process.ts";
import { COUNTER_WASM, ROOT } from "../../src/testing/node_process.ts";

/** Runs `deno run -A main.ts __transpile` (as a compiled binary runs itself) on `bytes`. */
async function transpileThroughCli(bytes: Uint8Array): Promise<Uint8Array> {
  const child = new Deno.Command(Deno.execPath(), {
    args: ["run", "-A", `${ROOT}main.ts`, "__transpile"],
    stdin: "piped",
    stdout: "piped",
    stderr: "inherit",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(bytes);
  await writer.close();
  const { code, stdout } = await child.output();
  assert.equal(code, 0);
  return stdout;
}

Deno.test("a transpile's result goes through its encoding whole, and a cut one is refused", () => {
  const made = {
    ok: true as const,
    glue: "export {};\n// ünïcode",
    coreModules: {
      "actor.core.wasm": new Uint8Array([0, 97, 115, 109]),
      "b.wasm": new Uint8Array(),
    },
    directModule: "actor.core.wasm",
  };
  const bytes = encodeTranspiled(made);
  assert.deepEqual(decodeTranspiled(bytes), made);
  assert.throws(() => decodeTranspiled(bytes.subarray(0, bytes.length - 1)), /cut short/);
  assert.deepEqual(decodeTranspiled(encodeTranspiled({ ok: false, problem: "x" })), {
    ok: false,
    problem: "x",
  });
});

Deno.test("the CLI's hidden __transpile transpiles the component on stdin, and says why it refuses one", async () => {
  const made = decodeTranspiled(await transpileThroughCli(await Deno.readFile(COUNTER_WASM)));
  assert.ok(made.ok);
  assert.ok(made.ok && made.directModule && made.coreModules[made.directModule].length > 0);
  assert.ok(made.ok && made.glue.includes("instantiate"));
  const refused = decodeTranspiled(await transpileThroughCli(new Uint8Array([1, 2, 3])));
  assert.equal(refused.ok, false);
  assert.match(refused.ok ? "" : refused.problem, /is not a valid component/);
});
