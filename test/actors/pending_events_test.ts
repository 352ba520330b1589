import assert from "node:assert/strict";
import { PendingEvents } from "../../src/actors/pending_events.ts";
import { AssertionError } from "../../src/assert.ts";

const seqs = (pending: PendingEvents<{ seq: number }>) =>
  [...pending.values()].map((entry) => entry.seq);

Deno.test("pending events are found by seq and listed in the order they were added", () => {
  const pending = new PendingEvents<{ seq: number; name: string }>();
  for (const seq of [3, 5, 8, 13]) pending.add({ seq, name: `e${seq}` });
  assert.equal(pending.size, 4);
  assert.equal(pending.get(8)?.name, "e8");
  assert.equal(pending.get(4), undefined);
  assert.equal(pending.has(13), true);
  assert.equal(pending.first()?.seq, 3);
  assert.equal(pending.delete(5)?.name, "e5");
  assert.equal(pending.delete(5), undefined);
  assert.equal(pending.has(5), false);
  assert.deepEqual(seqs(pending), [3, 8, 13]);
  assert.equal(pending.delete(3)?.seq, 3);
  assert.equal(pending.first()?.seq, 8);
  assert.equal(pending.delete(13)?.seq, 13);
  assert.deepEqual(seqs(pending), [8]);
  assert.equal(pending.delete(8)?.seq, 8);
  assert.equal(pending.size, 0);
  assert.equal(pending.first(), undefined);
  assert.deepEqual(seqs(pending), []);
});

Deno.test("a seq not above the last one is an invariant violated", () => {
  const pending = new PendingEvents<{ seq: number }>();
  pending.add({ seq: 2 });
  assert.throws(() => pending.add({ seq: 2 }), AssertionError);
  assert.throws(() => pending.add({ seq: 1 }), AssertionError);
});

Deno.test("pending events stay in order and findable when one stays while many come and go", () => {
  const pending = new PendingEvents<{ seq: number }>();
  // One event that stays (a suspended one) while thousands are answered,
  // out of order: the holes behind it are compacted away.
  pending.add({ seq: 1 });
  const live = new Set<number>([1]);
  let seq = 1;
  for (let round = 0; round < 2000; round++) {
    for (let i = 0; i < 3; i++) {
      pending.add({ seq: ++seq });
      live.add(seq);
    }
    // Answer the second newest, then the oldest but the one that stays.
    const newest = [...live].filter((s) => s !== 1).sort((a, b) => b - a);
    for (const answered of [newest[1], newest[newest.length - 1]]) {
      if (answered === undefined || !live.has(answered)) continue;
      assert.equal(pending.delete(answered)?.seq, answered);
      live.delete(answered);
    }
  }
  assert.equal(pending.size, live.size);
  assert.deepEqual(seqs(pending), [...live].sort((a, b) => a - b));
  for (const s of live) assert.equal(pending.get(s)?.seq, s);
  assert.equal(pending.first()?.seq, 1);
  pending.clear();
  assert.equal(pending.size, 0);
  pending.add({ seq: 1 });
  assert.equal(pending.first()?.seq, 1);
});
