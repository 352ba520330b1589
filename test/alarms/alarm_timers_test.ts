import assert from "node:assert/strict";
import { FakeClock } from "../bucket/fake_clock.ts";
import { AlarmTimers, type FireResult } from "../../src/alarms/alarm_timers.ts";
import { AlarmIndex } from "../../src/alarms/alarm_index.ts";
import { decodeHandover, encodeHandover } from "../../src/alarms/alarm_handover.ts";
import { MemoryBucket } from "../../src/bucket/memory.ts";
import { BucketView } from "../../src/bucket/bucket_view.ts";
import { createLogger } from "../../src/log.ts";
import type { ActorKey } from "../../src/actors/key.ts";

const log = createLogger({ level: "error", sink: () => {} });
const key = (name: string): ActorKey => ({ tenant: "default", class: "c", name });

/** Timers whose firings are recorded and answered by `answer`. */
function timers(
  clock: FakeClock,
  answer: (name: string, due: number) => FireResult,
  maxFiring?: number,
) {
  const fired: { name: string; due: number; at: number }[] = [];
  let running = 0;
  let peak = 0;
  const t = new AlarmTimers({
    clock,
    log,
    maxFiring,
    retryMaxMs: 4_000,
    fire: async (k, due) => {
      running++;
      peak = Math.max(peak, running);
      fired.push({ name: k.name, due, at: clock.now() });
      await clock.sleep(10);
      running--;
      return answer(k.name, due);
    },
  });
  return { t, fired, peak: () => peak };
}

Deno.test("alarm timers: an alarm fires at its due time, once; a new time re-arms it and none disarms it", async () => {
  const clock = new FakeClock();
  const start = clock.now();
  const { t, fired } = timers(clock, () => "fired");
  t.seen(key("a"), start + 1_000);
  t.seen(key("b"), start + 500);
  t.seen(key("c"), start + 700);
  t.seen(key("c"), null);
  await clock.advance(2_000);
  assert.deepEqual(fired.map((f) => [f.name, f.at - start]), [["b", 500], ["a", 1_000]]);
  assert.equal(t.size, 0);
});

Deno.test("alarm timers: a failed firing is retried from 1 s, doubling up to the ceiling", async () => {
  const clock = new FakeClock();
  const start = clock.now();
  let failures = 5;
  const { t, fired } = timers(clock, () => failures-- > 0 ? "failed" : "fired");
  t.seen(key("a"), start);
  await clock.advance(30_000);
  // Each attempt 10 ms long, then 1, 2, 4, 4 (the ceiling), 4 s of backoff.
  const gaps = fired.slice(1).map((f, i) => f.at - fired[i].at - 10);
  assert.deepEqual(gaps, [1_000, 2_000, 4_000, 4_000, 4_000]);
  assert.equal(t.size, 0);
});

Deno.test("alarm timers: at most maxFiring at once, earliest first; an alarm armed twice is fired once", async () => {
  const clock = new FakeClock();
  const start = clock.now();
  const { t, fired, peak } = timers(clock, () => "fired", 3);
  for (let i = 9; i >= 0; i--) t.seen(key(`n${i}`), start + i);
  t.arm(key("n0"), start, "sweep");
  await clock.advance(1_000);
  assert.equal(fired.length, 10);
  assert.equal(peak(), 3);
  assert.deepEqual(fired.map((f) => f.name), Array.from({ length: 10 }, (_, i) => `n${i}`));
});

Deno.test("alarm index: an overdue listing stops at the first entry not due, and skips foreign keys", async () => {
  let lists = 0;
  const bucket = new BucketView(new MemoryBucket(), {
    before: ({ op }) => void (op === "list" && lists++),
  });
  const index = new AlarmIndex(bucket);
  for (let i = 0; i < 250; i++) await index.put(1_000 + i, key(`x${i}`));
  // Not an entry, and sorted before every one.
  await bucket.put("alarms/default/0/c/x", new Uint8Array());
  lists = 0;
  const due = [];
  for await (const entry of index.overdue("default", 1_149, { pageKeys: 100 })) {
    due.push(entry.dueMs);
  }
  assert.equal(due.length, 150);
  assert.equal(due[149], 1_149);
  assert.equal(lists, 2);
  lists = 0;
  for await (const _ of index.overdue("default", 999)) assert.fail("nothing is due");
  assert.equal(lists, 1);
  await index.delete(1_000, key("x0"));
  const first = await index.overdue("default", 1_000).next();
  assert.equal(first.done, true);
});

Deno.test("alarm hand-over: a message reads back with its sender's app, and a malformed one is refused", () => {
  const alarms = [{ key: key("a/b"), due: 5 }, { key: key("c"), due: 1_700_000_000_000 }];
  for (const app of ["acme/shop", null]) {
    assert.deepEqual(decodeHandover(encodeHandover({ app, alarms })), { app, alarms });
  }
  // From a version that did not name its app.
  const text = (value: string) => new TextEncoder().encode(value);
  assert.deepEqual(decodeHandover(text('{"alarms":[["default","c","n",1]]}')), {
    app: undefined,
    alarms: [{ key: key("n"), due: 1 }],
  });
  const bad = (value: string) => () => decodeHandover(text(value));
  assert.throws(bad("nope"), /not JSON/);
  assert.throws(bad('{"app":"","alarms":[]}'), /app is tenant\/app, or null/);
  assert.throws(bad('{"app":7,"alarms":[]}'), /app is tenant\/app, or null/);
  assert.throws(bad('{"alarms":[["default","c","",1]]}'), /tenant, class, name, due/);
  assert.throws(bad('{"alarms":[["default","c","n",-1]]}'), /tenant, class, name, due/);
  assert.throws(bad("{}"), /at most/);
});
