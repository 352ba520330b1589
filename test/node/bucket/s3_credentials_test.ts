/**
 * The credentials of an `s3://` bucket, through real `wasmkeep` processes:
 * none set exits at start naming the variables, without a connection to the
 * instance metadata or container credentials endpoints (pointed at loopback
 * listeners here, so nothing leaves the machine); a bucket answering 403
 * keeps the node probing, not ready, until it accepts the credentials.
 *
 * @module
 */

import assert from "node:assert/strict";
import { COUNTER_WASM, ROOT } from "../../../src/testing/node_process.ts";
import { startMoto } from "../../../src/testing/moto.ts";
import { until } from "../../helpers/until.ts";

const MAIN = `${ROOT}main.ts`;
/** Everything the node needs, with the network limited to loopback. */
const LOOPBACK_ONLY = [
  "--allow-read",
  "--allow-write",
  "--allow-env",
  "--allow-run",
  "--allow-sys",
  // jco loads a native minifier.
  "--allow-ffi",
  "--allow-net=127.0.0.1",
  "--no-prompt",
];
/** Well above a start that exits at once (about 1 s), far below a probe retried forever. */
const EXIT_WITHIN_MS = 20_000;

/** A loopback listener that counts the connections it is offered and closes them. */
function tripwire(): { url: string; connections: () => number; close: () => void } {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  let connections = 0;
  (async () => {
    for await (const connection of listener) {
      connections++;
      connection.close();
    }
  })().catch(() => {});
  return {
    url: `http://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`,
    connections: () => connections,
    close: () => listener.close(),
  };
}

/** This machine's Deno cache: the children get an empty HOME, so no ~/.aws either. */
async function denoDir(): Promise<string> {
  const given = Deno.env.get("DENO_DIR");
  if (given) return given;
  const output = await new Deno.Command(Deno.execPath(), { args: ["info", "--json"] }).output();
  return JSON.parse(new TextDecoder().decode(output.stdout)).denoDir;
}

/** A clean environment: none of this machine's AWS_* variables or ~/.aws reach the child. */
async function cleanEnv(
  home: string,
  env: Record<string, string>,
): Promise<Record<string, string>> {
  return {
    PATH: Deno.env.get("PATH") ?? "/usr/bin:/bin",
    HOME: home,
    DENO_DIR: await denoDir(),
    NO_COLOR: "1",
    ...env,
  };
}

/** Runs `wasmkeep ARGS` with only `env`; fails if it has not exited within EXIT_WITHIN_MS. */
async function runBounded(
  args: string[],
  env: Record<string, string>,
): Promise<{ code: number; stderr: string }> {
  const home = await Deno.makeTempDir({ prefix: "wasmkeep-home-" });
  try {
    const child = new Deno.Command(Deno.execPath(), {
      args: ["run", ...LOOPBACK_ONLY, MAIN, ...args],
      clearEnv: true,
      env: await cleanEnv(home, env),
      stdin: "null",
      stdout: "null",
      stderr: "piped",
    }).spawn();
    const exited = child.output();
    const late = Promise.withResolvers<"late">();
    const timer = setTimeout(() => late.resolve("late"), EXIT_WITHIN_MS);
    const first = await Promise.race([exited, late.promise]);
    clearTimeout(timer);
    if (first === "late") {
      child.kill("SIGKILL");
      const output = await exited;
      assert.fail(
        `wasmkeep ${args[0]} still ran after ${EXIT_WITHIN_MS} ms:\n${
          new TextDecoder().decode(output.stderr)
        }`,
      );
    }
    return { code: first.code, stderr: new TextDecoder().decode(first.stderr) };
  } finally {
    await Deno.remove(home, { recursive: true });
  }
}

const NO_CREDENTIALS =
  /^wasmkeep: cannot open the bucket s3:\/\/b: no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY \(and AWS_SESSION_TOKEN .*\), or set WASMKEEP_S3_CREDENTIALS=default-chain .*$/m;

// The SDK's default chain asks the container endpoint when one is set, the
// instance metadata otherwise: one run for each.
for (const via of ["instance metadata", "container credentials"]) {
  Deno.test(`serve without AWS credentials exits at start, asking no ${via} endpoint`, async () => {
    const imds = tripwire(), container = tripwire(), store = tripwire();
    const dataDir = await Deno.makeTempDir();
    try {
      const { code, stderr } = await runBounded(
        [
          "serve",
          "--actor",
          `counter=${COUNTER_WASM}`,
          "--bucket",
          "s3://b",
          "--listen",
          "127.0.0.1:0",
          "--data-dir",
          dataDir,
        ],
        {
          AWS_ENDPOINT: store.url,
          AWS_ALLOW_HTTP: "true",
          AWS_EC2_METADATA_SERVICE_ENDPOINT: imds.url,
          ...(via === "container credentials"
            ? { AWS_CONTAINER_CREDENTIALS_FULL_URI: `${container.url}/creds` }
            : {}),
        },
      );
      assert.equal(code, 1, stderr);
      assert.match(stderr, NO_CREDENTIALS);
      assert.doesNotMatch(stderr, /node listening|probing again/, stderr);
      // Give a late connection a moment to show.
      await new Promise((resolve) => setTimeout(resolve, 200));
      assert.deepEqual(
        {
          imds: imds.connections(),
          container: container.connections(),
          store: store.connections(),
        },
        { imds: 0, container: 0, store: 0 },
      );
    } finally {
      for (const listener of [imds, container, store]) listener.close();
      await Deno.remove(dataDir, { recursive: true });
    }
  });
}

Deno.test("serve with one key of the pair exits at start, naming the missing one", async () => {
  const dataDir = await Deno.makeTempDir();
  try {
    const { code, stderr } = await runBounded(
      ["serve", "--actor", `counter=${COUNTER_WASM}`, "--bucket", "s3://b", "--data-dir", dataDir],
      { AWS_ACCESS_KEY_ID: "AKIDEXAMPLE" },
    );
    assert.equal(code, 1, stderr);
    assert.match(
      stderr,
      /^wasmkeep: cannot open the bucket s3:\/\/b: AWS_SECRET_ACCESS_KEY is not set but AWS_ACCESS_KEY_ID is: set both, the key's id and its secret$/m,
    );
  } finally {
    await Deno.remove(dataDir, { recursive: true });
  }
});

for (const command of [["status"], ["fence", "a"], ["forget", "a"]]) {
  Deno.test(`cluster ${command[0]} without AWS credentials says what to set`, async () => {
    const imds = tripwire();
    try {
      const { code, stderr } = await runBounded(
        ["cluster", ...command, "--bucket", "s3://b"],
        { AWS_EC2_METADATA_SERVICE_ENDPOINT: imds.url },
      );
      assert.equal(code, 1, stderr);
      assert.match(stderr, NO_CREDENTIALS);
      assert.equal(imds.connections(), 0);
    } finally {
      imds.close();
    }
  });
}

/** A loopback S3 in front of moto that refuses every request's credentials while `refusing`. */
function refusingProxy(
  target: string,
): { endpoint: string; refusing: boolean; close(): Promise<void> } {
  const state = {
    endpoint: "",
    refusing: true,
    close: () => server.shutdown(),
  };
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (request) => {
    const body = request.body ? new Uint8Array(await request.arrayBuffer()) : undefined;
    if (state.refusing) {
      return new Response(
        `<?xml version="1.0" encoding="UTF-8"?><Error><Code>InvalidAccessKeyId</Code>` +
          `<Message>The AWS Access Key Id you provided does not exist in our records.</Message>` +
          `<RequestId>r</RequestId></Error>`,
        { status: 403, headers: { "content-type": "application/xml" } },
      );
    }
    const url = new URL(request.url);
    const headers = new Headers(request.headers);
    for (const name of ["host", "content-length", "expect", "connection"]) headers.delete(name);
    const answer = await fetch(`${target}${url.pathname}${url.search}`, {
      method: request.method,
      headers,
      body: body && body.length > 0 ? body : undefined,
    });
    return new Response(request.method === "HEAD" ? null : answer.body, {
      status: answer.status,
      headers: answer.headers,
    });
  });
  state.endpoint = `http://127.0.0.1:${server.addr.port}`;
  return state;
}

Deno.test("a bucket refusing the node's credentials (403) keeps it probing, not ready, until it accepts them", async () => {
  const moto = await startMoto();
  const proxy = refusingProxy(moto.endpoint);
  // AWS_DEFAULTS_MODE=auto would have the SDK ask the instance metadata for the region.
  const imds = tripwire();
  const dataDir = await Deno.makeTempDir();
  const home = await Deno.makeTempDir({ prefix: "wasmkeep-home-" });
  const secret = "a-secret-never-logged";
  const child = new Deno.Command(Deno.execPath(), {
    // All permissions: its executors' Unix sockets need --allow-net without a host list.
    args: [
      "run",
      "-A",
      MAIN,
      "serve",
      "--actor",
      `counter=${COUNTER_WASM}`,
      "--data-dir",
      dataDir,
      "--listen",
      "127.0.0.1:0",
      "--bucket",
      `s3://${moto.bucket}/credentials`,
      "--lease-ttl-secs",
      "3",
    ],
    clearEnv: true,
    env: await cleanEnv(home, {
      ...moto.env,
      AWS_SECRET_ACCESS_KEY: secret,
      AWS_ENDPOINT: proxy.endpoint,
      AWS_DEFAULTS_MODE: "auto",
      AWS_EC2_METADATA_SERVICE_ENDPOINT: imds.url,
    }),
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  let text = "";
  const reading = (async () => {
    for await (const chunk of child.stderr.pipeThrough(new TextDecoderStream())) text += chunk;
  })();
  const refusedLines = () =>
    text.match(
      /WARN +the bucket refused this node's credentials \(PUT \S+: 403 InvalidAccessKeyId The AWS Access Key Id you provided does not exist in our records\.\); probing again in \d+ ms/g,
    )?.length ?? 0;
  try {
    await until("two refused probes", () => refusedLines() >= 2, {
      ms: 30_000,
      detail: () => text,
    });
    const url = text.match(/node listening .*url=(http:\/\/\S+)/)?.[1];
    assert.ok(url, text);
    const ready = await fetch(`${url}/_wasmkeep/ready`);
    assert.equal(ready.status, 503);
    assert.match(await ready.text(), /not ready: checking the bucket/);
    assert.doesNotMatch(text, /failed the start-up probe/);

    proxy.refusing = false;
    await until("node ready", () => /node ready/.test(text), { ms: 30_000, detail: () => text });
    const answer = await fetch(`${url}/actor/counter/a`, { method: "POST" });
    assert.equal((await answer.text()).trim(), "1");
    assert.equal(imds.connections(), 0);
    assert.ok(!text.includes(secret), "the secret is never logged");
    child.kill("SIGTERM");
    assert.equal((await child.status).code, 0, text);
  } finally {
    try {
      child.kill("SIGKILL");
    } catch {
      // It exited.
    }
    await child.status;
    await reading;
    imds.close();
    await proxy.close();
    await moto.stop();
    await Deno.remove(dataDir, { recursive: true });
    await Deno.remove(home, { recursive: true });
  }
});
