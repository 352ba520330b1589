import assert from "node:assert/strict";
import {
  COUNTER_WASM,
  metric,
  ROOT,
  startNode,
  TESTBED_WASM,
  withNode,
} from "../../../src/testing/node_process.ts";

async function text(response: Response): Promise<string> {
  return (await response.text()).trim();
}

Deno.test("an idle actor hibernates and wakes with its state", async () => {
  await withNode([
    "--actor",
    `counter=${COUNTER_WASM}`,
    "--actor",
    `testbed=${TESTBED_WASM}`,
    "--idle-secs",
    "1",
  ], async (node) => {
    // At once: each starts its shard's executor, which may take longer than
    // the idle second on a busy machine.
    const [counter, inits] = await Promise.all([
      fetch(`${node.url}/actor/counter/sleepy`, { method: "POST" }).then(text),
      fetch(`${node.url}/actor/testbed/sleepy/inits`).then(text),
    ]);
    assert.equal(counter, "1");
    assert.equal(inits, "1");
    assert.equal(await metric(node.url, "wasmkeep_resident_actors"), 2);
    let resident: number | undefined = 2;
    for (let i = 0; i < 50 && resident !== 0; i++) {
      await new Promise((r) => setTimeout(r, 100));
      resident = await metric(node.url, "wasmkeep_resident_actors");
    }
    assert.equal(resident, 0, "both actors hibernated");
    assert.equal(
      await text(await fetch(`${node.url}/actor/counter/sleepy`, { method: "POST" })),
      "2",
    );
    assert.equal(
      await text(await fetch(`${node.url}/actor/testbed/sleepy/inits`)),
      "1",
      "on-init does not run again for the same code version",
    );
    assert.equal(await metric(node.url, "wasmkeep_resident_actors"), 2);
  });
});

Deno.test("the resident cap evicts the least recently used actor and keeps every state", async () => {
  await withNode([
    "--actor",
    `counter=${COUNTER_WASM}`,
    "--max-resident-actors",
    "2",
  ], async (node) => {
    for (const name of ["a", "b", "c", "a", "d"]) {
      const response = await fetch(`${node.url}/actor/counter/${name}`, { method: "POST" });
      assert.equal(response.status, 200);
      await response.body?.cancel();
      assert.ok((await metric(node.url, "wasmkeep_resident_actors"))! <= 2);
    }
    for (const [name, count] of [["a", "2"], ["b", "1"], ["c", "1"], ["d", "1"]]) {
      assert.equal(await text(await fetch(`${node.url}/actor/counter/${name}`)), count);
    }
  });
});

Deno.test("on-init runs once per code version; a failing on-init fails the event", async () => {
  const dataDir = await Deno.makeTempDir();
  let node = await startNode(["--actor", `testbed=${TESTBED_WASM}`, "--data-dir", dataDir]);
  try {
    for (let i = 0; i < 3; i++) {
      assert.equal(await text(await fetch(`${node.url}/actor/testbed/v/inits`)), "1");
    }
    await node.stop();
    node = await startNode(["--actor", `testbed=${TESTBED_WASM}`, "--data-dir", dataDir]);
    assert.equal(
      await text(await fetch(`${node.url}/actor/testbed/v/inits`)),
      "1",
      "same version after a restart",
    );
    await node.stop();
    const failing = `${ROOT}test/fixtures/components/testbed_init_fails.wasm`;
    node = await startNode(["--actor", `testbed=${failing}`, "--data-dir", dataDir]);
    const refused = await fetch(`${node.url}/actor/testbed/v/rows`);
    assert.equal(refused.status, 500);
    assert.match(await text(refused), /on-init failed: init refused/);
  } finally {
    await node.stop();
    await Deno.remove(dataDir, { recursive: true });
  }
});

for (const abi of ["auto", "jco"]) {
  Deno.test(`config values, the actor's id, logs, SQL values, and clear errors for features not built yet (--abi ${abi})`, async () => {
    const dataDir = await Deno.makeTempDir();
    const configFile = `${dataDir}/testbed.env`;
    await Deno.writeTextFile(configFile, '# greeting\nGREETING=hello world\nQUOTED="a\\nb"\n');
    const node = await startNode([
      "--actor",
      `testbed=${TESTBED_WASM}`,
      "--config",
      `testbed=${configFile}`,
      "--data-dir",
      dataDir,
      "--abi",
      abi,
    ]);
    const actor = `${node.url}/actor/testbed/cfg`;
    try {
      assert.equal(await text(await fetch(`${actor}/config?GREETING`)), "hello world");
      assert.equal(await (await fetch(`${actor}/config?QUOTED`)).text(), "a\nb");
      const unset = await fetch(`${actor}/config?MISSING`);
      assert.equal(unset.status, 404);
      await unset.body?.cancel();
      assert.equal(await text(await fetch(`${actor}/self`)), "default/testbed/cfg");
      assert.equal((await fetch(`${actor}/log`)).status, 200);
      assert.match(node.logs(), /hello from testbed actor=default\/testbed\/cfg/);

      const durable = await fetch(`${actor}/durable`);
      assert.equal(durable.status, 200);
      assert.equal(await text(durable), "ok");
      // actors.call works now: testbed/other's row count.
      const call = await fetch(`${actor}/call`);
      assert.equal(call.status, 200);
      assert.equal(await text(call), "0");
      // An alarm far ahead: set, and read back by the next event.
      assert.equal(await text(await fetch(`${actor}/alarm?4102444800000`)), "set");
      assert.equal(await text(await fetch(`${actor}/alarm-get`)), "4102444800000");
      assert.equal(await text(await fetch(`${actor}/ws`)), "0");

      // Every kind of SQL value crosses the boundary both ways.
      const sql = encodeURIComponent(
        "SELECT 9223372036854775807, -9223372036854775808, 1.5, NULL, 'é✓', x'00ff', 42",
      );
      // The testbed writes NULL as nothing and a blob as its raw bytes.
      const encoder = new TextEncoder();
      assert.deepEqual(
        new Uint8Array(await (await fetch(`${actor}/sql?${sql}`)).arrayBuffer()),
        new Uint8Array([
          ...encoder.encode("9223372036854775807|-9223372036854775808|1.5||é✓|"),
          0x00,
          0xff,
          ...encoder.encode("|42"),
        ]),
      );
      const bad = await fetch(`${actor}/sql?${encodeURIComponent("SELECT * FROM nowhere")}`);
      assert.equal(bad.status, 400);
      assert.match(await text(bad), /^SQLITE_ERROR: no such table: nowhere$/);
    } finally {
      await node.stop();
      await Deno.remove(dataDir, { recursive: true });
    }
  });
}

function openFilesUnder(pid: number, dir: string): string[] {
  const files: string[] = [];
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      const stat = Deno.readTextFileSync(`/proc/${entry.name}/stat`);
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      if (Number(entry.name) !== pid && ppid !== pid) continue;
      for (const fd of Deno.readDirSync(`/proc/${entry.name}/fd`)) {
        try {
          const target = Deno.readLinkSync(`/proc/${entry.name}/fd/${fd.name}`);
          if (target.startsWith(dir)) files.push(target);
        } catch {
          // Closed while we looked.
        }
      }
    } catch {
      // The process exited while we looked.
    }
  }
  return files;
}

Deno.test("an idle actor's database is closed while the actor stays resident", async () => {
  await withNode(
    ["--actor", `counter=${COUNTER_WASM}`, "--db-idle-secs", "1"],
    async (node, dataDir) => {
      const actorDir = `${await Deno.realPath(dataDir)}/actors`;
      assert.equal(
        await text(await fetch(`${node.url}/actor/counter/quiet`, { method: "POST" })),
        "1",
      );
      assert.ok(
        openFilesUnder(node.pid, actorDir).some((f) => f.endsWith("quiet.db")),
        "the database is open after an event",
      );
      let open = openFilesUnder(node.pid, actorDir);
      for (let i = 0; i < 40 && open.length > 0; i++) {
        await new Promise((r) => setTimeout(r, 100));
        open = openFilesUnder(node.pid, actorDir);
      }
      assert.deepEqual(open, [], "the idle database was closed");
      assert.equal(await metric(node.url, "wasmkeep_resident_actors"), 1);
      assert.equal(
        await text(await fetch(`${node.url}/actor/counter/quiet`, { method: "POST" })),
        "2",
      );
    },
  );
});
