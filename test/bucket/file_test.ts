import { assert, assertEquals } from "./assert.ts";
import { FileBucket } from "../../src/bucket/file.ts";
import { LOCK_STALE_MS } from "../../src/bucket/file_lock.ts";

const bytes = (text: string) => new TextEncoder().encode(text);

async function withDir(run: (dir: string) => Promise<void>): Promise<void> {
  const dir = await Deno.makeTempDir({ prefix: "wasmkeep-file-bucket-" });
  try {
    await run(dir);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("FileBucket: 20 creates of one key from 2 processes, exactly one wins", async () => {
  await withDir(async (dir) => {
    const worker = new URL("./file_race_worker.ts", import.meta.url).pathname;
    const children = ["p1", "p2"].map((name) =>
      new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", worker, dir, "race/k", "10", name],
        stdin: "piped",
        stdout: "piped",
        stderr: "inherit",
      }).spawn()
    );
    const lines = children.map((child) =>
      child.stdout.pipeThrough(new TextDecoderStream()).getReader()
    );
    // Both processes are loaded before either writes, so the creates really overlap.
    let outputs = ["", ""];
    for (const [i, reader] of lines.entries()) {
      while (!outputs[i].includes("ready\n")) outputs[i] += (await reader.read()).value ?? "";
    }
    for (const child of children) {
      const writer = child.stdin.getWriter();
      await writer.write(bytes("go\n"));
      await writer.close();
    }
    outputs = await Promise.all(lines.map(async (reader, i) => {
      let out = outputs[i];
      while (true) {
        const { value, done } = await reader.read();
        if (done) return out;
        out += value;
      }
    }));
    for (const child of children) assert((await child.status).success);
    const reports = outputs.map((out) => JSON.parse(out.trim().split("\n").at(-1)!));
    assertEquals(reports.map((r) => r.failures), [0, 0]);
    const won = reports.flatMap((r) => r.won);
    assertEquals(won.length, 1);
    const stored = await new FileBucket(dir).get("race/k");
    assertEquals(new TextDecoder().decode(stored!.body), won[0]);
  });
});

Deno.test("FileBucket: a lock left by a crashed process is broken once stale", async () => {
  await withDir(async (dir) => {
    const bucket = new FileBucket(dir);
    await bucket.put("owners/t/c/n", bytes("v1"));
    const lock = `${dir}/owners/t/c/n.obj.lock`;
    await Deno.writeTextFile(lock, "12345\n");
    const old = new Date(Date.now() - LOCK_STALE_MS - 1000);
    await Deno.utime(lock, old, old);
    const etag = (await bucket.head("owners/t/c/n"))!.etag;
    await bucket.put("owners/t/c/n", bytes("v2"), { ifMatch: etag });
    assertEquals(new TextDecoder().decode((await bucket.get("owners/t/c/n"))!.body), "v2");
    assertEquals(await exists(lock), false);
  });
});

Deno.test("FileBucket: a fresh lock makes writers wait, not fail", async () => {
  await withDir(async (dir) => {
    const bucket = new FileBucket(dir);
    await bucket.put("k", bytes("v1"));
    const lock = `${dir}/k.obj.lock`;
    await Deno.writeTextFile(lock, "12345\n");
    let landed = false;
    const write = bucket.put("k", bytes("v2")).then(() => landed = true);
    await new Promise((resolve) => setTimeout(resolve, 50));
    assertEquals(landed, false);
    await Deno.remove(lock);
    await write;
    assertEquals(new TextDecoder().decode((await bucket.get("k"))!.body), "v2");
  });
});

Deno.test("FileBucket: what a crash leaves behind is never an object", async () => {
  await withDir(async (dir) => {
    const bucket = new FileBucket(dir);
    await bucket.put("wal/1", bytes("one"));
    // A crash between the temp file and the rename leaves these.
    await Deno.writeTextFile(`${dir}/wal/2.obj.tmp-0011223344556677`, "half");
    await Deno.writeTextFile(`${dir}/wal/1.obj.lock`, "1\n");
    assertEquals((await bucket.list("wal/")).objects.map((o) => o.key), ["wal/1"]);
    assertEquals(await bucket.get("wal/2"), null);
  });
});

Deno.test("FileBucket: ETags are content hashes, lastModified the file's time", async () => {
  await withDir(async (dir) => {
    const bucket = new FileBucket(dir);
    const a = await bucket.put("a", bytes("same"));
    const b = await bucket.put("b", bytes("same"));
    assertEquals(a.etag, b.etag);
    assert(/^"[0-9a-f]{32}"$/.test(a.etag));
    const stat = await Deno.stat(`${dir}/a.obj`);
    assertEquals((await bucket.head("a"))!.lastModified, stat.mtime!.getTime());
  });
});

Deno.test("FileBucket: keys that would escape the directory are refused", async () => {
  await withDir(async (dir) => {
    const bucket = new FileBucket(`${dir}/store`);
    for (const key of ["../x", "a/../../x", "a//b", "/a", "", "a/."]) {
      let refused = false;
      await bucket.put(key, bytes("x")).catch((e) => refused = e instanceof TypeError);
      assert(refused, `key ${JSON.stringify(key)} was accepted`);
    }
    assertEquals((await bucket.list("../")).objects, []);
  });
});

async function exists(path: string): Promise<boolean> {
  try {
    await Deno.stat(path);
    return true;
  } catch {
    return false;
  }
}
