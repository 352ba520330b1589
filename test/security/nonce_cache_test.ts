import assert from "node:assert/strict";
import { FakeClock } from "../bucket/fake_clock.ts";
import { MAX_NONCES, NONCE_BUCKET_MS, NonceCache } from "../../src/security/nonce_cache.ts";

/** A distinct 32-digit hex nonce for `i`. */
function nonce(i: number): string {
  return i.toString(16).padStart(32, "0");
}

Deno.test("NonceCache: a nonce is added once, then seen", () => {
  const clock = new FakeClock();
  const nonces = new NonceCache({ clock });
  const until = clock.now() + 61_000;
  assert.equal(nonces.remember(nonce(1), until), "added");
  assert.equal(nonces.remember(nonce(1), until), "seen");
  assert.equal(nonces.remember(nonce(2), until), "added");
  assert.deepEqual(nonces.stats(), { size: 2, added: 2, seen: 1, full: 0, expired: 0 });
});

Deno.test("NonceCache: a nonce is kept until its time has passed, then forgotten", async () => {
  const clock = new FakeClock(1_700_000_000_000);
  const nonces = new NonceCache({ clock });
  const until = clock.now() + 61_000;
  nonces.remember(nonce(1), until);
  await clock.advance(61_000); // now === until: still valid, still kept
  assert.equal(nonces.remember(nonce(1), until), "seen");
  await clock.advance(1);
  assert.equal(nonces.size, 0);
  assert.equal(nonces.stats().expired, 1);
  assert.equal(nonces.remember(nonce(1), clock.now() + 61_000), "added");
});

Deno.test("NonceCache: kept up to a bucket longer than asked, never shorter", async () => {
  const clock = new FakeClock(1_700_000_000_000);
  const nonces = new NonceCache({ clock });
  const until = clock.now() + 10_300; // not on a bucket boundary
  nonces.remember(nonce(1), until);
  await clock.advance(10_300);
  assert.equal(nonces.remember(nonce(1), until), "seen");
  await clock.advance(NONCE_BUCKET_MS - 300); // the bucket's end: still kept
  assert.equal(nonces.size, 1);
  await clock.advance(1);
  assert.equal(nonces.size, 0);
});

Deno.test("NonceCache: expiry forgets only the nonces whose time has passed", async () => {
  const clock = new FakeClock(1_700_000_000_000);
  const nonces = new NonceCache({ clock });
  const t0 = clock.now();
  // Added out of order of their ends, as calls from nodes with skewed clocks arrive.
  const ends = [30_000, 5_000, 90_000, 5_000, 61_000, 121_000, 1_000];
  ends.forEach((end, i) => nonces.remember(nonce(i), t0 + end));
  for (const at of [1_000, 5_000, 30_000, 61_000, 90_000, 121_000]) {
    await clock.advance(t0 + at + 1 - clock.now());
    const alive = ends.filter((end) => end > at).length;
    assert.equal(nonces.size, alive, `at +${at} ms`);
    ends.forEach((end, i) => {
      if (end > at) assert.equal(nonces.remember(nonce(i), t0 + end), "seen", `nonce ${i}`);
    });
  }
  assert.equal(nonces.stats().expired, ends.length);
});

Deno.test("NonceCache: full of live nonces, a new one is refused and counted; a replay still reads as seen", async () => {
  const clock = new FakeClock(1_700_000_000_000);
  const nonces = new NonceCache({ clock, maxEntries: 3 });
  const t0 = clock.now();
  assert.equal(nonces.remember(nonce(1), t0 + 5_000), "added");
  assert.equal(nonces.remember(nonce(2), t0 + 60_000), "added");
  assert.equal(nonces.remember(nonce(3), t0 + 60_000), "added");
  assert.equal(nonces.remember(nonce(4), t0 + 60_000), "full");
  assert.equal(nonces.remember(nonce(1), t0 + 5_000), "seen");
  assert.equal(nonces.size, 3);
  // Once one expired there is room again, and nothing live was forgotten to make it.
  await clock.advance(5_001);
  assert.equal(nonces.remember(nonce(4), t0 + 60_000), "added");
  assert.equal(nonces.remember(nonce(2), t0 + 60_000), "seen");
  assert.equal(nonces.remember(nonce(3), t0 + 60_000), "seen");
  assert.deepEqual(nonces.stats(), { size: 3, added: 4, seen: 3, full: 1, expired: 1 });
});

Deno.test("NonceCache: the default bound is MAX_NONCES", () => {
  const clock = new FakeClock();
  const nonces = new NonceCache({ clock });
  const until = clock.now() + 61_000;
  for (let i = 0; i < MAX_NONCES; i++) nonces.remember(nonce(i), until);
  assert.equal(nonces.size, MAX_NONCES);
  assert.equal(nonces.remember(nonce(MAX_NONCES), until), "full");
});

Deno.test("NonceCache: many nonces over many seconds all expire", async () => {
  const clock = new FakeClock(1_700_000_000_000);
  const nonces = new NonceCache({ clock });
  const count = 100_000;
  // Arrivals spread over 100 s, each kept 61 s: at most ~61 s of them are alive at once.
  for (let i = 0; i < count; i++) {
    if (i % 1_000 === 0) await clock.advance(1_000);
    assert.equal(nonces.remember(nonce(i), clock.now() + 61_000), "added");
  }
  assert.ok(nonces.size <= 62_000, `${nonces.size} alive`);
  await clock.advance(62_000);
  assert.equal(nonces.size, 0);
  assert.equal(nonces.stats().expired, count);
});

Deno.test("NonceCache: refuses a bound below one and a nonce already out of time", () => {
  const clock = new FakeClock();
  assert.throws(() => new NonceCache({ clock, maxEntries: 0 }), RangeError);
  const nonces = new NonceCache({ clock });
  assert.throws(() => nonces.remember(nonce(1), clock.now() - 1), RangeError);
  assert.throws(() => nonces.remember(nonce(1), NaN), RangeError);
  assert.equal(nonces.size, 0);
});
