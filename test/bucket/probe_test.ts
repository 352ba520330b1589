import { assert, assertEquals } from "./assert.ts";
import { FakeClock } from "./fake_clock.ts";
import { CarelessBucket } from "../helpers/careless_bucket.ts";
import { startMoto } from "../../src/testing/moto.ts";
import type { Bucket } from "../../src/bucket/bucket.ts";
import { FileBucket } from "../../src/bucket/file.ts";
import { MemoryBucket } from "../../src/bucket/memory.ts";
import { CREATE_IGNORED, probeBucket, REPLACE_IGNORED } from "../../src/bucket/probe.ts";
import { seededRandom } from "../../src/bucket/random.ts";
import { S3Bucket } from "../../src/bucket/s3.ts";
import { systemClock } from "../../src/time/clock.ts";

async function probeLeavesNothing(bucket: Bucket): Promise<void> {
  const logs: string[] = [];
  const result = await probeBucket(bucket, {
    clock: systemClock,
    random: seededRandom(1),
    log: (level, message) => logs.push(`${level}: ${message}`),
  });
  assertEquals(result, { ok: true });
  assertEquals((await bucket.list("probe/")).objects, []);
  assertEquals(logs, ["info: the bucket refuses conflicting conditional writes"]);
}

Deno.test("probe: passes on MemoryBucket", () => probeLeavesNothing(new MemoryBucket()));

Deno.test("probe: passes on FileBucket", async () => {
  const dir = await Deno.makeTempDir({ prefix: "wasmkeep-probe-" });
  try {
    await probeLeavesNothing(new FileBucket(dir));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("probe: passes on S3 (moto)", async () => {
  const moto = await startMoto();
  const bucket = S3Bucket.fromUrl(`s3://${moto.bucket}/probe-test`, moto.env);
  try {
    await probeLeavesNothing(bucket);
  } finally {
    await bucket.close();
    await moto.stop();
  }
});

Deno.test("probe: a store ignoring If-None-Match is refused, saying why", async () => {
  const bucket = new CarelessBucket();
  const logs: string[] = [];
  const result = await probeBucket(bucket, {
    clock: systemClock,
    random: seededRandom(1),
    log: (level, message) => logs.push(`${level}: ${message}`),
  });
  assertEquals(result, { ok: false, reason: CREATE_IGNORED });
  assert(CREATE_IGNORED.includes("If-None-Match: * ignored"));
  assert(CREATE_IGNORED.includes("cannot keep two nodes from owning one actor"));
  assertEquals(logs, [`warn: the bucket cannot be used: ${CREATE_IGNORED}`]);
  assertEquals((await bucket.list("probe/")).objects, []);
});

Deno.test("probe: a store ignoring only If-Match is refused, saying why", async () => {
  const bucket = new CarelessBucket({ ignoreIfNoneMatch: false });
  const result = await probeBucket(bucket, { clock: systemClock, random: seededRandom(1) });
  assertEquals(result, { ok: false, reason: REPLACE_IGNORED });
  assert(REPLACE_IGNORED.includes("If-Match ignored"));
});

Deno.test("probe: a bucket that does not answer yet is probed again with backoff", async () => {
  const clock = new FakeClock();
  const bucket = new MemoryBucket({
    clock,
    faults: { outages: [{ from: clock.now(), until: clock.now() + 4000 }] },
  });
  const logs: string[] = [];
  const probe = probeBucket(bucket, {
    clock,
    random: seededRandom(2),
    log: (level, message) => logs.push(`${level}: ${message}`),
  });
  const took = await clock.runUntilSettled(probe);
  assertEquals(await probe, { ok: true });
  assert(took >= 4000 && took < 12_000, `took ${took} ms`);
  const retries = logs.filter((l) => l.includes("does not answer yet"));
  assert(retries.length >= 2, logs.join("\n"));
  assertEquals((await bucket.list("probe/")).objects, []);
});

Deno.test("probe: retrying ends when the signal aborts", async () => {
  const clock = new FakeClock();
  const bucket = new MemoryBucket({
    clock,
    faults: { errorRate: 1, errorStatuses: [503] },
  });
  const controller = new AbortController();
  clock.setTimer(60_000, () => controller.abort(new Error("start-up abandoned")));
  const probe = probeBucket(bucket, {
    clock,
    random: seededRandom(3),
    signal: controller.signal,
  }).catch((e) => e);
  assertEquals(await clock.runUntilSettled(probe), 60_000);
  assertEquals((await probe).message, "start-up abandoned");
});
