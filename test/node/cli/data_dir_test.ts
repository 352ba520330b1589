import assert from "node:assert/strict";
import { COUNTER_WASM, ROOT } from "../../../src/testing/node_process.ts";

/** Long enough for a refusal; a node that starts instead is killed after it. */
const REFUSAL_MS = 30_000;

/** `serve` on `dataDir`: it must stop with one line naming `--data-dir`, not a stack trace. */
async function assertRefused(dataDir: string, reason: RegExp): Promise<void> {
  const output = await new Deno.Command(Deno.execPath(), {
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
    signal: AbortSignal.timeout(REFUSAL_MS),
  }).output();
  const stderr = new TextDecoder().decode(output.stderr);
  assert.equal(output.code, 1, stderr);
  assert.match(stderr, /^wasmkeep: cannot [^\n]* \(--data-dir\): [^\n]*\n$/);
  assert.match(stderr, reason);
  assert.doesNotMatch(stderr, /\bat /);
}

/**
 * Mounts a read-only tmpfs on a new folder, or says why it cannot: chmod
 * does not stop root, a read-only file system does.
 */
async function readOnlyMount(): Promise<{ dir: string; unmount: () => Promise<void> } | string> {
  if (Deno.build.os !== "linux") return "read-only tmpfs mounts are a Linux test";
  const dir = await Deno.makeTempDir();
  const mount = await new Deno.Command("mount", {
    args: ["-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", dir],
    stdout: "null",
    stderr: "null",
  }).output().catch(() => undefined);
  if (!mount?.success) {
    await Deno.remove(dir);
    return "this process may not mount a tmpfs";
  }
  return {
    dir,
    unmount: async () => {
      await new Deno.Command("umount", { args: [dir] }).output();
      await Deno.remove(dir);
    },
  };
}

Deno.test("a data directory under a file is refused in one line naming --data-dir", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/file`, "");
    await assertRefused(`${dir}/file/data`, /cannot create the data directory .*Not a directory/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a data directory whose component cache is a file is refused in one line naming --data-dir", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/cache`, "");
    await assertRefused(dir, /cannot create .*\/cache\/components in the data directory/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a data directory whose actors folder is a file is refused in one line naming --data-dir", async () => {
  const dir = await Deno.makeTempDir();
  try {
    await Deno.writeTextFile(`${dir}/actors`, "");
    await assertRefused(dir, /cannot create .*\/actors in the data directory/);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

const readOnly = await readOnlyMount();
if (typeof readOnly === "string") {
  console.warn(`skipping the read-only data directory test: ${readOnly}`);
} else await readOnly.unmount();

Deno.test({
  name: "a read-only data directory is refused in one line naming --data-dir",
  ignore: typeof readOnly === "string",
  fn: async () => {
    const mount = await readOnlyMount();
    assert.ok(typeof mount !== "string", mount as string);
    try {
      await assertRefused(mount.dir, /cannot write in the data directory .*Read-only file system/);
    } finally {
      await mount.unmount();
    }
  },
});
