import { assertEquals } from "./assert.ts";
import { FileBucket } from "../../src/bucket/file.ts";
import { FILE_TEMP_MAX_AGE_MS, removeFileLeftovers } from "../../src/bucket/file_leftovers.ts";
import { LOCK_STALE_MS } from "../../src/bucket/file_lock.ts";
import { systemClock } from "../../src/time/clock.ts";
import { exists } from "../helpers/exists.ts";

/** The id of a process that ran and was reaped: gone. */
async function goneProcessId(): Promise<number> {
  const child = new Deno.Command("true").spawn();
  await child.status;
  return child.pid;
}

Deno.test("file bucket leftovers: a killed writer's temp files and locks go, a live one's stay", async () => {
  const root = await Deno.makeTempDir({ prefix: "wasmkeep-leftovers-" });
  const live = new Deno.Command("sleep", { args: ["60"] }).spawn();
  try {
    const bucket = new FileBucket(root);
    await bucket.put("actors/default/c/a/wal/1", new TextEncoder().encode("x"));
    const dir = `${root}/actors/default/c/a/wal`;
    const gone = await goneProcessId();
    const old = new Date(Date.now() - FILE_TEMP_MAX_AGE_MS - 60_000);
    const files: Record<string, string> = {
      [`1.obj.tmp-${gone}-00112233aabbccdd`]: "wk1 torn",
      [`2.obj.tmp-${live.pid}-00112233aabbccdd`]: "wk1 being written",
      [`3.obj.tmp-${live.pid}-00112233aabbccdd`]: "wk1 an old one: its id was reused",
      ["4.obj.tmp-00112233aabbccdd"]: "wk1 an older version's, old",
      ["5.obj.tmp-00112233aabbccdd"]: "wk1 an older version's, fresh",
      ["1.obj.lock"]: `${gone}\n`,
      ["2.obj.lock"]: `${live.pid}\n`,
      ["3.obj.lock"]: "",
      ["6.obj.lock"]: `${live.pid}\n`,
      ["1.obj.lock.break"]: `${gone}\n`,
    };
    for (const [name, text] of Object.entries(files)) {
      await Deno.writeTextFile(`${dir}/${name}`, text);
    }
    await Deno.utime(`${dir}/3.obj.tmp-${live.pid}-00112233aabbccdd`, old, old);
    await Deno.utime(`${dir}/4.obj.tmp-00112233aabbccdd`, old, old);
    const stale = new Date(Date.now() - LOCK_STALE_MS - 1000);
    await Deno.utime(`${dir}/6.obj.lock`, stale, stale);

    const removed = await removeFileLeftovers(root, systemClock);

    const left = new Set<string>();
    for await (const entry of Deno.readDir(dir)) left.add(entry.name);
    assertEquals(
      [...left].sort(),
      [
        "1.obj",
        `2.obj.tmp-${live.pid}-00112233aabbccdd`,
        "2.obj.lock",
        // Empty: being written by its taker, or of an older version and fresh.
        "3.obj.lock",
        "5.obj.tmp-00112233aabbccdd",
      ].sort(),
    );
    assertEquals(removed, { temps: 3, locks: 2 });
    // The objects are untouched and the bucket still writes the keys it had locks on.
    assertEquals(
      new TextDecoder().decode((await bucket.get("actors/default/c/a/wal/1"))!.body),
      "x",
    );
    await bucket.put("actors/default/c/a/wal/6", new TextEncoder().encode("y"), {
      ifNoneMatch: "*",
    });
    assertEquals(await exists(`${dir}/6.obj`), true);
  } finally {
    live.kill("SIGKILL");
    await live.status;
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("file bucket leftovers: a stop aborts the walk", async () => {
  const root = await Deno.makeTempDir({ prefix: "wasmkeep-leftovers-" });
  try {
    await new FileBucket(root).put("a/b", new Uint8Array(1));
    const controller = new AbortController();
    controller.abort(new Error("stopping"));
    let error: unknown;
    await removeFileLeftovers(root, systemClock, controller.signal).catch((e) => error = e);
    assertEquals((error as Error)?.message, "stopping");
  } finally {
    await Deno.remove(root, { recursive: true });
  }
});
