import assert from "node:assert/strict";
import {
  ReadLimiter,
  type ReadPermit,
  RESTORE_MAX_READ_BYTES,
  RESTORE_MAX_READS,
} from "../../src/replication/read_limiter.ts";

// Lets granted promises settle.
async function settle(): Promise<void> {
  for (let i = 0; i < 10; i++) await Promise.resolve();
}

// Records the order permits are granted in, and the limiter's counts at each grant.
function tracker(limiter: ReadLimiter) {
  const order: string[] = [];
  const permits = new Map<string, ReadPermit>();
  let maxReads = 0, maxBytes = 0;
  const ask = (name: string, bytes: number, signal?: AbortSignal) =>
    limiter.acquire(bytes, signal).then((permit) => {
      order.push(name);
      permits.set(name, permit);
      maxReads = Math.max(maxReads, limiter.reads);
      maxBytes = Math.max(maxBytes, limiter.bytes);
      return permit;
    });
  return { order, permits, ask, peaks: () => ({ maxReads, maxBytes }) };
}

Deno.test("ReadLimiter: the defaults are the spec's", () => {
  assert.equal(RESTORE_MAX_READS, 32);
  assert.equal(RESTORE_MAX_READ_BYTES, 256 * 1024 * 1024);
  const limiter = new ReadLimiter();
  assert.equal(limiter.maxReads, 32);
  assert.equal(limiter.maxBytes, 256 * 1024 * 1024);
  assert.throws(() => new ReadLimiter(0), RangeError);
  assert.throws(() => new ReadLimiter(1, 0), RangeError);
});

Deno.test("ReadLimiter: never more than N reads or B bytes at once", async () => {
  const limiter = new ReadLimiter(3, 1000);
  const t = tracker(limiter);
  const sizes = [400, 300, 200, 500, 100, 100, 600, 50, 50, 50];
  const done = sizes.map((bytes, i) => t.ask(`r${i}`, bytes));
  await settle();
  for (let round = 0; round < sizes.length; round++) {
    // Release the oldest permit held.
    const name = t.order.find((n) => t.permits.has(n));
    if (!name) break;
    t.permits.get(name)!.release();
    t.permits.delete(name);
    await settle();
  }
  await Promise.all(done);
  assert.equal(t.order.length, sizes.length);
  assert.ok(t.peaks().maxReads <= 3);
  assert.ok(t.peaks().maxBytes <= 1000);
  assert.equal(limiter.reads, 0);
  assert.equal(limiter.bytes, 0);
});

Deno.test("ReadLimiter: first come, first served: a large read is not overtaken", async () => {
  const limiter = new ReadLimiter(10, 1000);
  const t = tracker(limiter);
  await t.ask("a", 600);
  const big = t.ask("big", 800);
  const small = t.ask("small", 100); // would fit now, but waits behind "big"
  await settle();
  assert.deepEqual(t.order, ["a"]);
  assert.equal(limiter.waiting, 2);
  t.permits.get("a")!.release();
  await big;
  await small;
  assert.deepEqual(t.order, ["a", "big", "small"]);
  // Releasing twice gives back only once.
  t.permits.get("big")!.release();
  t.permits.get("big")!.release();
  assert.equal(limiter.bytes, 100);
  t.permits.get("small")!.release();
});

Deno.test("ReadLimiter: a read larger than the byte limit waits until alone, then runs", async () => {
  const limiter = new ReadLimiter(4, 1000);
  const t = tracker(limiter);
  await t.ask("a", 10);
  const huge = t.ask("huge", 5000);
  await settle();
  assert.deepEqual(t.order, ["a"]);
  t.permits.get("a")!.release();
  const permit = await huge;
  assert.equal(permit.bytes, 1000);
  assert.equal(limiter.bytes, 1000);
  permit.release();
});

Deno.test("ReadLimiter: an aborted wait leaves the queue and lets those behind it in", async () => {
  const limiter = new ReadLimiter(1, 1000);
  const t = tracker(limiter);
  await t.ask("a", 10);
  const controller = new AbortController();
  const aborted = t.ask("b", 10, controller.signal).catch((e) => e);
  const c = t.ask("c", 10);
  await settle();
  controller.abort(new Error("gave up"));
  assert.equal((await aborted).message, "gave up");
  assert.equal(limiter.waiting, 1);
  t.permits.get("a")!.release();
  await c;
  assert.deepEqual(t.order, ["a", "c"]);
  // Head-of-line: aborting the head lets the next one in at once.
  const big = new ReadLimiter(5, 100);
  const hold = await big.acquire(60);
  const head = new AbortController();
  const blocked = big.acquire(80, head.signal).catch((e) => e);
  let smallIn = false;
  const small = big.acquire(30).then((p) => (smallIn = true, p));
  await settle();
  assert.equal(smallIn, false);
  head.abort(new Error("no"));
  await blocked;
  (await small).release();
  assert.equal(smallIn, true);
  hold.release();
  // An already-aborted signal is refused without queueing.
  await assert.rejects(big.acquire(1, AbortSignal.abort(new Error("late"))), /late/);
  assert.equal(big.waiting, 0);
});
