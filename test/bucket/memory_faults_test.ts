import { assert, assertEquals, assertRejects } from "./assert.ts";
import { FakeClock } from "./fake_clock.ts";
import { MemoryBucket, type MemoryFaults } from "../../src/bucket/memory.ts";
import { BucketUnavailable } from "../../src/bucket/errors.ts";
import { seededRandom } from "../../src/bucket/random.ts";

const bytes = (text: string) => new TextEncoder().encode(text);

Deno.test("MemoryBucket: latency is drawn between min and max, on the clock", async () => {
  const clock = new FakeClock();
  const bucket = new MemoryBucket({ clock, faults: { latencyMs: { min: 100, max: 200 } } });
  for (let i = 0; i < 5; i++) {
    const took = await clock.runUntilSettled(bucket.put(`k${i}`, bytes("x")));
    assert(took >= 100 && took <= 200, `took ${took} ms`);
  }
});

Deno.test("MemoryBucket: error answers carry their status and apply nothing", async () => {
  const bucket = new MemoryBucket({ faults: { errorRate: 1, errorStatuses: [503] } });
  const error = await assertRejects(() => bucket.put("k", bytes("x")), BucketUnavailable);
  assertEquals(error.status, 503);
  assertEquals(error.ambiguous, false);
  bucket.faults = {};
  assertEquals(await bucket.get("k"), null);

  const mixed = new MemoryBucket({ seed: 3, faults: { errorRate: 1, errorStatuses: [500, 429] } });
  const statuses = new Set<number | undefined>();
  for (let i = 0; i < 40; i++) await mixed.head("k").catch((e) => statuses.add(e.status));
  assertEquals([...statuses].sort(), [429, 500]);
});

Deno.test("MemoryBucket: a timeout is silence until the request timeout or the caller gives up", async () => {
  const clock = new FakeClock();
  const bucket = new MemoryBucket({ clock, requestTimeoutMs: 30_000, faults: { timeoutRate: 1 } });
  const put = bucket.put("k", bytes("x"));
  const outcome = put.catch((e) => e);
  assertEquals(await clock.runUntilSettled(put), 30_000);
  const error = await outcome;
  assert(error instanceof BucketUnavailable && error.ambiguous);

  const controller = new AbortController();
  const get = bucket.get("k", { signal: controller.signal }).catch((e) => e);
  await clock.advance(5000);
  controller.abort(new Error("gave up"));
  assertEquals((await get).message, "gave up");
  bucket.faults = {};
  assertEquals(await bucket.get("k"), null);
});

Deno.test("MemoryBucket: a lost answer hides a write that was applied", async () => {
  const bucket = new MemoryBucket({ faults: { lostAnswerRate: 1 } });
  const error = await assertRejects(
    () => bucket.put("k", bytes("x"), { ifNoneMatch: "*" }),
    BucketUnavailable,
  );
  assert(error.ambiguous);
  assertEquals(new TextDecoder().decode((await bucket.get("k"))!.body), "x");
  await assertRejects(() => bucket.delete("k"), BucketUnavailable);
  assertEquals(await bucket.get("k"), null);
});

Deno.test("MemoryBucket: every call fails during an outage window", async () => {
  const clock = new FakeClock();
  const start = clock.now();
  const bucket = new MemoryBucket({
    clock,
    faults: { outages: [{ from: start + 1000, until: start + 2000 }] },
  });
  await bucket.put("k", bytes("x"));
  await clock.advance(1000);
  await assertRejects(() => bucket.get("k"), BucketUnavailable);
  await assertRejects(() => bucket.list(""), BucketUnavailable);
  await clock.advance(999);
  await assertRejects(() => bucket.put("k", bytes("y")), BucketUnavailable);
  await clock.advance(1);
  assertEquals(new TextDecoder().decode((await bucket.get("k"))!.body), "x");
});

Deno.test("MemoryBucket: slow listings take their delay per page", async () => {
  const clock = new FakeClock();
  const bucket = new MemoryBucket({ clock, faults: { listDelayMs: 4000 } });
  await bucket.put("a", bytes("x"));
  const list = bucket.list("");
  assertEquals(await clock.runUntilSettled(list), 4000);
  assertEquals((await list).objects.length, 1);
  assertEquals(await clock.runUntilSettled(bucket.get("a")), 0);
});

Deno.test("MemoryBucket: objects are stamped with the clock's time", async () => {
  const clock = new FakeClock(1_234_000);
  const bucket = new MemoryBucket({ clock });
  await bucket.put("k", bytes("x"));
  assertEquals((await bucket.head("k"))!.lastModified, 1_234_000);
});

Deno.test("MemoryBucket: the same seed replays the same faults", async () => {
  const faults: MemoryFaults = {
    latencyMs: { min: 1, max: 50 },
    errorRate: 0.2,
    timeoutRate: 0.1,
    lostAnswerRate: 0.2,
  };
  const run = async (seed: number) => {
    const clock = new FakeClock();
    const bucket = new MemoryBucket({ clock, seed, faults, requestTimeoutMs: 1000 });
    const trace: string[] = [];
    for (let i = 0; i < 60; i++) {
      const call = i % 3 === 0 ? bucket.get(`k${i % 7}`) : bucket.put(`k${i % 7}`, bytes(`${i}`));
      const outcome = call.then(
        () => "ok",
        (e) => `${e.name}:${e.status ?? ""}:${e.ambiguous}`,
      );
      const took = await clock.runUntilSettled(call);
      trace.push(`${await outcome}@${took}`);
    }
    return trace;
  };
  const first = await run(11);
  assertEquals(await run(11), first);
  assert(JSON.stringify(await run(12)) !== JSON.stringify(first));
  assert(first.some((t) => t.startsWith("ok")) && first.some((t) => !t.startsWith("ok")));
});

Deno.test("seededRandom: same seed, same numbers and bytes", () => {
  const a = seededRandom(5), b = seededRandom(5);
  const draws = Array.from({ length: 10 }, () => a.next());
  assertEquals(Array.from({ length: 10 }, () => b.next()), draws);
  assert(draws.every((x) => x >= 0 && x < 1));
  assertEquals(seededRandom(9).fill(new Uint8Array(8)), seededRandom(9).fill(new Uint8Array(8)));
});
