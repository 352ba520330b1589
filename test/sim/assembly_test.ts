/**
 * The simulator runs the node that ships (issue 16): the two drifts its
 * copies had are gone. Its clean stop is the real pool's, which gives the
 * executors 19 s to land their last uploads (the copy gave 5 s, the bug
 * 858d361 fixed), and its nodes take actors with the rule `serve` takes
 * with (the copy used the view alone, `canTakeFrom`, where `serve` reads a
 * holder's heartbeat fresh when the view says no).
 */

import assert from "node:assert/strict";
import { CLOSE_GRACE_MS, ExecutorPool } from "../../src/actors/executor_pool.ts";
import { MemoryBucket } from "../../src/bucket/memory.ts";
import type { Bucket } from "../../src/bucket/bucket.ts";
import { BucketView } from "../../src/bucket/bucket_view.ts";
import { ClusterPlane } from "../../src/cluster/cluster_plane.ts";
import { createLogger } from "../../src/log.ts";
import { seededRandom } from "../../src/bucket/random.ts";
import type { Clock } from "../../src/time/clock.ts";
import { Scheduler } from "../../sim/scheduler.ts";
import { MachineClock, ProcessClock, TrueClock } from "../../sim/clocks.ts";
import { simClass, SimExecutors } from "../../sim/executor_host.ts";
import { runSeed } from "../../sim/world.ts";

/** A bucket whose writes land `delayMs` after they were sent, on `clock`. */
function slowWrites(inner: Bucket, clock: Clock, delayMs: number): Bucket {
  return new BucketView(inner, {
    before: ({ op }) => op === "put" ? clock.sleep(delayMs) : undefined,
    close: () => Promise.resolve(),
  });
}

Deno.test("sim: a clean stop in the simulator gives the executors the real pool's 19 s: three uploads of 4 s each land before it ends", async () => {
  const sched = new Scheduler(1_700_000_000_000);
  const owner = { dead: false, paused: false, deferred: [] };
  const machine = new MachineClock(sched, {
    offsetMs: 0,
    driftPpm: 0,
    skewMs: 1000,
    random: seededRandom(1),
  });
  const clock = new ProcessClock(sched, machine, owner);
  const store = new MemoryBucket({ clock: new TrueClock(sched) });
  const log = createLogger({ level: "error" });
  const dataDir = await Deno.makeTempDir({ prefix: "wasmkeep-sim-stop-" });
  const noop = () => {};
  const executors = new SimExecutors({
    sched,
    owner,
    clock,
    bucket: slowWrites(store, clock, 4_000),
    log,
    random: seededRandom(2),
    nodeId: "a",
    observer: {
      waking: noop,
      restored: noop,
      openFailed: noop,
      runs: noop,
      read: noop,
      committed: noop,
      deleted: noop,
      alarmFired: noop,
      ran: noop,
      answered: noop,
      behind: noop,
    },
    peek: () => undefined,
  });
  const pool = new ExecutorPool({
    size: 1,
    dataDir,
    classes: [simClass("counter")],
    maxOpenDatabases: 8,
    databaseIdleMs: 3_600_000,
    eventTimeoutMs: 30_000,
    logLevel: "error",
    clock,
    log,
    launcher: executors,
    replicate: true,
    bucketUrl: "sim://bucket",
    nodeId: "a",
    historyRetentionMs: 3_600_000,
  });
  pool.start({ checkHold: () => Promise.resolve(true) });
  try {
    const actor = { tenant: "default", class: "counter", name: "x" };
    const write = (id: number) =>
      pool.run(0, actor, 1, {
        method: "POST",
        path: "/write",
        query: `id=${id}`,
        headers: [],
        body: new Uint8Array(),
      });
    // The wake's first snapshot lands (4 s), then three writes are answered
    // at once, their uploads queued behind one another.
    const first = write(1);
    await sched.runUntil(sched.now + 10_000);
    assert.equal((await first).kind, "response");
    const more = [write(2), write(3)];
    await sched.runUntil(sched.now + 100);
    for (const answered of await Promise.all(more)) assert.equal(answered.kind, "response");
    const stopAt = sched.now;
    let closedAt: number | undefined;
    const closing = pool.close().then(() => closedAt = sched.now);
    await sched.runUntil(stopAt + CLOSE_GRACE_MS + 1_000);
    await closing;
    assert.ok(
      closedAt !== undefined && closedAt - stopAt > 5_000,
      `closed after ${closedAt! - stopAt} ms`,
    );
    const files = await store.list("actors/default/counter/x/wal/");
    const ltx = files.objects.filter((o) => o.key.endsWith(".ltx")).map((o) => o.key);
    // One file per write: none was cut by the stop.
    assert.equal(ltx.length, 3, ltx.join(", "));
    assert.ok(ltx.some((key) => key.endsWith("0000000000000003-0000000000000003.ltx")));
  } finally {
    executors.killAll();
    await Deno.remove(dataDir, { recursive: true });
  }
});

Deno.test("sim: the simulator's nodes take actors with serve's rule (a holder's heartbeat read fresh when the view says no)", async () => {
  const proto = ClusterPlane.prototype as unknown as {
    canTakeFromFresh: (...args: unknown[]) => Promise<boolean>;
  };
  const original = proto.canTakeFromFresh;
  let asked = 0;
  proto.canTakeFromFresh = function (this: unknown, ...args: unknown[]) {
    asked++;
    return original.apply(this, args);
  };
  try {
    // A seed with crashes: other nodes take the dead nodes' actors.
    for (let seed = 1; seed <= 5 && asked === 0; seed++) {
      const result = await runSeed({ seed, durationMs: 120_000 });
      assert.ok(result.ok, result.violation?.message);
    }
  } finally {
    proto.canTakeFromFresh = original;
  }
  assert.ok(asked > 0, "no take asked serve's rule");
});
