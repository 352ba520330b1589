/**
 * A real S3-compatible server for tests: moto's, started on a free port and
 * stopped by the test that started it.
 *
 * @module
 */

import { freePort } from "./loopback.ts";

/** A running moto server and the bucket made in it. */
export interface Moto {
  /** `http://127.0.0.1:PORT`, for `AWS_ENDPOINT`. */
  endpoint: string;
  /** The bucket created at start. */
  bucket: string;
  /** The environment an `S3Bucket` needs to reach it. */
  env: Record<string, string>;
  /** Stops the server and waits until it exited. */
  stop(): Promise<void>;
}

/** How long moto may take to answer its first request. */
const START_TIMEOUT_MS = 20_000;

/**
 * Starts `python3 -m moto.server` on a free port of 127.0.0.1 and creates a
 * bucket in it.
 *
 * @example
 * ```ts
 * import { startMoto } from "./moto.ts";
 * const moto = await startMoto();
 * try {
 *   console.log(moto.endpoint);
 * } finally {
 *   await moto.stop();
 * }
 * ```
 */
export async function startMoto(bucket = "wasmkeep-test"): Promise<Moto> {
  const python = await findPython();
  const port = freePort();
  const child = new Deno.Command(python, {
    args: ["-m", "moto.server", "-H", "127.0.0.1", "-p", String(port)],
    stdin: "null",
    stdout: "null",
    stderr: "piped",
  }).spawn();
  // Kept so a failed start can say why; drained to the end so the pipe closes.
  let stderr = "";
  const drained = child.stderr.pipeThrough(new TextDecoderStream()).pipeTo(
    new WritableStream({ write: (text) => void (stderr = (stderr + text).slice(-4000)) }),
  );
  const stop = async () => {
    try {
      child.kill("SIGTERM");
    } catch {
      // Already exited.
    }
    await child.status;
    await drained;
  };
  const endpoint = `http://127.0.0.1:${port}`;
  try {
    await waitUntilAnswering(endpoint, child.status);
    const created = await fetch(`${endpoint}/${bucket}`, { method: "PUT" });
    await created.body?.cancel();
    if (!created.ok) throw new Error(`creating bucket ${bucket} on moto: ${created.status}`);
  } catch (e) {
    await stop();
    throw new Error(`moto did not start: ${e instanceof Error ? e.message : e}\n${stderr}`);
  }
  return {
    endpoint,
    bucket,
    env: {
      AWS_ACCESS_KEY_ID: "test",
      AWS_SECRET_ACCESS_KEY: "test",
      AWS_REGION: "us-east-1",
      AWS_ENDPOINT: endpoint,
      AWS_ALLOW_HTTP: "true",
    },
    stop,
  };
}

/** The first Python that imports moto's server: `python3`, then pyenv's. */
async function findPython(): Promise<string> {
  const candidates = ["python3"];
  try {
    for await (const version of Deno.readDir("/root/.pyenv/versions")) {
      candidates.push(`/root/.pyenv/versions/${version.name}/bin/python3`);
    }
  } catch {
    // No pyenv.
  }
  for (const python of candidates) {
    try {
      const { success } = await new Deno.Command(python, {
        args: ["-c", "import moto.server"],
        stdout: "null",
        stderr: "null",
      }).output();
      if (success) return python;
    } catch {
      // Not installed.
    }
  }
  throw new Error('no python3 with moto found: pip install "moto[server]"');
}

async function waitUntilAnswering(endpoint: string, exited: Promise<Deno.CommandStatus>) {
  let gone = false;
  exited.then(() => gone = true);
  const start = performance.now();
  while (performance.now() - start < START_TIMEOUT_MS) {
    if (gone) throw new Error("the process exited");
    try {
      const res = await fetch(endpoint);
      await res.body?.cancel();
      return;
    } catch {
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
  }
  throw new Error(`no answer within ${START_TIMEOUT_MS} ms`);
}
