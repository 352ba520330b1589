import assert from "node:assert/strict";
import { COUNTER_WASM, ROOT } from "../../../src/testing/node_process.ts";
import { until } from "../../helpers/until.ts";

/**
 * The transpile process can die on its own (the kernel's out-of-memory
 * killer picks it, as the largest process of a huge component's transpile):
 * `serve` must stop with one line naming the component, not a stack trace.
 */
Deno.test("serve stops with one line naming the component when its transpile process is killed", async () => {
  const dataDir = await Deno.makeTempDir();
  try {
    const node = new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        `${ROOT}main.ts`,
        "serve",
        "--actor",
        `counter=${COUNTER_WASM}`,
        "--data-dir",
        dataDir,
        "--listen",
        "127.0.0.1:0",
      ],
      stdout: "null",
      stderr: "piped",
    }).spawn();
    const output = node.output();
    try {
      let transpile: number | undefined;
      await until(
        "the transpile process",
        () => (transpile = transpileChild(node.pid)) !== undefined,
        {
          ms: 30_000,
          everyMs: 10,
        },
      );
      Deno.kill(transpile!, "SIGKILL");
    } catch (error) {
      node.kill("SIGKILL");
      await output;
      throw error;
    }
    const { code, stderr } = await output;
    const text = new TextDecoder().decode(stderr);
    assert.equal(code, 1, text);
    assert.match(
      text,
      /^wasmkeep: [^\n]*counter\.wasm: cannot be transpiled: the transpile process failed: [^\n]*SIGKILL[^\n]*\n$/,
    );
  } finally {
    await Deno.remove(dataDir, { recursive: true });
  }
});

/** The pid of `parent`'s transpile process, once it runs. */
function transpileChild(parent: number): number | undefined {
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      const stat = Deno.readTextFileSync(`/proc/${entry.name}/stat`);
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (ppid !== parent) continue;
      const cmdline = Deno.readTextFileSync(`/proc/${entry.name}/cmdline`);
      if (cmdline.includes("transpile_process")) return Number(entry.name);
    } catch {
      // Gone meanwhile.
    }
  }
  return undefined;
}

Deno.test("serve refuses a component wasm-tools cannot read with one line naming the file and the cause", async () => {
  const dir = await Deno.makeTempDir();
  try {
    // A component's header, then bytes that end in the middle of a section.
    const broken = `${dir}/broken.wasm`;
    await Deno.writeFile(
      broken,
      new Uint8Array([0, 0x61, 0x73, 0x6d, 0x0d, 0, 1, 0, 1, 2, 3, 0x67, 0x61, 0x72]),
    );
    const { code, stderr } = await new Deno.Command(Deno.execPath(), {
      args: [
        "run",
        "-A",
        `${ROOT}main.ts`,
        "serve",
        "--actor",
        `counter=${broken}`,
        "--data-dir",
        `${dir}/data`,
        "--listen",
        "127.0.0.1:0",
      ],
      stdout: "null",
      stderr: "piped",
      signal: AbortSignal.timeout(60_000),
    }).output();
    const text = new TextDecoder().decode(stderr);
    assert.equal(code, 1, text);
    assert.match(
      text,
      /^wasmkeep: [^\n]*broken\.wasm: is not a valid component: [^\n]+: unexpected end-of-file[^\n]*\n$/,
    );
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
