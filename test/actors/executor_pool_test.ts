import assert from "node:assert/strict";
import {
  ExecutorPool,
  type ExecutorPoolEvents,
  type UnstartedEvent,
} from "../../src/actors/executor_pool.ts";
import { loadComponent } from "../../src/actors/component.ts";
import { ROOT } from "../../src/testing/node_process.ts";
import { createLogger } from "../../src/log.ts";
import { systemClock } from "../../src/time/clock.ts";
import { MAX_FRAME_BYTES } from "../../src/actors/frames.ts";
import { SLOW_PUT_FILE_VARIABLE, slowBucketExecutorCommand } from "../helpers/slow_bucket_open.ts";

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
    replicate: true,
    bucketUrl: `file://${dataDir}/bucket`,
    nodeId: "test",
    historyRetentionMs: 0,
    command: () => {
      starts++;
      return { program: Deno.execPath(), args: ["eval", "Deno.exit(3)"] };
    },
  });
  pool.start();
  try {
    // An executor starts on its shard's first event.
    const first = await pool.run(0, { tenant: "default", class: "x", name: "y" }, 1, {
      method: "GET",
      path: "/",
      query: "",
      headers: [],
      body: new Uint8Array(),
    });
    assert.equal(first.kind === "failed" && first.status, 503);
    await new Promise((r) => setTimeout(r, 2500));
    // Without a back-off a process that exits at once is started about
    // every 100 ms; with it, at 0, 0, 250, 500, 1000 and 2000 ms after each.
    assert.ok(starts >= 3 && starts <= 7, `started ${starts} times in 2.5 s`);
    assert.ok(lines.some((line) => line.includes("keeps crashing at start")), lines.join("\n"));
    const outcome = await pool.run(0, { tenant: "default", class: "x", name: "y" }, 1, {
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

const request = (target: string) => ({
  method: "GET",
  path: target.split("?")[0],
  query: target.split("?")[1] ?? "",
  headers: [] as [string, string][],
  body: new Uint8Array(),
});
const testbed = (name: string) => ({ tenant: "default", class: "testbed", name });

const EVENT_TIMEOUT_MS = 3000;

async function testbedPool(
  dataDir: string,
  lines: string[],
  overrides: Partial<ConstructorParameters<typeof ExecutorPool>[0]> & ExecutorPoolEvents = {},
): Promise<ExecutorPool> {
  const { checkHold, onCall, onGiveUp, onCount, onExecutorReplaced, ...settings } = overrides;
  const loaded = await loadComponent(
    "testbed",
    `${ROOT}test/fixtures/components/testbed.wasm`,
    `${dataDir}/cache`,
  );
  const pool = new ExecutorPool({
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
    // Long enough for a first event on a loaded machine (CI runs tests in
    // parallel), short enough for the loop test's 504.
    eventTimeoutMs: EVENT_TIMEOUT_MS,
    logLevel: "error",
    clock: systemClock,
    log: createLogger({ sink: (line) => lines.push(line) }),
    replicate: true,
    bucketUrl: `file://${dataDir}/bucket`,
    nodeId: "test",
    historyRetentionMs: 0,
    ...settings,
  });
  pool.start({ checkHold, onCall, onGiveUp, onCount, onExecutorReplaced });
  return pool;
}

Deno.test("the looping event gets the 504, not an event that was waking another actor before it", async () => {
  const dataDir = await Deno.makeTempDir();
  const lines: string[] = [];
  const pool = await testbedPool(dataDir, lines);
  try {
    const warm = await pool.run(0, testbed("resident"), 1, request("/rows"));
    assert.equal(warm.kind, "response");
    // Sent in the same turn: "fresh" wakes first, and its restore waits on
    // the bucket, so the loop starts meanwhile and the executor is stuck
    // before the wake can end.
    const waking = pool.run(0, testbed("fresh"), 1, request("/rows"));
    const looping = pool.run(0, testbed("resident"), 1, request("/loop"));
    const loop = await looping;
    assert.equal(loop.kind === "failed" && loop.status, 504);
    const fresh = await waking;
    assert.equal(fresh.kind === "failed" && fresh.status, 503, JSON.stringify(fresh));
    assert.match(
      fresh.kind === "failed" ? fresh.message : "",
      /executor stopped while this event was under way/,
    );
    await new Promise((r) => setTimeout(r, EVENT_TIMEOUT_MS + 1500));
    // Not sent again to the new executor, where it would loop once more.
    assert.equal(lines.filter((line) => line.includes("replacing its executor")).length, 1);
  } finally {
    await pool.close();
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("an event waiting on the bucket lets other actors' events run meanwhile", async () => {
  const dataDir = await Deno.makeTempDir();
  const pool = await testbedPool(dataDir, []);
  try {
    // The durable write waits for its upload; the other actor's events run
    // meanwhile on the same executor, in order.
    const durable = pool.run(0, testbed("slow"), 1, request("/durable"));
    const others = await Promise.all(
      ["/insert?a", "/insert?b", "/rows"].map((path) =>
        pool.run(0, testbed("quick"), 1, request(path))
      ),
    );
    const rows = others[2];
    assert.equal(rows.kind === "response" && new TextDecoder().decode(rows.response.body), "2");
    const outcome = await durable;
    // No node answers the hold check in a bare pool: the write landed, but
    // the executor cannot tell that the node still held the actor.
    assert.equal(outcome.kind === "response" && outcome.response.status, 500);
    assert.match(
      outcome.kind === "response" ? new TextDecoder().decode(outcome.response.body) : "",
      /no longer held the actor/,
    );
  } finally {
    await pool.close();
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("the executor runs nothing of an event past the end of the lease it was sent under", async () => {
  const dataDir = await Deno.makeTempDir();
  // The node's answer to the durable write's hold check comes late: the
  // lease the event was sent under has ended by then.
  const pool = await testbedPool(dataDir, [], {
    checkHold: () => new Promise((resolve) => setTimeout(() => resolve(true), 600)),
  });
  try {
    const warm = await pool.run(0, testbed("a"), 1, request("/rows"), Date.now() + 10_000);
    assert.equal(warm.kind, "response");
    // Sent with a lease already over: refused before it runs, nothing written.
    const late = await pool.run(0, testbed("a"), 1, request("/insert?late"), Date.now() - 1);
    assert.equal(late.kind === "failed" && late.status, 503, JSON.stringify(late));
    assert.match(late.kind === "failed" ? late.message : "", /lease ran out before the event/);
    // A durable write whose wait outlives the lease: it does nothing more after it.
    const durable = await pool.run(0, testbed("a"), 1, request("/durable"), Date.now() + 300);
    assert.equal(durable.kind === "failed" && durable.status, 503, JSON.stringify(durable));
    const rows = await pool.run(0, testbed("a"), 1, request("/rows"), Date.now() + 10_000);
    assert.equal(
      rows.kind === "response" && new TextDecoder().decode(rows.response.body),
      "1",
      "the late insert never ran; the durable write committed before its wait",
    );
  } finally {
    await pool.close();
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("a lease renewed while an event waits lets it finish; a discard-all ends the renewal", async () => {
  const dataDir = await Deno.makeTempDir();
  // The hold check is answered after 600 ms, past the end the events are sent with.
  const pool = await testbedPool(dataDir, [], {
    checkHold: () => new Promise((resolve) => setTimeout(() => resolve(true), 600)),
  });
  try {
    const warm = await pool.run(0, testbed("a"), 1, request("/rows"), Date.now() + 10_000);
    assert.equal(warm.kind, "response");
    const renewed = pool.run(0, testbed("a"), 1, request("/durable"), Date.now() + 300);
    await new Promise((r) => setTimeout(r, 100));
    pool.extendLease(Date.now() + 10_000);
    const outcome = await renewed;
    assert.equal(
      outcome.kind === "response" && outcome.response.status,
      200,
      JSON.stringify(outcome),
    );

    // The lease ran out (discard-all): what it was renewed to no longer counts.
    pool.discardAll();
    const after = pool.run(0, testbed("b"), 2, request("/durable"), Date.now() + 300);
    const late = await after;
    assert.equal(late.kind === "failed" && late.status, 503, JSON.stringify(late));
    assert.match(late.kind === "failed" ? late.message : "", /lease ran out before the event/);
  } finally {
    await pool.close();
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("closing the pool answers the events still pending", async () => {
  const dataDir = await Deno.makeTempDir();
  const pool = await testbedPool(dataDir, []);
  try {
    const looping = pool.run(0, testbed("busy"), 1, request("/loop"));
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
    const outcome = await pool.run(0, testbed("cli"), 1, request("/self"));
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

Deno.test("a call's answer too large for a message to the caller fails the call, not the node", async () => {
  const dataDir = await Deno.makeTempDir();
  // Fits a "done" frame of the callee's executor, not the "call-answer" to the caller's.
  const body = new Uint8Array(MAX_FRAME_BYTES - 64);
  const pool = await testbedPool(dataDir, [], {
    replicate: false,
    onCall: () => Promise.resolve({ ok: true, response: { status: 200, headers: [], body } }),
  });
  try {
    const outcome = await pool.run(0, testbed("caller"), 1, request("/call?testbed/callee"));
    assert.equal(outcome.kind, "response");
    if (outcome.kind !== "response") return;
    assert.equal(outcome.response.status, 502);
    assert.match(
      new TextDecoder().decode(outcome.response.body),
      /call failed: the answer does not fit a message to the caller/,
    );
    const next = await pool.run(0, testbed("caller"), 1, request("/rows"));
    assert.equal(next.kind, "response");
  } finally {
    await pool.close();
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("an event waiting behind its actor's drop has not started: a loop meanwhile is the event that gets the 504", async () => {
  const dataDir = await Deno.makeTempDir();
  const slow = `${dataDir}/slow-put-ms`;
  Deno.env.set(SLOW_PUT_FILE_VARIABLE, slow);
  const handedBack: UnstartedEvent[] = [];
  const pool = await testbedPool(dataDir, [], {
    command: slowBucketExecutorCommand(dataDir),
    onExecutorReplaced: (_, unstarted) => {
      handedBack.push(...unstarted);
      for (const event of unstarted) {
        event.resolve({ kind: "failed", status: 503, message: "handed back" });
      }
    },
  });
  try {
    const x = testbed("dropped");
    assert.equal((await pool.run(0, x, 1, request("/insert?a"))).kind, "response");
    await new Promise((r) => setTimeout(r, 500)); // its upload lands
    // The next upload, and the drop that waits for it, outlast the loop's 504.
    Deno.writeTextFileSync(slow, String(EVENT_TIMEOUT_MS + 6000));
    assert.equal((await pool.run(0, x, 1, request("/insert?b"))).kind, "response");
    const dropped = pool.drop(x, 1);
    const behindDrop = pool.run(0, x, 2, request("/rows"));
    await new Promise((r) => setTimeout(r, 200));
    // The drop holds no executor: this runs at once, and loops.
    const loop = await pool.run(0, testbed("looper"), 1, request("/loop"));

    assert.equal(loop.kind === "failed" && loop.status, 504);
    const waited = await behindDrop;
    assert.deepEqual(waited, { kind: "failed", status: 503, message: "handed back" });
    assert.deepEqual(handedBack.map((event) => `${event.actor.name} ${event.request.path}`), [
      "dropped /rows",
    ]);
    assert.equal(await dropped, false, "the replaced executor's drop did not land");
  } finally {
    Deno.writeTextFileSync(slow, "0");
    await pool.close();
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("an executor that cannot be started at all is tried again after the back-off, and the node goes on", async () => {
  const dataDir = await Deno.makeTempDir();
  const lines: string[] = [];
  let starts = 0;
  const pool = await testbedPool(dataDir, lines, {
    command: () => {
      starts++;
      return { program: `${dataDir}/no-such-program`, args: [] };
    },
  });
  try {
    // An executor starts on its shard's first event.
    const first = await pool.run(0, testbed("first"), 1, request("/rows"));
    assert.equal(first.kind === "failed" && first.status, 503);
    await new Promise((r) => setTimeout(r, 1500));
    assert.ok(starts >= 2 && starts <= 6, `tried ${starts} times in 1.5 s`);
    assert.ok(
      lines.some((line) => line.includes("executor could not be started")),
      lines.join("\n"),
    );
    const outcome = await pool.run(0, testbed("any"), 1, request("/rows"));
    assert.equal(outcome.kind === "failed" && outcome.status, 503);
  } finally {
    await pool.close();
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("closing the pool waits for the actors' last uploads to land, up to its grace", async () => {
  const root = await Deno.makeTempDir();
  const bucketUrl = `file://${root}/bucket`;
  const slow = `${root}/slow-put-ms`;
  Deno.env.set(SLOW_PUT_FILE_VARIABLE, slow);
  const first = await testbedPool(`${root}/a`, [], {
    command: slowBucketExecutorCommand(root),
    bucketUrl,
  });
  let second: ExecutorPool | undefined;
  try {
    assert.equal((await first.run(0, testbed("late"), 1, request("/insert?a"))).kind, "response");
    // Each upload now takes 4 s, and one actor's go one after the other:
    // past the 5 s the pool used to give, within its grace now.
    Deno.writeTextFileSync(slow, "4000");
    for (const value of ["b", "c", "d"]) {
      assert.equal(
        (await first.run(0, testbed("late"), 1, request(`/insert?${value}`))).kind,
        "response",
      );
    }
    const started = performance.now();
    await first.close();
    assert.ok(performance.now() - started >= 6_000, "the close waited for the uploads");
    Deno.writeTextFileSync(slow, "0");
    // Another node restores the actor from the bucket: every write is there.
    second = await testbedPool(`${root}/b`, [], { bucketUrl });
    const rows = await second.run(0, testbed("late"), 2, request("/rows"));
    assert.equal(rows.kind, "response");
    if (rows.kind === "response") assert.equal(new TextDecoder().decode(rows.response.body), "4");
  } finally {
    Deno.writeTextFileSync(slow, "0");
    await first.close();
    await second?.close();
    await Deno.remove(root, { recursive: true });
  }
});

Deno.test("closing the pool does not wait for an executor still running an event", async () => {
  const dataDir = await Deno.makeTempDir();
  const pool = await testbedPool(dataDir, [], { eventTimeoutMs: 60_000 });
  try {
    const loop = pool.run(0, testbed("looper"), 1, request("/loop"));
    await new Promise((r) => setTimeout(r, 300));
    const started = performance.now();
    await pool.close();
    assert.ok(performance.now() - started < 3_000, `closed in ${performance.now() - started} ms`);
    const outcome = await loop;
    assert.equal(outcome.kind === "failed" && outcome.status, 503);
  } finally {
    await Deno.remove(dataDir, { recursive: true });
  }
});

/** Starts the executor after `seconds`, as a busy machine may. */
function slowStartCommand(seconds: number): (socketPath: string) => {
  program: string;
  args: string[];
} {
  const module = new URL("../../src/executor/main.ts", import.meta.url).href;
  return (socketPath) => ({
    program: "sh",
    args: [
      "-c",
      `sleep ${seconds}; exec "$0" run -A --no-prompt "$1" "$2" "$3"`,
      Deno.execPath(),
      module,
      socketPath,
      String(Deno.pid),
    ],
  });
}

Deno.test("an executor that starts slower than what is left of the lease runs its first event under the renewal", async () => {
  const dataDir = await Deno.makeTempDir();
  // An executor starts on its shard's first event; this one takes 1.5 s.
  const pool = await testbedPool(dataDir, [], { command: slowStartCommand(1.5) });
  try {
    // Sent under a lease with 1 s left, renewed while the executor starts.
    const first = pool.run(0, testbed("a"), 1, request("/rows"), Date.now() + 1000);
    await new Promise((r) => setTimeout(r, 500));
    pool.extendLease(Date.now() + 10_000);
    const outcome = await first;
    assert.equal(outcome.kind, "response", JSON.stringify(outcome));
  } finally {
    await pool.close();
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("an executor's start is not its first event's time", async () => {
  const dataDir = await Deno.makeTempDir();
  const pool = await testbedPool(dataDir, [], {
    command: slowStartCommand(1.5),
    eventTimeoutMs: 1000,
  });
  try {
    const outcome = await pool.run(0, testbed("a"), 1, request("/rows"));
    assert.equal(outcome.kind, "response", JSON.stringify(outcome));
  } finally {
    await pool.close();
    await Deno.remove(dataDir, { recursive: true });
  }
});

/** Starts the real executor module, counting its launches and keeping their sockets' paths. */
function countedCommand(launches: { count: number; sockets?: string[] }) {
  const module = new URL("../../src/executor/main.ts", import.meta.url).href;
  return (socketPath: string) => {
    launches.count++;
    launches.sockets?.push(socketPath);
    return {
      program: Deno.execPath(),
      args: ["run", "-A", "--no-prompt", module, socketPath, String(Deno.pid)],
    };
  };
}

Deno.test("many actors' first events at once on a shard not started yet start one executor, and all run", async () => {
  const dataDir = await Deno.makeTempDir();
  const launches = { count: 0 };
  const pool = await testbedPool(dataDir, [], { command: countedCommand(launches) });
  try {
    const outcomes = await Promise.all(
      Array.from({ length: 50 }, (_, i) => pool.run(0, testbed(`a${i}`), 1, request("/self"))),
    );
    assert.deepEqual(outcomes.filter((outcome) => outcome.kind !== "response"), []);
    assert.equal(launches.count, 1);
  } finally {
    await pool.close();
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("closing the pool while its executor starts answers the first event 503 and leaves no process", async () => {
  const dataDir = await Deno.makeTempDir();
  const launches = { count: 0, sockets: [] as string[] };
  const pool = await testbedPool(dataDir, [], { command: countedCommand(launches) });
  try {
    const first = pool.run(0, testbed("a"), 1, request("/self"));
    // Launched, not ready: a process loads its modules for longer than this.
    await new Promise((r) => setTimeout(r, 100));
    await pool.close();
    const outcome = await first;
    assert.equal(outcome.kind === "failed" && outcome.status, 503);
    assert.equal(launches.count, 1);
    // Other tests' processes may run beside it (--parallel): its own is found by its socket.
    const found = await new Deno.Command("pgrep", { args: ["-f", launches.sockets[0]] }).output();
    assert.equal(new TextDecoder().decode(found.stdout).trim(), "");
  } finally {
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("an executor that does not start within its start allowance fails its first event 503 naming the start, not a 504 of the event", async () => {
  const dataDir = await Deno.makeTempDir();
  // Slower than EXECUTOR_START_MS (10 s) and the event's 1 s together.
  const pool = await testbedPool(dataDir, [], {
    command: slowStartCommand(13),
    eventTimeoutMs: 1000,
  });
  try {
    const outcome = await pool.run(0, testbed("a"), 1, request("/rows"));
    assert.deepEqual(outcome, {
      kind: "failed",
      status: 503,
      message: "the actor's executor did not start within 11 s; retry",
    });
  } finally {
    await pool.close();
    await Deno.remove(dataDir, { recursive: true });
  }
});
