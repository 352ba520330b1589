import assert from "node:assert/strict";
import { FakeClock } from "../bucket/fake_clock.ts";
import { startMoto } from "../../src/testing/moto.ts";
import { MemoryBucket } from "../../src/bucket/memory.ts";
import { S3Bucket } from "../../src/bucket/s3.ts";
import type { Bucket, PutOptions } from "../../src/bucket/bucket.ts";
import { BucketUnavailable, PreconditionFailed } from "../../src/bucket/errors.ts";
import type { ActorKey } from "../../src/actors/key.ts";
import { ownerKey } from "../../src/bucket/keys.ts";
import { createLogger } from "../../src/log.ts";
import { type Clock, systemClock } from "../../src/time/clock.ts";
import {
  decodeOwnerRecord,
  encodeOwnerRecord,
  HeldElsewhere,
  type Hold,
  MalformedRecord,
  type OwnerRecord,
  OwnershipRecords,
  TAKE_MAX_RACES,
  TakeNotAllowed,
} from "../../src/cluster/ownership.ts";

const actor: ActorKey = { tenant: "acme", class: "room", name: "lobby" };
const key = ownerKey(actor);
const never = () => false;
const always = () => true;

/** Records of node `nodeId`, process `processToken`, logging into `lines`. */
function recordsOf(
  bucket: Bucket,
  clock: Clock,
  nodeId: string,
  processToken = `${nodeId}-1`,
  lines: string[] = [],
  maxPendingReleases?: number,
): OwnershipRecords {
  const log = createLogger({ level: "debug", sink: (l) => lines.push(l), now: () => clock.now() });
  return new OwnershipRecords({ bucket, clock, nodeId, processToken, log, maxPendingReleases });
}

async function stored(bucket: Bucket, k = key): Promise<OwnerRecord | null> {
  const object = await bucket.get(k);
  return object ? decodeOwnerRecord(object.body, k) : null;
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (e) {
    return e;
  }
  assert.fail("expected a rejection");
}

Deno.test("ownership: the first take creates the record at generation 1", async () => {
  const clock = new FakeClock();
  const bucket = new MemoryBucket({ clock });
  const a = recordsOf(bucket, clock, "a", "p1");
  const hold = await a.take(actor, { canTakeFrom: never });
  assert.equal(hold.generation, 1n);
  assert.equal(hold.takenAt, clock.now());
  assert.deepEqual(hold.actor, actor);
  assert.equal(hold.etag, (await bucket.head(key))!.etag);
  assert.deepEqual(await stored(bucket), {
    version: 1,
    node: "a",
    process: "p1",
    generation: 1n,
    state: "held",
    at: clock.now(),
  });
  const text = new TextDecoder().decode((await bucket.get(key))!.body);
  assert.match(text, /"generation":"0000000000000001"/);
  assert.equal(await a.stillHolds(hold), true);
});

Deno.test("ownership: release keeps the generation; the next take is generation 2", async () => {
  const clock = new FakeClock();
  const bucket = new MemoryBucket({ clock });
  const a = recordsOf(bucket, clock, "a");
  const b = recordsOf(bucket, clock, "b");
  const first = await a.take(actor, { canTakeFrom: never });
  await clock.advance(500);
  await a.release(first);
  const released = await stored(bucket);
  assert.equal(released?.state, "released");
  assert.equal(released?.generation, 1n);
  assert.equal(released?.at, clock.now());
  assert.equal(await a.stillHolds(first), false);
  // A released record is free for anyone: canTakeFrom is not even asked.
  const second = await b.take(actor, { canTakeFrom: () => assert.fail("asked") });
  assert.equal(second.generation, 2n);
  assert.equal((await stored(bucket))?.node, "b");
  assert.equal(a.pendingReleases, 0);
});

Deno.test("ownership: a restarted process of the same node takes its own back", async () => {
  const clock = new FakeClock();
  const bucket = new MemoryBucket({ clock });
  const before = recordsOf(bucket, clock, "a", "p1");
  const after = recordsOf(bucket, clock, "a", "p2");
  const old = await before.take(actor, { canTakeFrom: never });
  const hold = await after.take(actor, { canTakeFrom: never });
  assert.equal(hold.generation, old.generation + 1n);
  assert.equal((await stored(bucket))?.process, "p2");
  assert.equal(await before.stillHolds(old), false);
  assert.equal(await after.stillHolds(hold), true);
});

Deno.test("ownership: another node's hold is refused unless canTakeFrom allows it", async () => {
  const clock = new FakeClock();
  const bucket = new MemoryBucket({ clock });
  const a = recordsOf(bucket, clock, "a", "pa");
  const b = recordsOf(bucket, clock, "b", "pb");
  const held = await a.take(actor, { canTakeFrom: never });
  const asked: OwnerRecord[] = [];
  const refused = await rejection(
    b.take(actor, { canTakeFrom: (r) => (asked.push(r), false) }),
  );
  assert.ok(refused instanceof HeldElsewhere);
  assert.equal(refused.key, key);
  assert.equal(refused.node, "a");
  assert.equal(refused.process, "pa");
  assert.equal(refused.generation, 1n);
  assert.equal(refused.races, 0);
  assert.deepEqual(asked.map((r) => [r.node, r.generation]), [["a", 1n]]);
  assert.equal(await a.stillHolds(held), true);

  // An asynchronous verdict counts as well (a check may read the node's heartbeat).
  const taken = await b.take(actor, { canTakeFrom: () => Promise.resolve(true) });
  assert.equal(taken.generation, 2n);
  assert.equal(await a.stillHolds(held), false);
  assert.equal(await b.stillHolds(taken), true);
});

/** A memory bucket that counts the writes it refused. */
class CountingBucket extends MemoryBucket {
  refused = 0;
  override async put(k: string, body: Uint8Array, options: PutOptions = {}) {
    try {
      return await super.put(k, body, options);
    } catch (e) {
      if (e instanceof PreconditionFailed) this.refused++;
      throw e;
    }
  }
}

Deno.test("ownership: concurrent takes by two nodes: generations increase, one hold stands", async () => {
  const clock = new FakeClock();
  // Latency lets reads and writes of the two nodes interleave.
  const bucket = new CountingBucket({ clock, seed: 7, faults: { latencyMs: { min: 0, max: 40 } } });
  const nodes = [recordsOf(bucket, clock, "a"), recordsOf(bucket, clock, "b")];
  const holds: Hold[] = [];
  let gaveUp = 0;
  const run = async (records: OwnershipRecords) => {
    for (let i = 0; i < 8; i++) {
      try {
        holds.push(await records.take(actor, { canTakeFrom: always }));
      } catch (e) {
        // Only possible after TAKE_MAX_RACES lost races in a row.
        assert.ok(e instanceof HeldElsewhere && e.races === TAKE_MAX_RACES, String(e));
        gaveUp++;
      }
    }
  };
  await clock.runUntilSettled(Promise.all(nodes.map(run)));
  bucket.faults = {};
  assert.ok(bucket.refused > 0, "the two nodes never raced: the test proves nothing");
  assert.equal(holds.length + gaveUp, 16);
  assert.ok(holds.length >= 8, `only ${holds.length} takes succeeded`);
  // Holds complete in the order their writes landed: generations strictly increase.
  for (let i = 1; i < holds.length; i++) {
    assert.ok(holds[i].generation > holds[i - 1].generation, `hold ${i} not after ${i - 1}`);
  }
  assert.equal(new Set(holds.map((h) => h.etag)).size, holds.length);
  const last = holds[holds.length - 1];
  assert.equal((await stored(bucket))?.generation, last.generation);
  const standing = [];
  for (const hold of holds) if (await nodes[0].stillHolds(hold)) standing.push(hold);
  assert.deepEqual(standing, [last]);
});

Deno.test("ownership: two first takes racing for a missing record both end with a generation", async () => {
  const clock = new FakeClock();
  const bucket = new MemoryBucket({ clock });
  const a = recordsOf(bucket, clock, "a");
  const b = recordsOf(bucket, clock, "b");
  // Both read "missing" before either writes; the refused create reads again and takes over.
  const [ha, hb] = await Promise.all([
    a.take(actor, { canTakeFrom: always }),
    b.take(actor, { canTakeFrom: always }),
  ]);
  assert.deepEqual([ha.generation, hb.generation].sort(), [1n, 2n]);
  assert.notEqual(ha.etag, hb.etag);
  const results = [await a.stillHolds(ha), await b.stillHolds(hb)];
  assert.equal(results.filter(Boolean).length, 1);
});

/** A bucket where another writer lands just before every write to the record. */
class InterloperBucket extends MemoryBucket {
  puts = 0;
  override async put(k: string, body: Uint8Array, options: PutOptions = {}) {
    if (k === key) {
      this.puts++;
      const current = await this.get(k);
      const generation = current ? decodeOwnerRecord(current.body).generation + 1n : 1n;
      await super.put(
        k,
        encodeOwnerRecord({
          version: 1,
          node: "c",
          process: "pc",
          generation,
          state: "held",
          at: 0,
        }),
      );
    }
    return super.put(k, body, options);
  }
}

Deno.test("ownership: a take gives up after TAKE_MAX_RACES lost races, naming the last record", async () => {
  const clock = new FakeClock();
  const bucket = new InterloperBucket({ clock });
  const a = recordsOf(bucket, clock, "a");
  const error = await rejection(a.take(actor, { canTakeFrom: always }));
  assert.ok(error instanceof HeldElsewhere);
  assert.equal(error.races, TAKE_MAX_RACES);
  assert.equal(error.node, "c");
  assert.equal(error.generation, BigInt(TAKE_MAX_RACES));
  assert.equal(bucket.puts, TAKE_MAX_RACES);
});

Deno.test("ownership: a take whose mayWrite says no writes nothing, even on a record of its own node", async () => {
  const clock = new FakeClock();
  const bucket = new MemoryBucket({ clock });
  const paused = recordsOf(bucket, clock, "a", "p1");
  const replacement = recordsOf(bucket, clock, "a", "p2");
  const hold = await replacement.take(actor, { canTakeFrom: never });
  // The paused process resumes with its lease run out: the record names its
  // node, so only mayWrite stands between it and the replacement's hold.
  let asked = 0;
  await assert.rejects(
    paused.take(actor, { canTakeFrom: never, mayWrite: () => (asked++, false) }),
    (e: Error) => e instanceof TakeNotAllowed && /lease is not valid/.test(e.message),
  );
  assert.equal(asked, 1);
  assert.equal((await stored(bucket))?.process, "p2");
  assert.equal(await replacement.stillHolds(hold), true);
  const again = await paused.take(actor, { canTakeFrom: never, mayWrite: () => true });
  assert.equal(again.generation, hold.generation + 1n);
});

Deno.test("ownership: a take whose answer was lost still returns its hold", async () => {
  const clock = new FakeClock();
  const bucket = new MemoryBucket({ clock, faults: { lostAnswerRate: 1 } });
  const a = recordsOf(bucket, clock, "a");
  const hold = await a.take(actor, { canTakeFrom: never });
  assert.equal(hold.generation, 1n);
  assert.equal(await a.stillHolds(hold), true);
});

Deno.test("ownership: stillHolds is false once another take wrote; it throws when the bucket is down", async () => {
  const clock = new FakeClock();
  const bucket = new MemoryBucket({ clock });
  const a = recordsOf(bucket, clock, "a");
  const b = recordsOf(bucket, clock, "b");
  const hold = await a.take(actor, { canTakeFrom: never });
  assert.equal(await a.stillHolds(hold), true);
  bucket.faults = { outages: [{ from: clock.now(), until: clock.now() + 1000 }] };
  await assert.rejects(a.stillHolds(hold), BucketUnavailable);
  bucket.faults = {};
  await b.take(actor, { canTakeFrom: always });
  assert.equal(await a.stillHolds(hold), false);
});

Deno.test("ownership: a release after being superseded changes nothing", async () => {
  const clock = new FakeClock();
  const bucket = new MemoryBucket({ clock });
  const lines: string[] = [];
  const a = recordsOf(bucket, clock, "a", "pa", lines);
  const b = recordsOf(bucket, clock, "b");
  const old = await a.take(actor, { canTakeFrom: never });
  const current = await b.take(actor, { canTakeFrom: always });
  await a.release(old);
  assert.equal(a.pendingReleases, 0);
  const record = await stored(bucket);
  assert.equal(record?.node, "b");
  assert.equal(record?.state, "held");
  assert.equal(await b.stillHolds(current), true);
  assert.ok(lines.some((l) => l.includes("DEBUG") && l.includes("nothing to release")));
});

Deno.test("ownership: a release during an outage is retried in the background and lands after it", async () => {
  const clock = new FakeClock();
  const bucket = new MemoryBucket({ clock });
  const lines: string[] = [];
  const a = recordsOf(bucket, clock, "a", "pa", lines);
  const hold = await a.take(actor, { canTakeFrom: never });
  const t0 = clock.now();
  bucket.faults = { outages: [{ from: t0, until: t0 + 10_000 }] };
  await a.release(hold); // resolves: the retry is the background's job
  assert.equal(a.pendingReleases, 1);
  assert.ok(lines.some((l) => l.includes("WARN") && l.includes("retrying in the background")));
  // Tries at 1 s, 3 s and 7 s fall in the outage; the record keeps naming the node.
  await clock.advance(9_000);
  assert.equal(a.pendingReleases, 1);
  await clock.advance(1_000); // outage over at 10 s; next try at 15 s
  assert.equal((await stored(bucket))?.state, "held");
  await clock.advance(5_000);
  assert.equal(a.pendingReleases, 0);
  const record = await stored(bucket);
  assert.equal(record?.state, "released");
  assert.equal(record?.generation, hold.generation);
  assert.ok(lines.some((l) => l.includes("release landed on a background retry")));
  a.close();
});

Deno.test("ownership: a take by this node supersedes its pending release", async () => {
  const clock = new FakeClock();
  const bucket = new MemoryBucket({ clock });
  const a = recordsOf(bucket, clock, "a");
  const first = await a.take(actor, { canTakeFrom: never });
  const t0 = clock.now();
  bucket.faults = { outages: [{ from: t0, until: t0 + 5_000 }] };
  await a.release(first);
  assert.equal(a.pendingReleases, 1);
  await clock.advance(6_000); // tries at 1 s and 3 s failed; the next is due at 7 s
  const second = await a.take(actor, { canTakeFrom: never });
  assert.equal(second.generation, 2n);
  assert.equal(a.pendingReleases, 0);
  await clock.advance(120_000);
  assert.equal((await stored(bucket))?.state, "held");
  assert.equal(await a.stillHolds(second), true);
});

Deno.test("ownership: a take that fails leaves the pending release to land", async () => {
  const clock = new FakeClock();
  const bucket = new MemoryBucket({ clock });
  const a = recordsOf(bucket, clock, "a");
  const hold = await a.take(actor, { canTakeFrom: never });
  const t0 = clock.now();
  bucket.faults = { outages: [{ from: t0, until: t0 + 5_000 }] };
  await a.release(hold);
  await assert.rejects(a.take(actor, { canTakeFrom: never }), BucketUnavailable);
  assert.equal(a.pendingReleases, 1);
  await clock.advance(60_000);
  assert.equal(a.pendingReleases, 0);
  assert.equal((await stored(bucket))?.state, "released");
});

Deno.test("ownership: close cancels the pending releases", async () => {
  const clock = new FakeClock();
  const bucket = new MemoryBucket({ clock });
  const a = recordsOf(bucket, clock, "a");
  const hold = await a.take(actor, { canTakeFrom: never });
  const t0 = clock.now();
  bucket.faults = { outages: [{ from: t0, until: t0 + 2_000 }] };
  await a.release(hold);
  a.close();
  assert.equal(a.pendingReleases, 0);
  await clock.advance(120_000);
  assert.equal((await stored(bucket))?.state, "held");
});

Deno.test("ownership: past the cap of pending releases the oldest is dropped", async () => {
  const clock = new FakeClock();
  const bucket = new MemoryBucket({ clock });
  const lines: string[] = [];
  const a = recordsOf(bucket, clock, "a", "pa", lines, 2);
  const actors = ["one", "two", "three"].map((name) => ({ ...actor, name }));
  const holds = [];
  for (const x of actors) holds.push(await a.take(x, { canTakeFrom: never }));
  const t0 = clock.now();
  bucket.faults = { outages: [{ from: t0, until: t0 + 2_000 }] };
  for (const hold of holds) await a.release(hold);
  assert.equal(a.pendingReleases, 2);
  assert.ok(lines.some((l) => l.includes("WARN") && l.includes(ownerKey(actors[0]))));
  await clock.advance(60_000);
  assert.equal(a.pendingReleases, 0);
  const states = [];
  for (const x of actors) states.push((await stored(bucket, ownerKey(x)))?.state);
  assert.deepEqual(states, ["held", "released", "released"]);
  a.close();
});

Deno.test("ownership: a malformed record is refused and left as it is", async () => {
  const clock = new FakeClock();
  const bucket = new MemoryBucket({ clock });
  const a = recordsOf(bucket, clock, "a");
  const garbage = new TextEncoder().encode("{ not json");
  await bucket.put(key, garbage);
  const error = await rejection(a.take(actor, { canTakeFrom: always }));
  assert.ok(error instanceof MalformedRecord);
  assert.equal(error.key, key);
  assert.equal(error.problem, "not JSON");
  assert.ok(error.message.includes(key));
  assert.deepEqual((await bucket.get(key))!.body, garbage);
});

Deno.test("ownership: decodeOwnerRecord names what is wrong", () => {
  const good = {
    version: 1,
    node: "a",
    process: "p",
    generation: "00000000000000ff",
    state: "held",
    at: 5,
  };
  const cases: [Record<string, unknown>, RegExp][] = [
    [{ ...good, version: 2 }, /version 2/],
    [{ ...good, generation: "00000000000000FF" }, /generation/],
    [{ ...good, generation: "ff" }, /generation/],
    [{ ...good, generation: 255 }, /generation/],
    [{ ...good, generation: "0000000000000000" }, /generation 0/],
    [{ ...good, state: "gone" }, /state/],
    [{ ...good, node: "" }, /node/],
    [{ ...good, process: 3 }, /process/],
    [{ ...good, at: "now" }, /at/],
  ];
  for (const [value, problem] of cases) {
    const bytes = new TextEncoder().encode(JSON.stringify(value));
    assert.throws(() => decodeOwnerRecord(bytes, key), (e: unknown) => {
      assert.ok(e instanceof MalformedRecord && e.key === key, String(e));
      assert.match(e.problem, problem);
      return true;
    });
  }
  assert.throws(() => decodeOwnerRecord(new Uint8Array([0xff, 0xfe])), MalformedRecord);
  assert.throws(() => decodeOwnerRecord(new TextEncoder().encode("[]")), MalformedRecord);
  const decoded = decodeOwnerRecord(new TextEncoder().encode(JSON.stringify(good)));
  assert.equal(decoded.generation, 255n);
});

Deno.test("ownership: records round-trip, generations past 2^53 included", () => {
  const record: OwnerRecord = {
    version: 1,
    node: "a",
    process: "p",
    generation: 0x0123456789abcdefn,
    state: "released",
    at: 1_700_000_000_000,
  };
  const bytes = encodeOwnerRecord(record);
  assert.match(new TextDecoder().decode(bytes), /"generation":"0123456789abcdef"/);
  assert.deepEqual(decodeOwnerRecord(bytes), record);
  assert.throws(() => encodeOwnerRecord({ ...record, generation: 0n }), RangeError);
  assert.throws(() => encodeOwnerRecord({ ...record, generation: 1n << 64n }), RangeError);
});

Deno.test("ownership: take, supersede and release on S3Bucket (moto)", async () => {
  const moto = await startMoto();
  const bucket = S3Bucket.fromUrl(`s3://${moto.bucket}/ownership`, moto.env);
  try {
    const a = recordsOf(bucket, systemClock, "a");
    const b = recordsOf(bucket, systemClock, "b");
    const first = await a.take(actor, { canTakeFrom: never });
    assert.equal(first.generation, 1n);
    assert.equal(await a.stillHolds(first), true);
    await assert.rejects(b.take(actor, { canTakeFrom: never }), HeldElsewhere);
    const second = await b.take(actor, { canTakeFrom: always });
    assert.equal(second.generation, 2n);
    assert.equal(await a.stillHolds(first), false);
    await a.release(first); // superseded: refused by If-Match, nothing to do
    assert.equal(a.pendingReleases, 0);
    await b.release(second);
    assert.equal((await stored(bucket))?.state, "released");
    const third = await a.take(actor, { canTakeFrom: never });
    assert.equal(third.generation, 3n);
    a.close();
    b.close();
  } finally {
    await bucket.close();
    await moto.stop();
  }
});
