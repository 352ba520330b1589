import assert from "node:assert/strict";
import { openBucket } from "../../../src/bucket/open.ts";
import { readCurrent } from "../../../src/deploy/app_objects.ts";
import { COUNTER_WASM, KV_WASM, runWasmkeep } from "../../../src/testing/node_process.ts";
import { onBucket } from "../../helpers/bucket_target.ts";
import { snapshot } from "../../deploy/hooked_bucket.ts";

const SHOP = { tenant: "acme", app: "shop" };

/** Runs the whole sequence against one bucket URL, reached with `env`. */
async function deployCycle(url: string, env: Record<string, string>, dir: string) {
  const run = (...args: string[]) => runWasmkeep(["deploy", ...args], env);
  const base = ["--app", "acme/shop", "--bucket", url];
  const secret = "value-that-must-never-be-printed";
  await Deno.writeTextFile(`${dir}/counter.env`, `GREETING=hello\nADMIN_TOKEN=${secret}\n`);

  const first = await run(
    ...base,
    "--actor",
    `counter=${COUNTER_WASM}`,
    "--access",
    "counter=existing:main",
    "--config",
    `counter=${dir}/counter.env`,
    "--requires",
    "counter=ADMIN_TOKEN,GREETING",
  );
  assert.equal(first.code, 0, first.stderr);
  assert.match(first.stdout, /^class counter: added \(code [0-9a-f]{12}, \d+ bytes\)$/m);
  assert.match(first.stdout, /^class counter: rule open -> existing:main$/m);
  assert.match(first.stdout, /^class counter: configuration ADMIN_TOKEN, GREETING added$/m);
  assert.match(
    first.stdout,
    /^class counter: required names ADMIN_TOKEN, GREETING \(were none\)$/m,
  );
  assert.match(
    first.stdout,
    /^acme\/shop: version [0-9a-f]{16} \(seq 1\) is current \(its first version\)$/m,
  );
  assert.match(
    first.stderr,
    /^warning: class counter: configuration ADMIN_TOKEN looks like a secret; /m,
  );
  assert.ok(!(first.stdout + first.stderr).includes(secret));

  const same = await run(...base, "--actor", `counter=${COUNTER_WASM}`);
  assert.equal(same.code, 0, same.stderr);
  assert.match(
    same.stdout,
    /^nothing changed: acme\/shop stays at version [0-9a-f]{16} \(seq 1\); no version written$/m,
  );

  const second = await run(...base, "--actor", `counter=${KV_WASM}`);
  assert.equal(second.code, 0, second.stderr);
  assert.match(second.stdout, /^class counter: code changed [0-9a-f]{12} -> [0-9a-f]{12}$/m);
  assert.match(second.stdout, /\(seq 2\) is current \(was [0-9a-f]{16} \(seq 1\)\)$/m);

  // A broken component: refused before any upload, the bucket byte for byte as it was.
  const bucket = openBucket(url, { env });
  try {
    const before = await snapshot(bucket);
    await Deno.writeTextFile(`${dir}/x.wasm`, "this is text\n");
    const broken = await run(...base, "--actor", `counter=${dir}/x.wasm`);
    assert.equal(broken.code, 1);
    assert.equal(
      broken.stderr.trim(),
      `wasmkeep: deploy acme/shop: refused, nothing uploaded: ${dir}/x.wasm: is not a WebAssembly file (no \\0asm header)`,
    );
    assert.deepEqual(await snapshot(bucket), before);

    const back = await run(...base, "--rollback");
    assert.equal(back.code, 0, back.stderr);
    assert.match(
      back.stdout,
      /^rolled back acme\/shop to the content of version [0-9a-f]{16} \(seq 1\), from [0-9a-f]{16} \(seq 2\)$/m,
    );
    assert.match(back.stdout, /\(seq 3\) is current/);
    const current = await readCurrent(bucket, SHOP);
    assert.equal(current?.current.seq, 3);

    const none = await run(...base, "--rollback");
    assert.equal(none.code, 1);
    assert.match(
      none.stderr,
      /^wasmkeep: deploy acme\/shop: no version before the current one [0-9a-f]{16} \(seq 3\) to roll back to$/m,
    );

    // The rule in force is existing:main; v1's was too, so nothing reopens. Open it, then roll back.
    const opened = await run(...base, "--access", "counter=open");
    assert.equal(opened.code, 0, opened.stderr);
    const closing = await run(...base, "--access", "counter=internal");
    assert.equal(closing.code, 0, closing.stderr);
    const reopen = await run(...base, "--rollback");
    assert.equal(reopen.code, 1);
    assert.match(
      reopen.stderr,
      /would make class counter more open: its rule is internal now and open in [0-9a-f]{16}; give --allow-reopen/,
    );
    const allowed = await run(...base, "--rollback", "--allow-reopen");
    assert.equal(allowed.code, 0, allowed.stderr);
    assert.match(allowed.stdout, /^class counter: rule internal -> open$/m);

    const other = await run(
      "--app",
      "acme/admin",
      "--bucket",
      url,
      "--actor",
      `counter=${COUNTER_WASM}`,
    );
    assert.equal(other.code, 1);
    assert.match(
      other.stderr,
      /^wasmkeep: deploy acme\/admin: app acme\/shop of tenant acme is deployed on this prefix/m,
    );

    const unknown = await run(...base, "--access", "hub=internal");
    assert.equal(unknown.code, 2);
    assert.match(
      unknown.stderr,
      /^wasmkeep: --access hub=\.\.\.: no class 'hub' in the current version \(counter\) and no --actor gives it$/m,
    );
  } finally {
    await bucket.close();
  }
}

Deno.test("deploy, redeploy, rollback and refusals through the CLI on a file bucket", () =>
  onBucket("file", "prod", (bucket, dir) => deployCycle(bucket.url, bucket.env, dir)));

Deno.test("deploy, redeploy, rollback and refusals through the CLI on moto", () =>
  onBucket("moto", "prod", async (bucket, dir) => {
    await deployCycle(bucket.url, bucket.env, dir);
    // Another prefix is another cluster: the same tenant may deploy another app there.
    const elsewhere = await runWasmkeep([
      "deploy",
      "--app",
      "acme/admin",
      "--bucket",
      bucket.at("admin"),
      "--actor",
      `counter=${COUNTER_WASM}`,
    ], bucket.env);
    assert.equal(elsewhere.code, 0, elsewhere.stderr);
  }));

Deno.test("deploy's usage errors exit 2 naming the flag", async () => {
  const dir = await Deno.makeTempDir({ prefix: "wk-deploy-cli-" });
  const url = `file://${dir}/bucket`;
  try {
    const app = ["--app", "acme/shop", "--bucket", url];
    const cases: [string[], RegExp][] = [
      [["--bucket", url, "--actor", `counter=${COUNTER_WASM}`], /deploy needs --app TENANT\/APP/],
      [["--app", "acme/shop"], /deploy needs --bucket URL/],
      [["--app", "acme", "--bucket", url], /--app must be TENANT\/APP, not 'acme'/],
      [
        [...app, "--rollback", "--actor", `counter=${COUNTER_WASM}`],
        /--rollback .* takes no --actor/,
      ],
      [[...app, "--allow-reopen"], /--allow-reopen goes with --rollback/],
      [
        [...app, "--access", "counter=closed"],
        /--access counter=closed: 'closed' is not an access rule/,
      ],
      [[...app, "--access", "counter"], /--access must be CLASS=RULE, not 'counter'/],
      [[...app, "--config", `counter=${dir}/none.env`], /--config counter=.*: cannot read/],
      [[...app, "--requires", "counter=A,9B"], /'9B' is not a name/],
      [
        [...app, "--actor", `counter=${COUNTER_WASM}`, "--actor", `counter=${KV_WASM}`],
        /--actor names class 'counter' twice/,
      ],
      [[...app, "--version-retention-secs", "-1"], /--version-retention-secs/],
      [
        ["--app", "acme/9shop", "--bucket", url, "--actor", `counter=${COUNTER_WASM}`],
        /the app name '9shop' must match/,
      ],
      [[...app], /the first deploy of acme\/shop needs at least one --actor CLASS=PATH/],
      [[...app, "extra"], /deploy takes no arguments, got 'extra'/],
    ];
    for (const [args, message] of cases) {
      const result = await runWasmkeep(["deploy", ...args]);
      assert.equal(result.code, 2, `${args.join(" ")}: ${result.stderr}`);
      assert.match(result.stderr, message);
      assert.match(result.stderr, /^wasmkeep: /);
    }
    // Nothing was written by any of them.
    const listed = await Array.fromAsync(Deno.readDir(dir));
    assert.deepEqual(listed.map((e) => e.name), []);
    const help = await runWasmkeep(["deploy", "--help"]);
    assert.equal(help.code, 0);
    assert.match(help.stdout, /^Usage: wasmkeep deploy --app TENANT\/APP --bucket URL/);
    const main = await runWasmkeep(["--help"]);
    assert.match(main.stdout, /^ {2}deploy {5}/m);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
