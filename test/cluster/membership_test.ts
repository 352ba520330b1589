import assert from "node:assert/strict";
import { FakeClock } from "../bucket/fake_clock.ts";
import { MemoryBucket } from "../../src/bucket/memory.ts";
import type {
  Bucket,
  CallOptions,
  ListOptions,
  ListPage,
  PutOptions,
  StoredObject,
} from "../../src/bucket/bucket.ts";
import { BucketUnavailable, PreconditionFailed } from "../../src/bucket/errors.ts";
import { BucketView } from "../../src/bucket/bucket_view.ts";
import { nodeKey } from "../../src/bucket/keys.ts";
import { createLogger } from "../../src/log.ts";
import {
  decodeHeartbeat,
  encodeHeartbeat,
  type Heartbeat,
  type LeaseState,
} from "../../src/cluster/heartbeat.ts";
import { leaseTiming } from "../../src/cluster/lease_timing.ts";
import { Membership, type OwnLeaseState, type PeerView } from "../../src/cluster/membership.ts";

const timing = leaseTiming();
const { periodMs, watchMs, fenceAfterMs } = timing;
const HOUR_MS = 3_600_000;

function heartbeatOf(nodeId: string, at: number, lease: LeaseState = "live"): Heartbeat {
  return {
    format: 2,
    nodeId,
    process: `${nodeId}-process`,
    at,
    lease,
    fencedBy: lease === "fenced" ? "z" : undefined,
    address: `http://${nodeId}:8080`,
    readsSecrets: false,
    takesMoved: true,
    version: "0.1.0",
    state: "serving",
  };
}

/** A peer that writes its heartbeat the way a node does: conditioned on its own last write. */
class FakePeer {
  etag: string | undefined;
  /** Clock time of the last write that landed. */
  lastWrite: number | undefined;
  refused = 0;
  failed = 0;
  #timer: { cancel(): void } | undefined;

  constructor(
    readonly bucket: Bucket,
    readonly clock: FakeClock,
    readonly nodeId: string,
    /** How far the peer's clock is ahead of the test's. */
    readonly skewMs = 0,
  ) {}

  async write(): Promise<void> {
    const now = this.clock.now();
    const body = encodeHeartbeat(heartbeatOf(this.nodeId, now + this.skewMs));
    try {
      const options: PutOptions = this.etag ? { ifMatch: this.etag } : {};
      ({ etag: this.etag } = await this.bucket.put(nodeKey(this.nodeId), body, options));
      this.lastWrite = now;
    } catch (e) {
      if (e instanceof PreconditionFailed) this.refused++;
      else this.failed++;
    }
  }

  /** Writes now, then every period until `stop`. */
  start(): void {
    const tick = () => {
      this.#timer = this.clock.setTimer(periodMs, tick);
      void this.write();
    };
    tick();
  }

  stop(): void {
    this.#timer?.cancel();
  }
}

/** This node's lease as a test sets it: valid from `validFrom` (monotonic) on, or not at all. */
class StubLease implements OwnLeaseState {
  constructor(readonly clock: FakeClock, public validFrom: number | undefined) {}
  valid(): boolean {
    return this.validFrom !== undefined && this.clock.monotonic() >= this.validFrom;
  }
  get validSince(): number | undefined {
    return this.valid() ? this.validFrom : undefined;
  }
}

/** A bucket that counts calls and can step in before a write. */
class SpyBucket extends BucketView {
  lists = 0;
  gets = 0;
  puts: { key: string; options: PutOptions; outcome: string }[] = [];
  beforePut: ((key: string, options: PutOptions) => Promise<void>) | undefined;
  /** Keys whose reads fail as an unreachable store would. */
  failGets = new Set<string>();

  override get(key: string, options?: CallOptions): Promise<StoredObject | null> {
    this.gets++;
    if (this.failGets.has(key)) {
      return Promise.reject(new BucketUnavailable(`GET ${key}: 503 (test)`, { ambiguous: false }));
    }
    return super.get(key, options);
  }
  override async put(
    key: string,
    body: Uint8Array,
    options: PutOptions = {},
  ): Promise<{ etag: string }> {
    const record = { key, options, outcome: "pending" };
    this.puts.push(record);
    const hook = this.beforePut;
    if (hook) await hook(key, options);
    try {
      const result = await super.put(key, body, options);
      record.outcome = "landed";
      return result;
    } catch (e) {
      record.outcome = e instanceof PreconditionFailed ? "refused" : "failed";
      throw e;
    }
  }
  override list(prefix: string, options?: ListOptions): Promise<ListPage> {
    this.lists++;
    return super.list(prefix, options);
  }
}

interface Observer {
  membership: Membership;
  lines: string[];
  lease: StubLease;
}

/** Node `nodeId` watching `bucket`, its lease valid for an hour unless `lease` says otherwise. */
function observe(
  bucket: Bucket,
  clock: FakeClock,
  nodeId = "a",
  lease = new StubLease(clock, clock.monotonic() - HOUR_MS),
): Observer {
  const lines: string[] = [];
  const log = createLogger({ level: "debug", sink: (l) => lines.push(l), now: () => clock.now() });
  const membership = new Membership({ bucket, clock, log, nodeId, timing, ownLease: lease });
  // The fencing duty, as the node runs it while its lease is valid.
  membership.afterEachRound(() => membership.fenceDue());
  membership.start();
  return { membership, lines, lease };
}

async function stored(bucket: Bucket, nodeId: string) {
  const object = await bucket.get(nodeKey(nodeId));
  assert.ok(object, `nodes/${nodeId} exists`);
  return { heartbeat: decodeHeartbeat(object.body, nodeKey(nodeId)), ...object };
}

/** When the heartbeat of `nodeId` was fenced (its write time), or undefined. */
async function fencedAt(bucket: Bucket, nodeId: string): Promise<number | undefined> {
  const { heartbeat, lastModified } = await stored(bucket, nodeId);
  return heartbeat.lease === "fenced" ? lastModified : undefined;
}

/** Advances in steps of `stepMs` until `done` holds, at most `limitMs`. */
async function advanceUntil(
  clock: FakeClock,
  done: () => Promise<boolean> | boolean,
  limitMs: number,
  stepMs = 100,
): Promise<void> {
  for (let spent = 0; !(await done()); spent += stepMs) {
    if (spent >= limitMs) assert.fail(`not done after ${limitMs} ms`);
    await clock.advance(stepMs);
  }
}

const linesWith = (lines: string[], ...parts: string[]) =>
  lines.filter((l) => parts.every((p) => l.includes(p)));

Deno.test("membership: a peer that keeps writing is live and never fenced", async () => {
  const clock = new FakeClock();
  const bucket = new MemoryBucket({ clock });
  const peer = new FakePeer(bucket, clock, "b");
  peer.start();
  const { membership, lines } = observe(bucket, clock);
  for (let t = 0; t < 120_000; t += 500) {
    await clock.advance(500);
    assert.equal(membership.isLive("b"), true, `live at ${t} ms`);
  }
  assert.equal(peer.refused, 0);
  assert.equal((await stored(bucket, "b")).heartbeat.lease, "live");
  assert.equal(membership.isGone("b"), false);
  assert.deepEqual(membership.liveNodes().map((p) => p.nodeId), ["b"]);
  assert.equal(linesWith(lines, "fenced").length, 0);
  peer.stop();
  membership.close();
});

Deno.test("membership: a peer whose clock is far behind is never fenced while it writes", async () => {
  const clock = new FakeClock();
  const bucket = new MemoryBucket({ clock });
  // Its line 4 always looks 30 s old: only the watch (ETag changes) keeps it.
  const peer = new FakePeer(bucket, clock, "b", -30_000);
  peer.start();
  const { membership } = observe(bucket, clock);
  await clock.advance(120_000);
  assert.equal(peer.refused, 0);
  assert.equal((await stored(bucket, "b")).heartbeat.lease, "live");
  peer.stop();
  membership.close();
});

Deno.test("membership: a peer that stops is fenced after 15 s since its last write and 6 s watched, within a period", async () => {
  for (const offset of [0, 1, 700, 1500, 2300, 2999]) {
    const clock = new FakeClock();
    const bucket = new MemoryBucket({ clock });
    const { membership, lines } = observe(bucket, clock);
    let lastLiveView: PeerView | undefined;
    let fencedView: PeerView | undefined;
    membership.onChange((view) => {
      if (view.nodeId !== "b") return;
      if (view.heartbeat?.lease === "live") lastLiveView = view;
      if (view.heartbeat?.lease === "fenced") fencedView ??= view;
    });
    await clock.advance(offset);
    const peer = new FakePeer(bucket, clock, "b");
    peer.start();
    await clock.advance(30_000);
    peer.stop();
    const lastWrite = peer.lastWrite!;
    await advanceUntil(clock, async () => (await fencedAt(bucket, "b")) !== undefined, 60_000);
    const fenced = (await fencedAt(bucket, "b"))!;
    const firstSeen = lastLiveView!.unchangedSince;
    const earliest = Math.max(lastWrite + fenceAfterMs, firstSeen + watchMs);
    assert.ok(fenced >= lastWrite + fenceAfterMs, `offset ${offset}: 15 s after the last write`);
    assert.ok(fenced >= firstSeen + watchMs, `offset ${offset}: watched 6 s`);
    assert.ok(fenced <= earliest + periodMs, `offset ${offset}: within a period`);
    assert.equal(peer.refused, 0, "never fenced while it wrote");

    // The fence keeps every other line, line 4 included.
    const { heartbeat } = await stored(bucket, "b");
    const written = decodeHeartbeat(encodeHeartbeat(heartbeatOf("b", lastWrite)), "nodes/b");
    assert.deepEqual(heartbeat, { ...written, lease: "fenced", fencedBy: "a" });
    assert.equal(fencedView?.heartbeat?.fencedBy, "a", "the fence is an onChange event");
    await membership.refresh();
    assert.equal(membership.isGone("b"), true);
    assert.equal(membership.isLive("b"), false);
    const warned = linesWith(lines, "WARN", "fenced a node", "node=b");
    assert.equal(warned.length, 1);
    assert.match(warned[0], new RegExp(`lastWriteAgeMs=${fenced - lastWrite}\\b`));
    membership.close();
  }
});

Deno.test("membership: a peer long dead when this node starts is fenced after a watch", async () => {
  const clock = new FakeClock();
  const bucket = new MemoryBucket({ clock });
  await new FakePeer(bucket, clock, "b").write();
  await clock.advance(60_000);
  const start = clock.now();
  const { membership } = observe(bucket, clock);
  await advanceUntil(clock, async () => (await fencedAt(bucket, "b")) !== undefined, 60_000);
  const fenced = (await fencedAt(bucket, "b"))!;
  assert.ok(fenced >= start + watchMs, "seen unchanged for a watch first");
  assert.ok(fenced <= start + watchMs + periodMs);
  membership.close();
});

Deno.test("membership: a line 4 dated ahead (clock skew) does not bring the fence forward", async () => {
  const clock = new FakeClock();
  const bucket = new MemoryBucket({ clock });
  const aheadMs = 5_000;
  const peer = new FakePeer(bucket, clock, "b", aheadMs);
  const { membership } = observe(bucket, clock);
  peer.start();
  await clock.advance(20_000);
  peer.stop();
  const lastWrite = peer.lastWrite!;
  await advanceUntil(clock, async () => (await fencedAt(bucket, "b")) !== undefined, 60_000);
  const fenced = (await fencedAt(bucket, "b"))!;
  // Its line 4 must be 15 s old on this node's clock: 20 s after the write.
  assert.ok(fenced >= lastWrite + aheadMs + fenceAfterMs);
  assert.ok(fenced <= lastWrite + aheadMs + fenceAfterMs + periodMs);
  membership.close();
});

Deno.test("membership: no fence while this node's own lease is invalid, then a watch after it is valid", async () => {
  const clock = new FakeClock();
  const bucket = new SpyBucket(new MemoryBucket({ clock }));
  await new FakePeer(bucket, clock, "b").write();
  await clock.advance(60_000);
  bucket.puts = [];
  const { membership, lease } = observe(bucket, clock, "a", new StubLease(clock, undefined));
  await clock.advance(60_000);
  assert.equal(bucket.puts.length, 0, "no fence attempted");
  assert.equal((await stored(bucket, "b")).heartbeat.lease, "live");
  assert.equal(membership.isLive("b"), false, "not live, not fenced either");
  assert.equal(membership.isGone("b"), false);

  const validFrom = clock.monotonic();
  lease.validFrom = validFrom;
  await advanceUntil(clock, async () => (await fencedAt(bucket, "b")) !== undefined, 60_000);
  const fenced = (await fencedAt(bucket, "b"))!;
  assert.ok(fenced >= validFrom + watchMs);
  assert.ok(fenced <= validFrom + watchMs + periodMs);
  membership.close();
});

Deno.test("membership: no fence while the lease is not valid, whatever validSince says", async () => {
  const clock = new FakeClock();
  const bucket = new SpyBucket(new MemoryBucket({ clock }));
  await new FakePeer(bucket, clock, "b").write();
  await clock.advance(60_000);
  bucket.puts = [];
  const lapsed = { valid: () => false, validSince: clock.monotonic() - HOUR_MS };
  const lines: string[] = [];
  const membership = new Membership({
    bucket,
    clock,
    log: createLogger({ sink: (l) => lines.push(l) }),
    nodeId: "a",
    timing,
    ownLease: lapsed,
  });
  membership.afterEachRound(() => membership.fenceDue());
  membership.start();
  await clock.advance(60_000);
  assert.equal(bucket.puts.length, 0);
  membership.close();
});

Deno.test("membership: a heartbeat that changed but cannot be read is not fenced on its old view", async () => {
  const clock = new FakeClock();
  const bucket = new SpyBucket(new MemoryBucket({ clock }));
  const peer = new FakePeer(bucket, clock, "b");
  await peer.write();
  const firstWrite = peer.lastWrite;
  await clock.advance(60_000);
  const { membership, lines } = observe(bucket, clock);
  await clock.advance(periodMs - 1);
  // It writes again, and this node cannot read the new version: its view
  // stays the old one, watched long enough and old enough, but not current.
  await peer.write();
  bucket.failGets.add(nodeKey("b"));
  bucket.puts = [];
  await clock.advance(30_000);
  assert.equal(bucket.puts.length, 0, "no fence on an ETag the listing no longer shows");
  assert.ok(linesWith(lines, "could not read some heartbeats").length > 0);
  assert.equal(await membership.refresh(), false);
  assert.equal(membership.peer("b")?.heartbeat?.at, firstWrite);

  bucket.failGets.clear();
  assert.equal(await membership.refresh(), true);
  assert.equal(membership.peer("b")?.heartbeat?.at, peer.lastWrite);
  membership.close();
});

Deno.test("membership: after a bucket outage this node waits a watch after its lease is valid again", async () => {
  for (const peerComesBack of [true, false]) {
    const clock = new FakeClock();
    const outageFrom = clock.now() + 30_000;
    const outageUntil = outageFrom + 20_000;
    const bucket = new MemoryBucket({
      clock,
      faults: { outages: [{ from: outageFrom, until: outageUntil }] },
    });
    const peer = new FakePeer(bucket, clock, "b");
    peer.start();
    const { membership, lease, lines } = observe(bucket, clock);
    // This node's lease runs out 8 s into the outage and is valid again once
    // its first write after it lands, half a second after the bucket is back.
    const validAgain = outageUntil + 500;
    clock.setTimer(outageFrom + timing.validMs - clock.now(), () => lease.validFrom = undefined);
    clock.setTimer(validAgain - clock.now(), () => lease.validFrom = validAgain);
    if (!peerComesBack) clock.setTimer(outageFrom - clock.now(), () => peer.stop());

    await clock.advance(outageUntil - clock.now());
    assert.equal(linesWith(lines, "WARN", "could not list the heartbeats").length, 1, "once");
    assert.ok(linesWith(lines, "DEBUG", "could not list the heartbeats").length > 1);
    if (peerComesBack) assert.ok(peer.failed > 0, "the peer's writes failed during the outage too");
    // Its line 4 is 20 s old and this node watched it unchanged all along:
    // only the wait after this node's own renewal holds the fence back.
    assert.ok(clock.now() - (await stored(bucket, "b")).heartbeat.at >= fenceAfterMs);

    await clock.advance(periodMs);
    assert.equal(linesWith(lines, "listing the heartbeats works again").length, 1);
    if (peerComesBack) {
      await clock.advance(60_000);
      assert.equal(peer.refused, 0, "a peer back with the bucket is never fenced");
      assert.equal((await stored(bucket, "b")).heartbeat.lease, "live");
      assert.equal(membership.isLive("b"), true);
    } else {
      await advanceUntil(clock, async () => (await fencedAt(bucket, "b")) !== undefined, 60_000);
      const fenced = (await fencedAt(bucket, "b"))!;
      assert.ok(fenced >= validAgain + watchMs, "a watch after the lease was valid again");
      assert.ok(fenced <= validAgain + watchMs + periodMs);
    }
    peer.stop();
    membership.close();
  }
});

Deno.test("membership: two nodes racing to fence a peer: one fence lands, the other is refused", async () => {
  const clock = new FakeClock();
  // The same latency for every call makes both nodes send their fences before either lands.
  const memory = new MemoryBucket({ clock, faults: { latencyMs: { min: 50, max: 50 } } });
  const bucket = new SpyBucket(memory);
  const peer = new FakePeer(memory, clock, "b");
  await clock.runUntilSettled(peer.write());
  await clock.advance(60_000);
  const a = observe(bucket, clock, "a");
  const c = observe(bucket, clock, "c");
  const fences = () => bucket.puts.filter((p) => p.key === "nodes/b");
  await advanceUntil(clock, () => fences().some((p) => p.outcome === "landed"), 60_000);
  await clock.advance(periodMs);
  assert.deepEqual(fences().map((p) => p.outcome).sort(), ["landed", "refused"]);
  memory.faults = {};
  const { heartbeat } = await stored(memory, "b");
  const winner = heartbeat.fencedBy!;
  assert.ok(winner === "a" || winner === "c");
  const loser = winner === "a" ? c : a;
  assert.equal(heartbeat.at, peer.lastWrite, "line 4 kept");
  assert.equal(linesWith([...a.lines, ...c.lines], "fenced a node").length, 1);
  assert.equal(linesWith(loser.lines, "no fence: the heartbeat changed first", "node=b").length, 1);
  await clock.advance(periodMs);
  for (const { membership } of [a, c]) {
    assert.equal(membership.isGone("b"), true);
    assert.equal(membership.peer("b")?.heartbeat?.fencedBy, winner);
  }
  assert.equal(fences().length, 2, "nothing more written");
  a.membership.close();
  c.membership.close();
});

Deno.test("membership: released and fenced heartbeats are gone and never fenced", async () => {
  const clock = new FakeClock();
  const bucket = new SpyBucket(new MemoryBucket({ clock }));
  const old = clock.now() - HOUR_MS;
  await bucket.put(nodeKey("r"), encodeHeartbeat(heartbeatOf("r", old, "released")));
  await bucket.put(nodeKey("f"), encodeHeartbeat(heartbeatOf("f", old, "fenced")));
  bucket.puts = [];
  const { membership } = observe(bucket, clock);
  await clock.advance(60_000);
  assert.equal(bucket.puts.length, 0);
  for (const id of ["r", "f"]) {
    assert.equal(membership.isGone(id), true, id);
    assert.equal(membership.isLive(id), false, id);
  }
  assert.equal(membership.peer("f")?.heartbeat?.fencedBy, "z");
  membership.close();
});

Deno.test("membership: a heartbeat in format 1 is never fenced, and not live once old", async () => {
  const clock = new FakeClock();
  const bucket = new SpyBucket(new MemoryBucket({ clock }));
  const legacy = `wasmkeep-heartbeat 1\nold\nproc\n${clock.now()}\n`;
  await bucket.put(nodeKey("old"), new TextEncoder().encode(legacy));
  bucket.puts = [];
  const { membership } = observe(bucket, clock);
  await clock.advance(0);
  assert.equal(membership.isLive("old"), true);
  assert.equal(membership.peer("old")?.heartbeat?.format, 1);
  await clock.advance(120_000);
  assert.equal(bucket.puts.length, 0);
  assert.equal(membership.isLive("old"), false);
  assert.equal(membership.isGone("old"), false, "only its age frees its actors");
  membership.close();
});

Deno.test("membership: a peer that writes between the read and the fence is not fenced", async () => {
  const clock = new FakeClock();
  const memory = new MemoryBucket({ clock });
  const bucket = new SpyBucket(memory);
  const peer = new FakePeer(memory, clock, "b");
  await peer.write();
  await clock.advance(60_000);
  let stepsIn = true;
  bucket.beforePut = async (key, options) => {
    if (key === nodeKey("b") && options.ifMatch && stepsIn) {
      stepsIn = false;
      await peer.write(); // the last moment: after this node read, before its fence lands
    }
  };
  const { membership, lines } = observe(bucket, clock);
  await clock.advance(watchMs + periodMs);
  assert.deepEqual(bucket.puts.map((p) => p.outcome), ["refused"]);
  assert.equal(peer.refused, 0);
  const rewrite = peer.lastWrite!;
  assert.equal((await stored(memory, "b")).heartbeat.lease, "live");
  assert.equal(linesWith(lines, "no fence", "node=b").length, 1);
  await membership.refresh();
  assert.equal(membership.isLive("b"), true, "its new write shows it alive");
  assert.equal(membership.isGone("b"), false);

  // It does not write again: fenced on the usual terms from its new write.
  await advanceUntil(clock, async () => (await fencedAt(memory, "b")) !== undefined, 60_000);
  const fenced = (await fencedAt(memory, "b"))!;
  assert.ok(fenced >= rewrite + fenceAfterMs);
  assert.ok(fenced <= rewrite + fenceAfterMs + periodMs);
  membership.close();
});

Deno.test("membership: 1,200 nodes over two listing pages, reading only what changed", async () => {
  const clock = new FakeClock();
  const bucket = new SpyBucket(new MemoryBucket({ clock }));
  const ids = Array.from({ length: 1200 }, (_, i) => `n${String(i).padStart(4, "0")}`);
  for (const id of ids) {
    await bucket.put(nodeKey(id), encodeHeartbeat(heartbeatOf(id, clock.now())));
  }
  const { membership } = observe(bucket, clock);
  assert.equal(await membership.refresh(), true);
  assert.equal(bucket.lists, 2, "two pages");
  assert.equal(bucket.gets, 1200);
  assert.deepEqual(membership.liveNodes().map((p) => p.nodeId), ids);

  // The clock stays put, so no periodic round runs in between: only refresh lists.
  for (const id of ids.slice(0, 10)) {
    const restarted = { ...heartbeatOf(id, clock.now()), process: `${id}-again` };
    await bucket.put(nodeKey(id), encodeHeartbeat(restarted));
  }
  const lists = bucket.lists;
  assert.equal(await membership.refresh(), true);
  assert.equal(bucket.lists, lists + 2);
  assert.equal(bucket.gets, 1210, "only the ten that changed were read again");
  assert.equal(membership.peer("n0009")?.heartbeat?.process, "n0009-again");
  assert.equal(membership.isLive("n1199"), true);
  membership.close();
});

Deno.test("membership: a malformed heartbeat is not live and logged once per version", async () => {
  const clock = new FakeClock();
  const bucket = new SpyBucket(new MemoryBucket({ clock }));
  const text = (s: string) => new TextEncoder().encode(s);
  await bucket.put(nodeKey("m"), text("not a heartbeat\n"));
  // A heartbeat under another node's key is not that node's.
  await bucket.put(nodeKey("x"), encodeHeartbeat(heartbeatOf("y", clock.now())));
  await bucket.put("nodes/Not_An_Id", text("whatever"));
  bucket.puts = [];
  const { membership, lines } = observe(bucket, clock);
  await clock.advance(5 * periodMs);
  for (const id of ["m", "x"]) {
    assert.equal(membership.isLive(id), false, id);
    assert.equal(membership.isGone(id), false, id);
    assert.equal(membership.peer(id)?.heartbeat, undefined, id);
    assert.ok(membership.peer(id)?.problem, id);
    assert.equal(linesWith(lines, "WARN", "cannot be read", `node=${id}`).length, 1, id);
  }
  assert.match(membership.peer("x")!.problem!, /line 2 names "y"/);
  assert.equal(membership.peer("Not_An_Id"), undefined);
  assert.equal(linesWith(lines, "no heartbeat", "Not_An_Id").length, 1);
  assert.equal(bucket.puts.length, 0, "never fenced");

  await bucket.put(nodeKey("m"), text("still not a heartbeat\n"));
  await clock.advance(periodMs);
  assert.equal(linesWith(lines, "cannot be read", "node=m").length, 2, "a new version");
  await bucket.put(nodeKey("m"), encodeHeartbeat(heartbeatOf("m", clock.now())));
  await clock.advance(periodMs);
  assert.equal(membership.isLive("m"), true);
  membership.close();
});

Deno.test("membership: onChange reports appearance, change and removal", async () => {
  const clock = new FakeClock();
  const bucket = new MemoryBucket({ clock });
  const { membership } = observe(bucket, clock);
  const seen: string[] = [];
  const stop = membership.onChange((view) =>
    seen.push(`${view.nodeId}:${view.removed ? "removed" : view.heartbeat?.lease}`)
  );
  const peer = new FakePeer(bucket, clock, "b");
  await peer.write();
  await membership.refresh();
  await membership.refresh();
  assert.deepEqual(seen, ["b:live"], "nothing for an unchanged heartbeat");
  await clock.advance(1000);
  await peer.write();
  await membership.refresh();
  assert.deepEqual(seen, ["b:live", "b:live"]);
  const before = membership.peer("b")!;
  await bucket.delete(nodeKey("b"));
  await membership.refresh();
  assert.deepEqual(seen.at(-1), "b:removed");
  assert.equal(membership.peer("b"), undefined);
  assert.equal(membership.isGone("b"), false, "a deleted heartbeat frees nothing");
  assert.equal(before.removed, false, "views are snapshots");
  stop();
  await peer.bucket.put(nodeKey("c"), encodeHeartbeat(heartbeatOf("c", clock.now())));
  await membership.refresh();
  assert.equal(seen.length, 3, "unsubscribed");
  membership.close();
});

Deno.test("membership: a listing that hangs is given up after a period and the view kept", async () => {
  const clock = new FakeClock();
  const bucket = new MemoryBucket({ clock });
  await new FakePeer(bucket, clock, "b").write();
  const { membership, lines } = observe(bucket, clock);
  assert.equal(await membership.refresh(), true);
  bucket.faults = { listDelayMs: HOUR_MS };
  let result: boolean | undefined;
  const took = await clock.runUntilSettled(membership.refresh().then((r) => result = r));
  assert.equal(result, false);
  assert.ok(took <= periodMs, `gave up after ${took} ms`);
  assert.equal(linesWith(lines, "could not list the heartbeats").length, 1);
  assert.ok(membership.peer("b"), "the view is kept");
  membership.close();
});

Deno.test("membership: a refresh during a round waits for a round that starts after it", async () => {
  const clock = new FakeClock();
  const bucket = new SpyBucket(new MemoryBucket({ clock }));
  const { membership } = observe(bucket, clock);
  const first = membership.refresh();
  const second = membership.refresh();
  const third = membership.refresh();
  assert.notEqual(first, second);
  assert.equal(second, third, "callers that arrive meanwhile share one round");
  assert.deepEqual(await Promise.all([first, second, third]), [true, true, true]);
  assert.equal(bucket.lists, 2);
  membership.close();
});

Deno.test("membership: close stops the rounds", async () => {
  const clock = new FakeClock();
  const bucket = new SpyBucket(new MemoryBucket({ clock }));
  const { membership } = observe(bucket, clock);
  await clock.advance(2 * periodMs);
  const lists = bucket.lists;
  assert.equal(lists, 3, "at once, then every period");
  membership.close();
  await clock.advance(10 * periodMs);
  assert.equal(bucket.lists, lists);
  assert.equal(await membership.refresh(), false);
});

Deno.test("membership: a peer's lease dated ahead of this clock past the skew is logged, at most once a minute", async () => {
  const clock = new FakeClock();
  const bucket = new MemoryBucket({ clock });
  // Its clock a minute ahead; another one within the allowed skew.
  const ahead = new FakePeer(bucket, clock, "b", 60_000);
  const close = new FakePeer(bucket, clock, "c", timing.skewMs);
  ahead.start();
  close.start();
  const { membership, lines } = observe(bucket, clock);
  await clock.advance(90_000);
  const logged = linesWith(lines, "dated ahead of this clock");
  assert.equal(logged.length, 2, logged.join("\n"));
  assert.ok(logged.every((line) => line.includes("node=b")), logged.join("\n"));
  ahead.stop();
  close.stop();
  membership.close();
});
