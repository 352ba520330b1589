import assert from "node:assert/strict";
import { COUNTER_WASM, ROOT, runWasmkeep } from "../../../src/testing/node_process.ts";

Deno.test("usage errors exit 2 naming the flag", async () => {
  for (
    const [args, message] of [
      [["serve", "--bogus"], /unknown flag --bogus for 'serve'/],
      [
        ["serve", "--actor", `counter=${COUNTER_WASM}`, "--event-timeout-secs", "soon"],
        /--event-timeout-secs must be a whole number, not 'soon'/,
      ],
      [["serve", "--actor", "counter"], /--actor must be CLASS=PATH, not 'counter'/],
      [
        ["serve", "--actor", `Counter=${COUNTER_WASM}`],
        /--actor Counter=.*: a class name is lower-case/,
      ],
      [["serve"], /serve needs at least one actor class: --actor CLASS=PATH/],
      [
        ["serve", "--actor", `counter=${COUNTER_WASM}`, "--listen", "nowhere"],
        /--listen must be HOST:PORT/,
      ],
      [
        ["serve", "--actor", `counter=${COUNTER_WASM}`, "--node-id", "Bad_Id"],
        /--node-id must be lower-case/,
      ],
      [
        ["serve", "--actor", `counter=${COUNTER_WASM}`, "--bucket", "ftp://x"],
        /--bucket must be s3:\/\/BUCKET/,
      ],
      [
        ["serve", "--actor", `counter=${COUNTER_WASM}`, "--config", "other=x.env"],
        /no --actor gives class 'other'/,
      ],
      [
        ["serve", "--actor", `counter=${COUNTER_WASM}`, "--max-queued-events", "0"],
        /--max-queued-events must be at least 1/,
      ],
      [
        ["serve", "--actor", `counter=${COUNTER_WASM}`, "--max-body-bytes", "40000000"],
        /--max-body-bytes must be at most 33554432/,
      ],
      [
        ["serve", "--actor", `counter=${COUNTER_WASM}`, "--event-timeout-secs", "2147484"],
        /--event-timeout-secs must be at most 86400/,
      ],
      [
        ["serve", "--actor", `counter=${COUNTER_WASM}`, "--max-socket-message-bytes", "16777217"],
        /--max-socket-message-bytes must be at most 16777216/,
      ],
      [
        ["serve", "--actor", `counter=${COUNTER_WASM}`, "--max-socket-message-bytes", "0"],
        /--max-socket-message-bytes must be at least 1/,
      ],
      [
        ["serve", "--actor", `counter=${COUNTER_WASM}`, "--executors", "3000"],
        /--executors must be at most 256/,
      ],
      [
        ["serve", "--actor", `counter=${COUNTER_WASM}`, "--lease-ttl-secs", "5"],
        /--lease-ttl-secs needs --bucket/,
      ],
      [
        ["serve", "--actor", `counter=${COUNTER_WASM}`, "--failover-wait-secs", "5"],
        /--failover-wait-secs needs --bucket/,
      ],
      [
        ["serve", "--actor", `counter=${COUNTER_WASM}`, "--node-id", "a", "--bucket", "file:///b"],
        /--node-id without --cluster-listen needs --cluster-plaintext accept/,
      ],
      [
        [
          "serve",
          "--actor",
          `counter=${COUNTER_WASM}`,
          "--node-id",
          "a",
          "--bucket",
          "file:///b",
          "--cluster-listen",
          "0.0.0.0:7443",
        ],
        /--cluster-listen needs --cluster-advertise https:\/\/HOST:PORT/,
      ],
      [
        [
          "serve",
          "--actor",
          `counter=${COUNTER_WASM}`,
          "--node-id",
          "a",
          "--bucket",
          "file:///b",
          "--cluster-listen",
          "0.0.0.0:7443",
          "--cluster-advertise",
          "http://10.0.0.11:7443",
        ],
        /--cluster-advertise must be https:\/\/HOST:PORT/,
      ],
      [
        [
          "serve",
          "--actor",
          `counter=${COUNTER_WASM}`,
          "--bucket",
          "file:///b",
          "--cluster-listen",
          "0.0.0.0:7443",
          "--cluster-advertise",
          "https://10.0.0.11:7443",
        ],
        /--cluster-listen and --cluster-advertise go only with --node-id/,
      ],
      [
        ["serve", "--actor", `counter=${COUNTER_WASM}`, "--access", "counter=closed"],
        /--access counter=closed: 'closed' is not an access rule: open, existing, existing:NAME or internal/,
      ],
      [
        ["serve", "--app", "acme/shop", "--actor", `counter=${COUNTER_WASM}`],
        /--actor counter=.*: a node following --app acme\/shop serves the classes its deploys give \(wasmkeep deploy --app acme\/shop/,
      ],
      [
        ["serve", "--app", "acme/shop", "--config", "counter=x.env"],
        /--config counter=x.env: a node following --app acme\/shop reads .*node-local values go in --env FILE/,
      ],
      [["serve", "--app", "acme"], /--app must be TENANT\/APP, not 'acme'/],
      [["frobnicate"], /unknown command 'frobnicate'/],
    ] as const
  ) {
    const { code, stderr } = await runWasmkeep([...args]);
    assert.equal(code, 2, `${args.join(" ")}: ${stderr}`);
    assert.match(stderr, message);
  }
});

Deno.test("a broken component is refused at start, naming the file and the problem", async () => {
  const dataDir = await Deno.makeTempDir();
  const fixtures = `${ROOT}test/fixtures/components`;
  const junk = `${dataDir}/junk.wasm`;
  await Deno.writeTextFile(junk, "this is not wasm");
  try {
    for (
      const [path, problem] of [
        [`${fixtures}/not_a_component.wasm`, /is a core WebAssembly module, not a component/],
        [
          `${fixtures}/wrong_world.wasm`,
          /does not target the world wasmkeep:actor\/actor: it lacks the exports on-init, on-request/,
        ],
        [junk, /is not a WebAssembly file/],
        [`${dataDir}/missing.wasm`, /no such file/],
      ] as const
    ) {
      const { code, stderr } = await runWasmkeep([
        "serve",
        "--actor",
        `x=${path}`,
        "--data-dir",
        dataDir,
      ]);
      assert.equal(code, 1, stderr);
      assert.ok(stderr.includes(path), stderr);
      assert.match(stderr, problem);
    }
  } finally {
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("help and version", async () => {
  const main = await runWasmkeep(["--help"]);
  assert.equal(main.code, 0);
  assert.match(main.stdout, /Usage: wasmkeep <command>/);
  const serve = await runWasmkeep(["serve", "--help"]);
  assert.equal(serve.code, 0);
  for (const flag of ["--actor", "--data-dir", "--listen", "--node-id", "--event-timeout-secs"]) {
    assert.ok(serve.stdout.includes(flag), flag);
  }
  const version = await runWasmkeep(["version"]);
  assert.equal(version.code, 0);
  assert.match(version.stdout, /^wasmkeep \d+\.\d+\.\d+\n$/);
});

Deno.test("-h is --help, for every command", async () => {
  const cases = [
    [["-h"], /^WasmKeep /],
    [["serve", "-h"], /^Usage: wasmkeep serve /],
    [["serve", "--actor", "a=b.wasm", "-h"], /^Usage: wasmkeep serve /],
    [["version", "-h"], /^Usage: wasmkeep version/],
    [["cluster", "-h"], /^Usage: wasmkeep cluster <command>/],
    [["cluster", "status", "-h"], /^Usage: wasmkeep cluster status/],
    [["cluster", "fence", "-h"], /^Usage: wasmkeep cluster fence/],
    [["cluster", "forget", "-h"], /^Usage: wasmkeep cluster forget/],
    [["cluster", "drain", "-h"], /^Usage: wasmkeep cluster drain/],
    [["cluster", "undrain", "-h"], /^Usage: wasmkeep cluster undrain/],
    [["actor", "-h"], /^Usage: wasmkeep actor <command>/],
    [["actor", "move", "-h"], /^Usage: wasmkeep actor move/],
  ] as const;
  await Promise.all(cases.map(async ([args, usage]) => {
    const { code, stdout, stderr } = await runWasmkeep([...args]);
    assert.equal(code, 0, `${args.join(" ")}: ${stderr}`);
    assert.match(stdout, usage, args.join(" "));
    assert.equal(stderr, "", args.join(" "));
  }));
  const serve = await runWasmkeep(["serve", "-h"]);
  assert.equal(serve.stdout, (await runWasmkeep(["serve", "--help"])).stdout);
  assert.match(serve.stdout, /^ {2}-h, --help +show this help$/m);
});

Deno.test("the stateless component the usage line names is said to be not in this version yet, there and when given", async () => {
  const help = await runWasmkeep(["serve", "--help"]);
  assert.match(
    help.stdout,
    /^Usage: wasmkeep serve \[STATELESS\.wasm \(not in this version yet\)\] \(--actor CLASS=PATH\.\.\. \| --app TENANT\/APP\) \[flags\]$/m,
  );
  const given = await runWasmkeep(["serve", "app.wasm", "--actor", `counter=${COUNTER_WASM}`]);
  assert.equal(given.code, 2, given.stderr);
  assert.equal(
    given.stderr,
    "wasmkeep: a stateless component (app.wasm) is not in this version yet; serve actors with --actor CLASS=PATH\n",
  );
});
