import assert from "node:assert/strict";
import { ExecutorPool } from "../../src/actors/executor_pool.ts";
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
