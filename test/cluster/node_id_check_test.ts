import assert from "node:assert/strict";
import { FakeClock } from "../bucket/fake_clock.ts";
import { MemoryBucket } from "../../src/bucket/memory.ts";
import type { CallOptions, StoredObject } from "../../src/bucket/bucket.ts";
import { createLogger } from "../../src/log.ts";
import { encodeHeartbeat, type Heartbeat } from "../../src/cluster/heartbeat.ts";
import { leaseTiming } from "../../src/cluster/lease_timing.ts";
import { checkNodeId, type NodeIdChecked, NodeIdInUse } from "../../src/cluster/node_id_check.ts";

const KEY = "nodes/a";
const timing = leaseTiming();

/** A memory bucket that records when each read was made. */
class RecordingBucket extends MemoryBucket {
  readonly reads: number[] = [];
  constructor(readonly clock: FakeClock) {
    super({ clock });
  }
  override get(key: string, options?: CallOptions): Promise<StoredObject | null> {
    this.reads.push(this.clock.now());
    return super.get(key, options);
  }
}

function setup() {
  const clock = new FakeClock();
  const t0 = clock.now();
  const bucket = new RecordingBucket(clock);
  const lines: string[] = [];
  const log = createLogger({ level: "debug", sink: (l) => lines.push(l), now: () => clock.now() });
  const check = (signal?: AbortSignal) =>
    checkNodeId({ bucket, clock, log, nodeId: "a", timing, signal });
  return { clock, t0, bucket, lines, check };
}

/** The heartbeat of another process of node `a`. */
function heartbeat(fields: Partial<Heartbeat> & Pick<Heartbeat, "at" | "lease">): Uint8Array {
  return encodeHeartbeat({
    format: 2,
    nodeId: "a",
    process: "old-process",
    address: "http://10.0.0.5:8080",
    readsSecrets: false,
    takesMoved: true,
    version: "0.3.0",
    state: "serving",
    ...fields,
  });
}

/** Runs the check to its end; the time it took and what it returned or threw. */
async function run(
  clock: FakeClock,
  check: Promise<NodeIdChecked>,
): Promise<{ ms: number; result?: NodeIdChecked; error?: unknown }> {
  const ms = await clock.runUntilSettled(check);
  try {
    return { ms, result: await check };
  } catch (error) {
    return { ms, error };
  }
}

Deno.test("node id check: a first start with no object reads for exactly 15 s", async () => {
  const { clock, t0, bucket, lines, check } = setup();
  const { ms, result } = await run(clock, check());
  assert.equal(ms, 15_000);
  assert.deepEqual(result, { etag: undefined });
  // Every half period, the last one at the end.
  assert.deepEqual(bucket.reads.map((t) => t - t0), [
    0,
    1_500,
    3_000,
    4_500,
    6_000,
    7_500,
    9_000,
    10_500,
    12_000,
    13_500,
    15_000,
  ]);
  assert.match(lines[0], /INFO {2}checking that no other process runs with this node id/);
});

Deno.test("node id check: a heartbeat rewritten during the check is a running process", async () => {
  const { clock, t0, bucket, check } = setup();
  await bucket.put(KEY, heartbeat({ at: t0 - 1_000, lease: "live" }));
  // The other process renews every 3 s.
  for (let t = 2_000; t < 30_000; t += 3_000) {
    clock.setTimer(t, () => void bucket.put(KEY, heartbeat({ at: t0 + t, lease: "live" })));
  }
  const { ms, error } = await run(clock, check());
  assert.equal(ms, 3_000, "refused at the first read after its renewal");
  assert.ok(error instanceof NodeIdInUse);
  assert.equal(error.address, "http://10.0.0.5:8080");
  assert.equal(error.process, "old-process");
  assert.match(error.message, /http:\/\/10\.0\.0\.5:8080/);
  assert.match(error.message, /let the service manager retry this start once it has stopped/);
});

Deno.test("node id check: a heartbeat that appears during the check is a running process", async () => {
  const { clock, t0, bucket, check } = setup();
  clock.setTimer(4_000, () => void bucket.put(KEY, heartbeat({ at: t0 + 4_000, lease: "live" })));
  const { ms, error } = await run(clock, check());
  assert.equal(ms, 4_500);
  assert.ok(error instanceof NodeIdInUse);
});

Deno.test("node id check: released, its last live write 20 s old: passes after half a period", async () => {
  const { clock, t0, bucket, check } = setup();
  const { etag } = await bucket.put(KEY, heartbeat({ at: t0 - 20_000, lease: "released" }));
  const { ms, result } = await run(clock, check());
  assert.equal(ms, 1_500);
  assert.deepEqual(result, { etag, predecessor: { process: "old-process", at: t0 - 20_000 } });
  assert.deepEqual(bucket.reads.map((t) => t - t0), [0, 1_500]);
});

Deno.test("node id check: released 5 s ago: passes when its last live write is 15 s old", async () => {
  const { clock, t0, bucket, check } = setup();
  const { etag } = await bucket.put(KEY, heartbeat({ at: t0 - 5_000, lease: "released" }));
  const { ms, result } = await run(clock, check());
  assert.equal(ms, 10_000);
  assert.deepEqual(result, { etag, predecessor: { process: "old-process", at: t0 - 5_000 } });
});

Deno.test("node id check: fenced: passes when its last live write is 15 s old", async () => {
  const { clock, t0, bucket, check } = setup();
  const { etag } = await bucket.put(
    KEY,
    heartbeat({ at: t0 - 5_000, lease: "fenced", fencedBy: "b" }),
  );
  assert.deepEqual(await run(clock, check()), {
    ms: 10_000,
    result: { etag, predecessor: { process: "old-process", at: t0 - 5_000 } },
  });

  const old = setup();
  await old.bucket.put(
    KEY,
    heartbeat({ at: old.t0 - 60_000, lease: "fenced", fencedBy: "b" }),
  );
  assert.equal((await run(old.clock, old.check())).ms, 1_500);
});

Deno.test("node id check: released during the check (a clean stop) is not a running process", async () => {
  const { clock, t0, bucket, check } = setup();
  const live = await bucket.put(KEY, heartbeat({ at: t0 - 500, lease: "live" }));
  clock.setTimer(1_000, () =>
    void bucket.put(KEY, heartbeat({ at: t0 - 500, lease: "released" }), {
      ifMatch: live.etag,
    }));
  const { ms, result } = await run(clock, check());
  assert.equal(ms, 14_500, "until its last live write is 15 s old");
  assert.equal(result?.etag, (await bucket.head(KEY))!.etag);
});

Deno.test("node id check: a live heartbeat that stops changing (a crash) waits until it is 15 s old", async () => {
  // Written just before the check: 15 s.
  const now = setup();
  await now.bucket.put(KEY, heartbeat({ at: now.t0, lease: "live" }));
  assert.equal((await run(now.clock, now.check())).ms, 15_000);

  // Dated 3 s ahead of this clock: 18 s, as a fencer would wait.
  const ahead = setup();
  const { etag } = await ahead.bucket.put(KEY, heartbeat({ at: ahead.t0 + 3_000, lease: "live" }));
  assert.deepEqual(await run(ahead.clock, ahead.check()), {
    ms: 18_000,
    result: { etag, predecessor: { process: "old-process", at: ahead.t0 + 3_000 } },
  });

  // Already stale: still the whole 15 s of reads, as for a first start.
  const stale = setup();
  await stale.bucket.put(KEY, heartbeat({ at: stale.t0 - 60_000, lease: "live" }));
  assert.equal((await run(stale.clock, stale.check())).ms, 15_000);
});

Deno.test("node id check: a format-1 heartbeat keeps it waiting until its time is 25 s old", async () => {
  const { clock, t0, bucket, check } = setup();
  const text = `wasmkeep-heartbeat 1\na\nold-process\n${t0 - 2_000}\n`;
  const { etag } = await bucket.put(KEY, new TextEncoder().encode(text));
  assert.deepEqual(await run(clock, check()), {
    ms: 23_000,
    result: { etag, predecessor: { process: "old-process", at: t0 - 2_000 } },
  });

  // A format-1 process still running rewrites it: refused.
  const running = setup();
  await running.bucket.put(KEY, new TextEncoder().encode(text));
  running.clock.setTimer(
    5_000,
    () =>
      void running.bucket.put(
        KEY,
        new TextEncoder().encode(`wasmkeep-heartbeat 1\na\nold-process\n${running.t0 + 5_000}\n`),
      ),
  );
  const { error } = await run(running.clock, running.check());
  assert.ok(error instanceof NodeIdInUse);
});

Deno.test("node id check: a heartbeat deleted during the check gets the whole 15 s again", async () => {
  const { clock, t0, bucket, check } = setup();
  await bucket.put(KEY, heartbeat({ at: t0 - 60_000, lease: "released" }));
  clock.setTimer(1_000, () => void bucket.delete(KEY));
  const { ms, result } = await run(clock, check());
  assert.equal(ms, 1_500 + 15_000);
  assert.deepEqual(result, { etag: undefined });
});

Deno.test("node id check: an unreadable bucket is read again until it answers", async () => {
  const { clock, t0, bucket, lines, check } = setup();
  bucket.faults = { outages: [{ from: t0, until: t0 + 20_000 }] };
  const { ms, result } = await run(clock, check());
  // Reads fail until 20 s; the first answer (21 s) starts the 15 s of reads.
  assert.equal(ms, 21_000 + 15_000);
  assert.deepEqual(result, { etag: undefined });
  assert.equal(bucket.reads.filter((t) => t < t0 + 20_000).length, 14);
  assert.equal(lines.filter((l) => l.includes("WARN  node id check: cannot read")).length, 1);
  assert.ok(lines.some((l) => /the heartbeat can be read again .*failures=14/.test(l)));
});

Deno.test("node id check: an outage during the check: passes at the first answer after 15 s unchanged", async () => {
  const { clock, t0, bucket, check } = setup();
  const { etag } = await bucket.put(KEY, heartbeat({ at: t0 - 1_000, lease: "live" }));
  bucket.faults = { outages: [{ from: t0 + 1_000, until: t0 + 20_000 }] };
  assert.deepEqual(await run(clock, check()), {
    ms: 21_000,
    result: { etag, predecessor: { process: "old-process", at: t0 - 1_000 } },
  });
});

Deno.test("node id check: reads that never answer are given up and read again", async () => {
  const { clock, t0, bucket, check } = setup();
  bucket.faults = { timeoutRate: 1 };
  clock.setTimer(10_000, () => void (bucket.faults = {}));
  const { ms } = await run(clock, check());
  // Reads at 0, 2.7 (the first's deadline, more than half a period), 5.4, 8.1; 10.8 answers.
  assert.deepEqual(bucket.reads.map((t) => t - t0), [
    0,
    2_700,
    5_400,
    8_100,
    10_800,
    ...[12_300, 13_800, 15_300, 16_800, 18_300, 19_800, 21_300, 22_800, 24_300, 25_800],
  ]);
  assert.equal(ms, 25_800);
});

Deno.test("node id check: the signal abandons it, even while the bucket cannot be read", async () => {
  const { clock, t0, bucket, check } = setup();
  bucket.faults = { outages: [{ from: t0, until: t0 + 3_600_000 }] };
  const controller = new AbortController();
  clock.setTimer(40_000, () => controller.abort(new Error("stopping")));
  const { ms, error } = await run(clock, check(controller.signal));
  assert.equal(ms, 40_000);
  assert.equal((error as Error).message, "stopping");
});
