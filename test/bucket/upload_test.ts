import { assert, assertEquals, assertRejects } from "./assert.ts";
import { FakeClock } from "./fake_clock.ts";
import { MemoryBucket } from "../../src/bucket/memory.ts";
import type { PutOptions } from "../../src/bucket/bucket.ts";
import {
  BucketRequestError,
  BucketUnavailable,
  PreconditionFailed,
} from "../../src/bucket/errors.ts";
import { uploadBounds, uploadWithAttempts } from "../../src/bucket/upload.ts";

/** What one put does: answer, stay silent, apply and stay silent, or fail. */
type Step = "ok" | "silent" | "applied-silent" | "503" | "403";

/** A memory bucket whose puts follow a script, recording when each started. */
class ScriptedBucket extends MemoryBucket {
  readonly starts: number[] = [];
  constructor(readonly clock: FakeClock, readonly script: Step[]) {
    super({ clock });
  }
  override async put(key: string, body: Uint8Array, options: PutOptions = {}) {
    this.starts.push(this.clock.now());
    const step = this.script.shift() ?? "ok";
    const silence = () =>
      new Promise<never>((_, reject) => {
        options.signal?.addEventListener("abort", () => reject(options.signal?.reason));
      });
    if (step === "silent") return await silence();
    if (step === "applied-silent") {
      await super.put(key, body, options);
      return await silence();
    }
    if (step === "503") throw new BucketUnavailable("503", { ambiguous: false, status: 503 });
    if (step === "403") throw new BucketRequestError("403", { status: 403 });
    return super.put(key, body, options);
  }
}

const body = new Uint8Array(1000);

Deno.test("uploadBounds: 5 s + 1 s per started MB per attempt, 20 s + 1 s per MB in all", () => {
  assertEquals(uploadBounds(0), { firstAttemptMs: 5000, totalMs: 20_000 });
  assertEquals(uploadBounds(500_000), { firstAttemptMs: 6000, totalMs: 21_000 });
  assertEquals(uploadBounds(3_000_000), { firstAttemptMs: 8000, totalMs: 23_000 });
  assertEquals(uploadBounds(25_000_000).firstAttemptMs, 30_000);
});

Deno.test("upload: a silent bucket gets 3 attempts (6 s, 12 s, the rest) within 21 s", async () => {
  const clock = new FakeClock();
  const bucket = new ScriptedBucket(clock, ["silent", "silent", "silent"]);
  const t0 = clock.now();
  const upload = uploadWithAttempts(bucket, "wal/1", body, { ifNoneMatch: "*" }, clock);
  const outcome = upload.catch((e) => e);
  // Under a megabyte still counts one: 5 s + 1 s, then twice that, then what is left of 21 s.
  assertEquals(await clock.runUntilSettled(upload), 21_000);
  assertEquals(bucket.starts.map((t) => t - t0), [0, 6000, 18_000]);
  const error = await outcome;
  assert(error instanceof BucketUnavailable && error.ambiguous);
});

Deno.test("upload: a large body gets a second per MB more, per attempt and in all", async () => {
  const clock = new FakeClock();
  const bucket = new ScriptedBucket(clock, ["silent", "silent", "silent"]);
  const t0 = clock.now();
  const big = new Uint8Array(3_000_000);
  const upload = uploadWithAttempts(bucket, "snap", big, {}, clock).catch((e) => e);
  // 8 s, then 16 s cut to the 15 s left of 23 s: no time for a third.
  assertEquals(await clock.runUntilSettled(upload), 23_000);
  assertEquals(bucket.starts.map((t) => t - t0), [0, 8000]);
});

Deno.test("upload: the second attempt lands after a silent first", async () => {
  const clock = new FakeClock();
  const bucket = new ScriptedBucket(clock, ["silent", "ok"]);
  const upload = uploadWithAttempts(bucket, "wal/1", body, { ifNoneMatch: "*" }, clock);
  assertEquals(await clock.runUntilSettled(upload), 6000);
  assertEquals((await upload).etag, (await bucket.head("wal/1"))!.etag);
});

Deno.test("upload: a create whose answer was lost is recognised as ours", async () => {
  const clock = new FakeClock();
  const bucket = new ScriptedBucket(clock, ["applied-silent", "ok"]);
  const upload = uploadWithAttempts(bucket, "wal/1", body, { ifNoneMatch: "*" }, clock);
  await clock.runUntilSettled(upload);
  assertEquals((await upload).etag, (await bucket.head("wal/1"))!.etag);
  assertEquals(bucket.starts.length, 2);
});

Deno.test("upload: a lost answer does not hide another writer's object", async () => {
  const clock = new FakeClock();
  const bucket = new ScriptedBucket(clock, ["silent", "ok"]);
  const upload = uploadWithAttempts(bucket, "wal/1", body, { ifNoneMatch: "*" }, clock);
  // Another node creates the key while the first attempt hangs.
  await clock.advance(1000);
  bucket.script.unshift("ok");
  await bucket.put("wal/1", new Uint8Array([9]));
  bucket.starts.pop();
  const outcome = upload.catch((e) => e);
  await clock.runUntilSettled(upload);
  assert((await outcome) instanceof PreconditionFailed);
});

Deno.test("upload: a refused condition or a refused request ends it at once", async () => {
  const clock = new FakeClock();
  const bucket = new ScriptedBucket(clock, []);
  await bucket.put("wal/1", body);
  await assertRejects(
    () => uploadWithAttempts(bucket, "wal/1", body, { ifNoneMatch: "*" }, clock),
    PreconditionFailed,
  );
  const refusing = new ScriptedBucket(clock, ["403"]);
  await assertRejects(() => uploadWithAttempts(refusing, "k", body, {}, clock), BucketRequestError);
  assertEquals(refusing.starts.length, 1);
});

Deno.test("upload: error answers after the client's resends lead to the next attempt", async () => {
  const clock = new FakeClock();
  const bucket = new ScriptedBucket(clock, ["503", "503", "ok"]);
  const upload = uploadWithAttempts(bucket, "k", body, {}, clock);
  await clock.runUntilSettled(upload);
  assertEquals(bucket.starts.length, 3);
});

Deno.test("upload: a periodic snapshot gets one attempt, capped", async () => {
  const clock = new FakeClock();
  const bucket = new ScriptedBucket(clock, ["silent", "ok"]);
  const big = new Uint8Array(8_000_000);
  const upload = uploadWithAttempts(
    bucket,
    "snap",
    big,
    { maxAttempts: 1, maxAttemptMs: 10_000 },
    clock,
  )
    .catch((e) => e);
  assertEquals(await clock.runUntilSettled(upload), 10_000);
  assert((await upload) instanceof BucketUnavailable);
  assertEquals(bucket.starts.length, 1);
});

Deno.test("upload: the caller's signal ends it with the caller's reason", async () => {
  const clock = new FakeClock();
  const bucket = new ScriptedBucket(clock, ["silent"]);
  const controller = new AbortController();
  const upload = uploadWithAttempts(bucket, "k", body, { signal: controller.signal }, clock)
    .catch((e) => e);
  await clock.advance(1000);
  controller.abort(new Error("stopping"));
  assertEquals((await upload).message, "stopping");
  assertEquals(bucket.starts.length, 1);
});
