/**
 * The tasks README.md's Development section shows, run on a clean clone (the
 * checkout's files copied outside the repository): the simulator, the
 * benchmark's short run, and the compile task offline. Apart from
 * commands_test.ts so that `deno test --parallel` runs the two at once.
 *
 * @module
 */

import assert from "node:assert/strict";
import { cleanClone, command, markedBlock, runLine } from "./doc_commands.ts";
import { freePort } from "../../src/testing/loopback.ts";
import { cachedDenortPath, findDenort, offlineMessage } from "../../cli/check_denort.ts";

const clone = await cleanClone();
globalThis.addEventListener("unload", () => Deno.removeSync(clone, { recursive: true }));

Deno.test("README: deno task sim --seeds 5 and deno task bench --quick pass on a clean clone", async () => {
  const lines = await markedBlock("README.md", "development");
  const run = ["deno task sim --seeds 5", "deno task bench --quick"];
  // CI runs these around this test (test, fmt, lint, check), and the full
  // benchmark is the long run --quick stands for.
  const notRun = [
    "deno task test",
    "deno task fmt && deno task lint && deno task check",
    "deno task bench",
  ];
  assert.deepEqual(lines.map(command).sort(), [...run, ...notRun].sort());
  const [sim, bench] = await Promise.all(run.map((line) => runLine(line, clone)));
  assert.equal(sim.code, 0, sim.stdout.slice(-2000) + sim.stderr.slice(-2000));
  assert.match(sim.stdout, /^5 seeds from 1: 0 failed/m);
  assert.equal(bench.code, 0, bench.stderr.slice(-3000));
  assert.match(bench.stdout, /^--quick: a short run/m);
  assert.match(bench.stdout, /WasmKeep per resident actor/);
});

/** A DENO_DIR holding the machine's own caches (linked), all but the downloads `dl/`. */
async function denoDirWithoutDenort(): Promise<string> {
  const info = await new Deno.Command(Deno.execPath(), {
    args: ["info", "--json"],
    stdout: "piped",
  })
    .output();
  const real: string = JSON.parse(new TextDecoder().decode(info.stdout)).denoDir;
  const dir = await Deno.makeTempDir({ prefix: "wasmkeep-deno-dir-" });
  for await (const entry of Deno.readDir(real)) {
    if (entry.name !== "dl") await Deno.symlink(`${real}/${entry.name}`, `${dir}/${entry.name}`);
  }
  return dir;
}

Deno.test("README: deno task compile, offline and without DENORT_BIN, prints the documented line and makes no dist/", async () => {
  const [documented] = await markedBlock("README.md", "compile-offline");
  // Offline: a DENO_DIR with the machine's caches but no denort kept (no dl/),
  // and a proxy nothing listens on.
  const denoDir = await denoDirWithoutDenort();
  const env = {
    DENO_DIR: denoDir,
    HTTPS_PROXY: `http://127.0.0.1:${freePort()}`,
    DENORT_BIN: "",
  };
  try {
    const out = await runLine("deno task compile", clone, env);
    assert.equal(out.code, 1, out.stderr);
    assert.ok(
      out.stderr.includes(documented.replaceAll("2.9.6", Deno.version.deno)),
      `not the documented line:\n${out.stderr}`,
    );
    await assert.rejects(Deno.stat(`${clone}/dist`), Deno.errors.NotFound);
  } finally {
    await Deno.remove(denoDir, { recursive: true });
  }
});

Deno.test("the compile task's check finds denort where deno compile does: DENORT_BIN, then DENO_DIR, then dl.deno.land", async () => {
  const dir = await Deno.makeTempDir({ prefix: "wasmkeep-denort-" });
  const probe = {
    denoDir: dir,
    version: "2.9.6",
    target: "x86_64-unknown-linux-gnu",
    reachable: () => Promise.resolve(false),
  };
  try {
    assert.deepEqual(await findDenort(probe), { ok: false, message: offlineMessage("2.9.6") });
    const asked: string[] = [];
    const online = await findDenort({
      ...probe,
      reachable: (url) => (asked.push(url), Promise.resolve(true)),
    });
    assert.equal(online.ok && online.from, "dl.deno.land");
    assert.deepEqual(asked, [
      "https://dl.deno.land/release/v2.9.6/denort-x86_64-unknown-linux-gnu.zip",
    ]);
    const cached = cachedDenortPath(dir, "2.9.6", "x86_64-unknown-linux-gnu");
    await Deno.mkdir(cached.slice(0, cached.lastIndexOf("/")), { recursive: true });
    await Deno.writeFile(cached, new Uint8Array([0x50, 0x4b]));
    assert.deepEqual(await findDenort(probe), { ok: true, from: "DENO_DIR", where: cached });
    await Deno.writeFile(`${dir}/denort`, new Uint8Array([0x7f]));
    assert.deepEqual(await findDenort({ ...probe, denortBin: `${dir}/denort` }), {
      ok: true,
      from: "DENORT_BIN",
      where: `${dir}/denort`,
    });
    const missing = await findDenort({ ...probe, denortBin: `${dir}/nope` });
    assert.ok(!missing.ok && missing.message.includes(`DENORT_BIN names ${dir}/nope`));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
