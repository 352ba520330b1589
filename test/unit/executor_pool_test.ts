import assert from "node:assert/strict";
import { ExecutorPool } from "../../src/actors/executor_pool.ts";
import { loadComponent } from "../../src/actors/component.ts";
import { ROOT } from "../helpers/node_process.ts";
import { createLogger } from "../../src/log.ts";
import { systemClock } from "../../src/time/clock.ts";

Deno.test("an executor that crashes at start is started again after a growing back-off", async () => {
  const dataDir = await Deno.makeTempDir();
  const lines: string[] = [];
  let starts = 0;
  const pool = new ExecutorPool({
    size: 1,
    dataDir,
    classes: [],
    maxOpenDatabases: 10,
    databaseIdleMs: 1000,
    eventTimeoutMs: 1000,
    logLevel: "error",
    clock: systemClock,
    log: createLogger({ sink: (line) => lines.push(line) }),
    command: () => {
      starts++;
      return { program: Deno.execPath(), args: ["eval", "Deno.exit(3)"] };
    },
  });
  try {
    await new Promise((r) => setTimeout(r, 2500));
    // Without a back-off a process that exits at once is started about
    // every 100 ms; with it, at 0, 0, 250, 500, 1000 and 2000 ms after each.
    assert.ok(starts >= 3 && starts <= 7, `started ${starts} times in 2.5 s`);
    assert.ok(lines.some((line) => line.includes("keeps crashing at start")), lines.join("\n"));
    const outcome = await pool.run(0, { tenant: "default", class: "x", name: "y" }, {
      method: "GET",
      path: "/",
      query: "",
      headers: [],
      body: new Uint8Array(),
    });
    assert.equal(outcome.kind, "failed");
    assert.equal(outcome.kind === "failed" && outcome.status, 503);
  } finally {
    await pool.close();
    await Deno.remove(dataDir, { recursive: true });
  }
});

const request = (path: string) => ({
  method: "GET",
  path,
  query: "",
  headers: [] as [string, string][],
  body: new Uint8Array(),
});
const testbed = (name: string) => ({ tenant: "default", class: "testbed", name });

async function testbedPool(
  dataDir: string,
  lines: string[],
  overrides: Partial<ConstructorParameters<typeof ExecutorPool>[0]> = {},
): Promise<ExecutorPool> {
  const loaded = await loadComponent(
    "testbed",
    `${ROOT}test/fixtures/components/testbed.wasm`,
    `${dataDir}/cache`,
  );
  return new ExecutorPool({
    size: 1,
    dataDir,
    classes: [{
      className: "testbed",
      hash: loaded.hash,
      glue: loaded.glue,
      coreModules: loaded.coreModules,
      directModule: loaded.directModule,
      config: {},
    }],
    maxOpenDatabases: 10,
    databaseIdleMs: 1000,
    eventTimeoutMs: 1000,
    logLevel: "error",
    clock: systemClock,
    log: createLogger({ sink: (line) => lines.push(line) }),
    ...overrides,
  });
}

Deno.test("the looping event gets the 504, not an event that was waking another actor before it", async () => {
  const dataDir = await Deno.makeTempDir();
  const lines: string[] = [];
  const pool = await testbedPool(dataDir, lines);
  try {
    const warm = await pool.run(0, testbed("resident"), request("/rows"));
    assert.equal(warm.kind, "response");
    // Sent in the same turn: "fresh" wakes (instantiate, on-init) first.
    const waking = pool.run(0, testbed("fresh"), request("/rows"));
    const looping = pool.run(0, testbed("resident"), request("/loop"));
    const fresh = await waking;
    assert.equal(fresh.kind, "response", JSON.stringify(fresh));
    const loop = await looping;
    assert.equal(loop.kind === "failed" && loop.status, 504);
    await new Promise((r) => setTimeout(r, 2500));
    // Not sent again to the new executor, where it would loop once more.
    assert.equal(lines.filter((line) => line.includes("replacing its executor")).length, 1);
  } finally {
    await pool.close();
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("closing the pool answers the events still pending", async () => {
  const dataDir = await Deno.makeTempDir();
  const pool = await testbedPool(dataDir, []);
  try {
    const looping = pool.run(0, testbed("busy"), request("/loop"));
    await new Promise((r) => setTimeout(r, 300));
    await pool.close();
    const outcome = await looping;
    assert.equal(outcome.kind === "failed" && outcome.status, 503);
  } finally {
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("an executor started through the CLI's hidden command (as a compiled binary starts it) runs events", async () => {
  const dataDir = await Deno.makeTempDir();
  const pool = await testbedPool(dataDir, [], {
    eventTimeoutMs: 10_000,
    command: (socketPath) => ({
      program: Deno.execPath(),
      args: ["run", "-A", `${ROOT}main.ts`, "__executor", socketPath],
    }),
  });
  try {
    const outcome = await pool.run(0, testbed("cli"), request("/self"));
    assert.equal(outcome.kind, "response", JSON.stringify(outcome));
    assert.equal(
      outcome.kind === "response" && new TextDecoder().decode(outcome.response.body),
      "default/testbed/cli",
    );
  } finally {
    await pool.close();
    await Deno.remove(dataDir, { recursive: true });
  }
});
