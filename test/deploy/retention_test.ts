import assert from "node:assert/strict";
import { MemoryBucket } from "../../src/bucket/memory.ts";
import { appCurrentKey, appVersionKey } from "../../src/bucket/keys.ts";
import { encodeCurrent, encodeVersion } from "../../src/deploy/manifest.ts";
import { deploy, type DeployOutcome, rollback } from "../../src/deploy/deploy.ts";
import {
  collectVersions,
  KEPT_BEFORE_CURRENT,
  readVersionLine,
} from "../../src/deploy/retention.ts";
import { COUNTER_WASM } from "../../src/testing/node_process.ts";
import { FakeClock } from "../bucket/fake_clock.ts";
import { HookedBucket } from "./hooked_bucket.ts";

const SHOP = { tenant: "acme", app: "shop" };
const HOUR = 3_600_000;
const MINUTE = 60_000;

/** A memory bucket stamping objects with a fake clock, and deploys that read the same clock. */
function setup() {
  const clock = new FakeClock();
  const bucket = new HookedBucket(new MemoryBucket({ clock }));
  const now = () => clock.now();
  return { clock, bucket, now };
}

/** `n` deploys, `gapMs` apart, each a new version (its configuration changes); ids oldest first. */
async function deployMany(
  s: ReturnType<typeof setup>,
  n: number,
  gapMs: number,
  retentionMs = 100 * HOUR,
): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const outcome: DeployOutcome = await deploy(s.bucket, SHOP, {
      ...(i === 0 && !(await s.bucket.inner.head(appCurrentKey("acme", "shop")))
        ? { actors: { counter: COUNTER_WASM } }
        : {}),
      config: { counter: { N: `${ids.length}-${i}-${s.clock.now()}` } },
    }, { now: s.now, retentionMs });
    ids.push(outcome.after.id);
    s.clock.jump(gapMs);
  }
  return ids;
}

async function versionIds(bucket: MemoryBucket | HookedBucket): Promise<Set<string>> {
  const page = await bucket.list("apps/acme/shop/versions/");
  return new Set(page.objects.map((o) => o.key.slice("apps/acme/shop/versions/".length)));
}

Deno.test("retention keeps current and the five before it, and deletes older ones past the window", async () => {
  const s = setup();
  const ids = await deployMany(s, 10, MINUTE);
  // All ten are younger than the window: none went.
  assert.equal((await versionIds(s.bucket)).size, 10);
  s.clock.jump(2 * HOUR);
  const outcome = await deploy(s.bucket, SHOP, { config: { counter: { N: "last" } } }, {
    now: s.now,
    retentionMs: HOUR,
  });
  ids.push(outcome.after.id);
  assert.ok(outcome.retention && !("error" in outcome.retention));
  // Eleven in the line: current and five kept, the five oldest deleted oldest first.
  assert.deepEqual(outcome.retention.deleted, ids.slice(0, 5));
  assert.deepEqual(await versionIds(s.bucket), new Set(ids.slice(5)));
  assert.equal(KEPT_BEFORE_CURRENT + 1, ids.slice(5).length);
  const deletes = s.bucket.calls.filter((c) => c.method === "delete").map((c) => c.key);
  assert.deepEqual(deletes, ids.slice(0, 5).map((id) => appVersionKey("acme", "shop", id)));
});

Deno.test("a deploy that changes nothing still deletes the versions that aged past the window", async () => {
  const s = setup();
  const ids = await deployMany(s, 8, MINUTE);
  // Within the window at first: all eight stay.
  assert.equal((await versionIds(s.bucket)).size, 8);
  s.clock.jump(2 * HOUR);
  const same = await deploy(s.bucket, SHOP, {}, { now: s.now, retentionMs: HOUR });
  assert.equal(same.kind, "unchanged");
  assert.deepEqual(same.retention && "deleted" in same.retention ? same.retention.deleted : [], [
    ids[0],
    ids[1],
  ]);
  assert.deepEqual(await versionIds(s.bucket), new Set(ids.slice(2)));
});

Deno.test("retention deletes only what stopped being current more than the window ago", async () => {
  const s = setup();
  // Versions 10 minutes apart: v0 at 0, v1 at 10 min, ... v8 at 80 min.
  const ids = await deployMany(s, 9, 10 * MINUTE);
  // The line is v8..v0; v8..v3 are kept; v2, v1, v0 stopped being current when v3, v2, v1 were written.
  const start = s.clock.now() - 9 * 10 * MINUTE;
  // At 85 minutes with a 60-minute window: v1 (written at 10) and v2 (at 20) are past it, v3 (at 30) is not.
  const early = await collectVersions(s.bucket, SHOP, start + 85 * MINUTE, HOUR);
  assert.deepEqual(early.deleted, ids.slice(0, 2));
  assert.equal(early.lineLength, 9);
  assert.deepEqual(await versionIds(s.bucket), new Set(ids.slice(2)));
  // Exactly at the window's end it is not "more than" the window.
  const edge = await collectVersions(s.bucket, SHOP, start + 90 * MINUTE, HOUR);
  assert.deepEqual(edge.deleted, []);
  const later = await collectVersions(s.bucket, SHOP, start + 91 * MINUTE, HOUR);
  assert.deepEqual(later.deleted, [ids[2]]);
  // Nothing more: the current one and five before it stay whatever their age.
  const much = await collectVersions(s.bucket, SHOP, start + 100 * HOUR, 0);
  assert.deepEqual(much.deleted, []);
  assert.deepEqual(await versionIds(s.bucket), new Set(ids.slice(3)));
});

Deno.test("a window of 0 deletes at once, even against a bucket clock ahead of ours", async () => {
  const s = setup();
  const ids = await deployMany(s, 7, 0, 0);
  assert.deepEqual(await versionIds(s.bucket), new Set(ids.slice(1)));
  // Our clock an hour behind the bucket's: ages are negative, and 0 still deletes at once.
  const behind = await deploy(s.bucket, SHOP, { config: { counter: { N: "behind" } } }, {
    now: () => s.clock.now() - HOUR,
    retentionMs: 0,
  });
  assert.deepEqual(behind.retention, { deleted: [ids[1]], lineLength: 7, walk: "missing" });
  // With any window, such a clock deletes nothing.
  await deploy(s.bucket, SHOP, { config: { counter: { N: "behind-2" } } }, {
    now: () => s.clock.now() - HOUR,
    retentionMs: 1,
  });
  assert.equal((await versionIds(s.bucket)).size, 7);
});

Deno.test("never collected: the versions a rollback stepped back from, and versions off the line", async () => {
  const s = setup();
  const ids = await deployMany(s, 8, MINUTE, 0);
  // A version a failed deploy left: written, never current.
  const orphan = await encodeVersion({
    app: "acme/shop",
    seq: 9,
    previous: ids[7],
    rulesDeployed: true,
    writtenAt: 0,
    classes: {},
  });
  await s.bucket.put(appVersionKey("acme", "shop", orphan.id), orphan.bytes);
  // Rollback from v7 to v6: the line becomes R, v5, v4, ...; v7 and v6 leave it.
  const back = await rollback(s.bucket, SHOP, { now: s.now, retentionMs: 0 });
  const later = await deployMany(s, 10, MINUTE, 0);
  const kept = await versionIds(s.bucket);
  assert.ok(kept.has(ids[7]), "the version rolled back from stays");
  assert.ok(kept.has(ids[6]), "the version rolled back to (off the line) stays");
  assert.ok(kept.has(orphan.id), "a failed deploy's version stays");
  const line = await readVersionLine(s.bucket, SHOP);
  assert.deepEqual(line?.entries.map((e) => e.id), [...later].reverse().slice(0, 6));
  assert.ok(!kept.has(back.after.id), "the rollback version itself is in the line, and collected");
  assert.equal(kept.size, 6 + 3);
});

Deno.test("a version whose manifest cannot be read stops the walk: it and what is behind stay", async () => {
  const s = setup();
  const ids = await deployMany(s, 12, MINUTE);
  // v3 unreadable: the walk sees v11..v4 only.
  await s.bucket.put(appVersionKey("acme", "shop", ids[3]), new TextEncoder().encode("{not json"));
  const line = await readVersionLine(s.bucket, SHOP);
  assert.equal(line?.stopped, "unreadable");
  assert.equal(line?.unreadable?.id, ids[3]);
  assert.match(line?.unreadable?.problem ?? "", /cannot be read: not JSON/);
  const outcome = await collectVersions(s.bucket, SHOP, s.clock.now() + 2 * HOUR, HOUR);
  assert.equal(outcome.walk, "unreadable");
  assert.equal(outcome.lineLength, 8);
  // v11..v6 kept, v5 and v4 deleted; v3 (unreadable), v2, v1, v0 stay.
  assert.deepEqual(outcome.deleted, [ids[4], ids[5]]);
  assert.deepEqual(await versionIds(s.bucket), new Set([...ids.slice(0, 4), ...ids.slice(6)]));
  // Later passes stop at v6, whose previous is gone, and delete nothing more.
  const again = await collectVersions(s.bucket, SHOP, s.clock.now() + 100 * HOUR, 0);
  assert.deepEqual([again.deleted, again.walk], [[], "missing"]);
});

Deno.test("retention stops when current changes during the pass", async () => {
  const s = setup();
  const ids = await deployMany(s, 10, MINUTE);
  let moved = false;
  s.bucket.before = async (call) => {
    if (call.method !== "delete" || moved) return;
    moved = true;
    // Another deploy moves current between this pass's first delete and its next check.
    await s.bucket.inner.put(
      appCurrentKey("acme", "shop"),
      encodeCurrent({ version: ids[9], seq: 11 }),
    );
  };
  const outcome = await collectVersions(s.bucket, SHOP, s.clock.now() + 2 * HOUR, HOUR);
  assert.deepEqual(outcome.deleted, [ids[0]]);
  assert.equal(outcome.stopped, "current-changed");
  assert.deepEqual(await versionIds(s.bucket), new Set(ids.slice(1)));
});

Deno.test("a deploy whose retention fails still stands, and says so", async () => {
  const s = setup();
  await deployMany(s, 7, MINUTE);
  s.bucket.before = (call) => {
    if (call.method === "list" && call.key.endsWith("/versions/")) throw new Error("list refused");
  };
  const outcome = await deploy(s.bucket, SHOP, { config: { counter: { N: "x" } } }, {
    now: s.now,
    retentionMs: 0,
  });
  assert.equal(outcome.kind, "deployed");
  assert.deepEqual(outcome.retention, { error: "list refused" });
});
