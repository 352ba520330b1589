import assert from "node:assert/strict";
import { runCli } from "../../../cli/main.ts";
import { createLogger } from "../../../src/log.ts";
import { CarelessBucket } from "../../helpers/careless_bucket.ts";
import { COUNTER_WASM, startNode } from "../../../src/testing/node_process.ts";
import { startMoto } from "../../../src/testing/moto.ts";

Deno.test("serve exits with the probe's message on a store that ignores conditions", async () => {
  const dataDir = await Deno.makeTempDir();
  const lines: string[] = [];
  const errors: string[] = [];
  const consoleError = console.error;
  console.error = (...args: unknown[]) => errors.push(args.join(" "));
  try {
    const code = await runCli(
      [
        "serve",
        "--actor",
        `counter=${COUNTER_WASM}`,
        "--data-dir",
        dataDir,
        "--listen",
        "127.0.0.1:0",
      ],
      { bucket: new CarelessBucket(), log: createLogger({ sink: (line) => lines.push(line) }) },
    );
    assert.equal(code, 1);
  } finally {
    console.error = consoleError;
    await Deno.remove(dataDir, { recursive: true });
  }
  assert.match(
    errors.join("\n"),
    /failed the start-up probe: the bucket accepted a create over an existing object/,
  );
  assert.ok(
    lines.some((line) => line.includes("the bucket failed the start-up probe")),
    lines.join("\n"),
  );
});

Deno.test("a node is not ready while its bucket does not answer, and stops cleanly", async () => {
  const dataDir = await Deno.makeTempDir();
  const closed = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (closed.addr as Deno.NetAddr).port;
  closed.close();
  const child = new Deno.Command(Deno.execPath(), {
    args: [
      "run",
      "-A",
      new URL("../../../main.ts", import.meta.url).pathname,
      "serve",
      "--actor",
      `counter=${COUNTER_WASM}`,
      "--data-dir",
      dataDir,
      "--listen",
      "127.0.0.1:0",
      "--bucket",
      "s3://nobody-home",
    ],
    env: {
      AWS_ENDPOINT: `http://127.0.0.1:${port}`,
      AWS_ALLOW_HTTP: "true",
      AWS_ACCESS_KEY_ID: "test",
      AWS_SECRET_ACCESS_KEY: "test",
      AWS_REGION: "us-east-1",
    },
    stderr: "piped",
    stdout: "null",
  }).spawn();
  let text = "";
  const decoder = new TextDecoder();
  const reader = child.stderr.getReader();
  try {
    while (!/node listening .*url=(\S+)/.test(text)) {
      const { value, done } = await reader.read();
      if (done) throw new Error(text);
      text += decoder.decode(value);
    }
    const url = text.match(/node listening .*url=(\S+)/)![1];
    const ready = await fetch(`${url}/_wasmkeep/ready`);
    assert.equal(ready.status, 503);
    assert.match(await ready.text(), /not ready: checking the bucket/);
    const actor = await fetch(`${url}/actor/counter/a`, { method: "POST" });
    assert.equal(actor.status, 503);
    assert.equal(actor.headers.get("retry-after"), "1");
    await actor.body?.cancel();
    child.kill("SIGTERM");
    const status = await child.status;
    assert.equal(status.code, 0);
  } finally {
    reader.releaseLock();
    await child.stderr.cancel();
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("a node serves with its bucket on a real S3 server (moto)", async () => {
  const moto = await startMoto();
  const dataDir = await Deno.makeTempDir();
  const previous = Object.fromEntries(Object.keys(moto.env).map((k) => [k, Deno.env.get(k)]));
  for (const [key, value] of Object.entries(moto.env)) Deno.env.set(key, value);
  try {
    const node = await startNode([
      "--actor",
      `counter=${COUNTER_WASM}`,
      "--data-dir",
      dataDir,
      "--bucket",
      `s3://${moto.bucket}/cluster-a`,
      "--lease-ttl-secs",
      "3",
    ]);
    try {
      assert.match(node.logs(), /bucket=s3:\/\/.*cluster-a/);
      const response = await fetch(`${node.url}/actor/counter/a`, { method: "POST" });
      assert.equal((await response.text()).trim(), "1");
    } finally {
      await node.stop();
    }
  } finally {
    for (const [key, value] of Object.entries(previous)) {
      if (value === undefined) Deno.env.delete(key);
      else Deno.env.set(key, value);
    }
    await moto.stop();
    await Deno.remove(dataDir, { recursive: true });
  }
});
