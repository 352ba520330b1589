import assert from "node:assert/strict";
import { createHmac } from "node:crypto";
import { FakeClock } from "../bucket/fake_clock.ts";
import { startMoto } from "../../src/testing/moto.ts";
import { MemoryBucket } from "../../src/bucket/memory.ts";
import { S3Bucket } from "../../src/bucket/s3.ts";
import type { Bucket, CallOptions, PutOptions, StoredObject } from "../../src/bucket/bucket.ts";
import { BucketUnavailable } from "../../src/bucket/errors.ts";
import { seededRandom } from "../../src/bucket/random.ts";
import { createLogger } from "../../src/log.ts";
import type { Random } from "../../src/time/clock.ts";
import {
  CLUSTER_SECRET_KEY,
  CLUSTER_SECRET_READ_TIMEOUT_MS,
  ClusterSecret,
  ClusterSecretUnusable,
  loadClusterSecret,
} from "../../src/security/cluster_secret.ts";

const utf8 = new TextEncoder();

function logger() {
  const lines: string[] = [];
  return { lines, log: createLogger({ level: "debug", sink: (l) => lines.push(l) }) };
}

/** The key's hex as stored in the bucket. */
async function storedHex(bucket: Bucket): Promise<string> {
  const object = await bucket.get(CLUSTER_SECRET_KEY);
  assert.ok(object, `${CLUSTER_SECRET_KEY} exists`);
  return new TextDecoder().decode(object.body).split("\n")[1];
}

/** A memory bucket that counts the puts it acknowledged. */
class CountingBucket extends MemoryBucket {
  puts = 0;
  override async put(key: string, body: Uint8Array, options?: PutOptions) {
    const answer = await super.put(key, body, options);
    this.puts++;
    return answer;
  }
}

/** Holds every read of the first `parties` until all of them are under way: all read "absent". */
class BarrierBucket extends CountingBucket {
  #waiting: (() => void)[] = [];
  constructor(private parties: number) {
    super();
  }
  override async get(key: string, options?: CallOptions): Promise<StoredObject | null> {
    const answer = await super.get(key, options);
    if (this.parties > 0) {
      this.parties--;
      await new Promise<void>((resolve) => {
        this.#waiting.push(resolve);
        if (this.parties === 0) { for (const release of this.#waiting) release(); }
      });
    }
    return answer;
  }
}

Deno.test("loadClusterSecret: the first node creates the secret in the versioned format", async () => {
  const bucket = new CountingBucket();
  const { lines, log } = logger();
  const secret = await loadClusterSecret(bucket, { random: seededRandom(1), log });
  assert.ok(secret.usable);
  assert.equal(secret.problem, undefined);
  const object = await bucket.get(CLUSTER_SECRET_KEY);
  assert.ok(object);
  assert.match(
    new TextDecoder().decode(object.body),
    /^wasmkeep-cluster-secret 1\n[0-9a-f]{64}\n$/,
  );
  assert.equal(bucket.puts, 1);
  assert.ok(lines.some((l) => l.includes("created the cluster secret")), lines.join("\n"));
});

Deno.test("loadClusterSecret: a later node reads the same secret and writes nothing", async () => {
  const bucket = new CountingBucket();
  const first = await loadClusterSecret(bucket, { random: seededRandom(1), log: logger().log });
  const before = await bucket.head(CLUSTER_SECRET_KEY);
  const { lines, log } = logger();
  const second = await loadClusterSecret(bucket, { random: seededRandom(2), log });
  assert.equal(second.mac("a call"), first.mac("a call"));
  assert.equal(bucket.puts, 1);
  assert.deepEqual(await bucket.head(CLUSTER_SECRET_KEY), before);
  assert.ok(lines.some((l) => l.includes("using the cluster secret")), lines.join("\n"));
});

Deno.test("loadClusterSecret: two nodes racing to create end with one secret both use", async () => {
  const bucket = new BarrierBucket(2);
  const [a, b] = await Promise.all([
    loadClusterSecret(bucket, { random: seededRandom(1), log: logger().log }),
    loadClusterSecret(bucket, { random: seededRandom(2), log: logger().log }),
  ]);
  assert.equal(bucket.puts, 1, "one create landed, the other was refused");
  assert.equal(a.mac("x"), b.mac("x"));
  const stored = await loadClusterSecret(bucket, { random: seededRandom(3), log: logger().log });
  assert.equal(stored.mac("x"), a.mac("x"));
});

Deno.test("loadClusterSecret: a create whose answer was lost is found as this node's own", async () => {
  const clock = new FakeClock();
  class LostAnswerBucket extends MemoryBucket {
    lost = false;
    override async put(key: string, body: Uint8Array, options?: PutOptions) {
      const answer = await super.put(key, body, options);
      if (this.lost) return answer;
      this.lost = true;
      throw new BucketUnavailable("PUT: connection reset", { ambiguous: true });
    }
  }
  const bucket = new LostAnswerBucket({ clock });
  const loading = loadClusterSecret(bucket, { random: seededRandom(1), log: logger().log, clock });
  await clock.runUntilSettled(loading);
  const secret = await loading;
  const again = await loadClusterSecret(bucket, { random: seededRandom(2), log: logger().log });
  assert.equal(secret.mac("x"), again.mac("x"));
});

Deno.test("ClusterSecret.mac is HMAC-SHA256 under the key", () => {
  const key = seededRandom(9).fill(new Uint8Array(32));
  const secret = ClusterSecret.fromBytes(key);
  for (const message of ["", "a", "x".repeat(64), "x".repeat(1000), "é ☃ 🙂", "wasmkeep-call-v1"]) {
    assert.equal(secret.mac(message), createHmac("sha256", key).update(message).digest("hex"));
  }
  // Each use starts from the key, not from the state the previous one left.
  assert.equal(secret.mac("a"), secret.mac("a"));
  assert.throws(() => ClusterSecret.fromBytes(new Uint8Array(16)), RangeError);
});

Deno.test("the key is never logged, shown or serialised", async () => {
  const bucket = new MemoryBucket();
  const { lines, log } = logger();
  const secret = await loadClusterSecret(bucket, { random: seededRandom(1), log });
  const again = await loadClusterSecret(bucket, { random: seededRandom(2), log });
  const hex = await storedHex(bucket);
  for (const text of [...lines, Deno.inspect(secret, { showHidden: true, depth: 10 })]) {
    assert.ok(!text.includes(hex), text);
  }
  assert.ok(!JSON.stringify(again).includes(hex));
});

const MALFORMED: [string, Uint8Array, RegExp][] = [
  ["empty", new Uint8Array(0), /it is empty/],
  ["not UTF-8", new Uint8Array([0xff, 0xfe, 0x00]), /not UTF-8 text/],
  ["another first line", utf8.encode(`secret\n${"ab".repeat(32)}\n`), /first line is not/],
  [
    "a newer format",
    utf8.encode(`wasmkeep-cluster-secret 2\n${"ab".repeat(32)}\n`),
    /format 2.*run the same WasmKeep version on every node/,
  ],
  ["no key line", utf8.encode("wasmkeep-cluster-secret 1\n"), /1 lines, not 2/],
  ["an extra line", utf8.encode(`wasmkeep-cluster-secret 1\n${"ab".repeat(32)}\nx\n`), /3 lines/],
  ["a short key", utf8.encode(`wasmkeep-cluster-secret 1\n${"ab".repeat(31)}\n`), /second line/],
  ["upper case", utf8.encode(`wasmkeep-cluster-secret 1\n${"AB".repeat(32)}\n`), /second line/],
  ["CRLF", utf8.encode(`wasmkeep-cluster-secret 1\r\n${"ab".repeat(32)}\r\n`), /first line/],
  ["all zeros", utf8.encode(`wasmkeep-cluster-secret 1\n${"00".repeat(32)}\n`), /all zeros/],
];

for (const [name, body, what] of MALFORMED) {
  Deno.test(`loadClusterSecret: a malformed object (${name}) stops calls, and is left as it is`, async () => {
    const bucket = new CountingBucket();
    await bucket.put(CLUSTER_SECRET_KEY, body);
    const before = await bucket.get(CLUSTER_SECRET_KEY);
    const { lines, log } = logger();
    const secret = await loadClusterSecret(bucket, { random: seededRandom(1), log });
    assert.equal(secret.usable, false);
    const problem = secret.problem!;
    assert.match(problem, /^calls between nodes are stopped until cluster\/secret is fixed: /);
    assert.match(problem, what);
    if (name !== "a newer format") assert.match(problem, /delete it and restart every node/);
    assert.throws(
      () => secret.mac("x"),
      (e) => e instanceof ClusterSecretUnusable && e.message === problem,
    );
    assert.ok(
      lines.some((l) => l.includes(" ERROR ") && l.includes("calls between nodes are stopped")),
    );
    assert.equal(bucket.puts, 1, "only the test's own write");
    assert.deepEqual(await bucket.get(CLUSTER_SECRET_KEY), before);
  });
}

Deno.test("loadClusterSecret: a well-formed object without a trailing newline is read", async () => {
  const key = seededRandom(4).fill(new Uint8Array(32));
  const hex = Array.from(key, (b) => b.toString(16).padStart(2, "0")).join("");
  const bucket = new MemoryBucket();
  await bucket.put(CLUSTER_SECRET_KEY, utf8.encode(`wasmkeep-cluster-secret 1\n${hex}`));
  const secret = await loadClusterSecret(bucket, { random: seededRandom(1), log: logger().log });
  assert.equal(secret.mac("x"), ClusterSecret.fromBytes(key).mac("x"));
});

Deno.test("loadClusterSecret: an unreachable bucket throws BucketUnavailable, and nothing is written", async () => {
  const clock = new FakeClock();
  const bucket = new CountingBucket({ clock, faults: { outages: [{ from: 0, until: Infinity }] } });
  await assert.rejects(
    loadClusterSecret(bucket, { random: seededRandom(1), log: logger().log, clock }),
    BucketUnavailable,
  );
  bucket.faults = {};
  assert.equal(await bucket.get(CLUSTER_SECRET_KEY), null);
  // Once the bucket is back, the next try makes it.
  const secret = await loadClusterSecret(bucket, { random: seededRandom(1), log: logger().log });
  assert.ok(secret.usable);
});

Deno.test("loadClusterSecret: a read the bucket never answers fails after its timeout", async () => {
  const clock = new FakeClock();
  const bucket = new MemoryBucket({
    clock,
    faults: { timeoutRate: 1 },
    requestTimeoutMs: 3_600_000,
  });
  const loading = loadClusterSecret(bucket, { random: seededRandom(1), log: logger().log, clock });
  loading.catch(() => {});
  const took = await clock.runUntilSettled(loading);
  assert.equal(took, CLUSTER_SECRET_READ_TIMEOUT_MS);
  await assert.rejects(loading, BucketUnavailable);
});

Deno.test("loadClusterSecret: a create the bucket never acknowledges throws BucketUnavailable", async () => {
  const clock = new FakeClock();
  class RefusingPuts extends MemoryBucket {
    override put(): Promise<{ etag: string }> {
      return Promise.reject(new BucketUnavailable("PUT: 503", { ambiguous: false, status: 503 }));
    }
  }
  const bucket = new RefusingPuts({ clock });
  const loading = loadClusterSecret(bucket, { random: seededRandom(1), log: logger().log, clock });
  loading.catch(() => {});
  await clock.runUntilSettled(loading);
  await assert.rejects(loading, BucketUnavailable);
  assert.equal(await bucket.get(CLUSTER_SECRET_KEY), null);
});

Deno.test("loadClusterSecret: a secret created then deleted before it was read is an error to retry", async () => {
  class VanishingBucket extends MemoryBucket {
    reads = 0;
    override async get(key: string, options?: CallOptions) {
      // The first read finds nothing; another node's create lands, then someone deletes it.
      if (this.reads++ === 0) {
        const answer = await super.get(key, options);
        await super.put(key, utf8.encode(`wasmkeep-cluster-secret 1\n${"ab".repeat(32)}\n`));
        return answer;
      }
      await super.delete(key);
      return super.get(key, options);
    }
  }
  await assert.rejects(
    loadClusterSecret(new VanishingBucket(), { random: seededRandom(1), log: logger().log }),
    (e) => e instanceof BucketUnavailable && /deleted before this node read it/.test(e.message),
  );
});

Deno.test("loadClusterSecret: a random source that gives zeros is refused", async () => {
  const zeros: Random = { next: () => 0, fill: (bytes) => bytes.fill(0) };
  const bucket = new MemoryBucket();
  await assert.rejects(
    loadClusterSecret(bucket, { random: zeros, log: logger().log }),
    /not writing a new cluster\/secret that every node would refuse \(is the random source broken\?\): .*all zeros/,
  );
  assert.equal(await bucket.get(CLUSTER_SECRET_KEY), null);
});

Deno.test("loadClusterSecret on a real S3 server (moto): created once, read by the others", async () => {
  const moto = await startMoto();
  const buckets = [1, 2, 3].map(() => S3Bucket.fromUrl(`s3://${moto.bucket}/cluster-a`, moto.env));
  try {
    const [a, b] = await Promise.all([
      loadClusterSecret(buckets[0], { random: seededRandom(1), log: logger().log }),
      loadClusterSecret(buckets[1], { random: seededRandom(2), log: logger().log }),
    ]);
    const c = await loadClusterSecret(buckets[2], { random: seededRandom(3), log: logger().log });
    assert.equal(a.mac("x"), b.mac("x"));
    assert.equal(c.mac("x"), a.mac("x"));
    const hex = await storedHex(buckets[2]);
    assert.match(hex, /^[0-9a-f]{64}$/);
  } finally {
    for (const bucket of buckets) await bucket.close();
    await moto.stop();
  }
});
