/**
 * `--app` names on the command line: the name `serve` and `deploy` refuse
 * first, and the name a first deploy refuses, get one message with one
 * rule, so a name the first message allows is one the deploy takes.
 */

import assert from "node:assert/strict";
import { COUNTER_WASM, runWasmkeep } from "../../../src/testing/node_process.ts";

const RULE =
  "must match [a-z][a-z0-9-]{0,63} (a lower-case letter, then lower-case letters, digits or '-')";

Deno.test("--app names: serve and deploy refuse a name outside the rule with one message, and a first deploy the same", async () => {
  const dir = await Deno.makeTempDir({ prefix: "wk-app-name-" });
  const url = `file://${dir}/bucket`;
  try {
    const deploy = (app: string) =>
      runWasmkeep(["deploy", "--app", app, "--bucket", url, "--actor", `counter=${COUNTER_WASM}`]);
    for (
      const [run, app, part] of [
        [() => runWasmkeep(["serve", "--app", "Acme/Site"]), "Acme/Site", "Acme"],
        [() => deploy("Acme/Site"), "Acme/Site", "Acme"],
        [() => deploy("acme_x/site"), "acme_x/site", "acme_x"],
        [() => deploy("acme/site_x"), "acme/site_x", "site_x"],
      ] as const
    ) {
      const { code, stderr } = await run();
      assert.equal(code, 2, stderr);
      const what = part === app.split("/")[0] ? "tenant" : "app";
      assert.equal(
        stderr,
        `wasmkeep: --app must be TENANT/APP, not '${app}': the ${what} name '${part}' ${RULE}\n`,
      );
    }
    // Nothing was written; the name the rule allows is deployed.
    assert.deepEqual(await Array.fromAsync(Deno.readDir(dir)), []);
    const deployed = await deploy("acme-x/site");
    assert.equal(deployed.code, 0, deployed.stderr);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
