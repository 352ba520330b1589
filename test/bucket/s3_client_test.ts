import { assert, assertEquals, assertRejects } from "./assert.ts";
import { type FakeS3, type Reply, s3Error, type SeenRequest, startFakeS3 } from "./fake_s3.ts";
import { S3Bucket } from "../../src/bucket/s3.ts";
import { openBucket } from "../../src/bucket/open.ts";
import { parseS3Url, s3SettingsFromEnv } from "../../src/bucket/s3_config.ts";
import {
  BucketRequestError,
  BucketUnavailable,
  PreconditionFailed,
} from "../../src/bucket/errors.ts";
import { FileBucket } from "../../src/bucket/file.ts";

const ok = (headers: Record<string, string> = {}, body = ""): Reply => ({
  status: 200,
  headers: { etag: '"e1"', "last-modified": "Wed, 01 Jan 2025 00:00:00 GMT", ...headers },
  body,
});

/** Runs `test` against a bucket on a fake server following `replies` in order. */
async function withFake(
  replies: Reply[],
  test: (bucket: S3Bucket, s3: FakeS3) => Promise<void>,
  timeouts = { requestTimeoutMs: 400, readSilenceMs: 200 },
): Promise<SeenRequest[]> {
  const s3 = startFakeS3((_, i) => replies[i] ?? ok());
  const bucket = S3Bucket.fromUrl("s3://b/pre", {
    AWS_ENDPOINT: s3.endpoint,
    AWS_ALLOW_HTTP: "true",
    AWS_ACCESS_KEY_ID: "k",
    AWS_SECRET_ACCESS_KEY: "s",
  }, timeouts);
  try {
    await test(bucket, s3);
  } finally {
    await bucket.close();
    await s3.close();
  }
  return s3.seen;
}

const body = new TextEncoder().encode("data");

for (const status of [500, 503, 429, 408]) {
  Deno.test(`S3Bucket: a ${status} answer is resent, for reads and writes`, async () => {
    const seen = await withFake(
      [s3Error(status, "Busy"), ok(), s3Error(status, "Busy"), ok()],
      async (b) => {
        assertEquals((await b.put("k", body)).etag, '"e1"');
        assertEquals((await b.head("k"))?.etag, '"e1"');
      },
    );
    assertEquals(seen.map((r) => r.method), ["PUT", "PUT", "HEAD", "HEAD"]);
    assertEquals(seen[0].path.split("?")[0], "/b/pre/k");
  });
}

Deno.test("S3Bucket: resends stop after 3 tries", async () => {
  const busy = s3Error(503, "SlowDown");
  const seen = await withFake([busy, busy, busy, busy], async (b) => {
    const error = await assertRejects(() => b.put("k", body), BucketUnavailable);
    assertEquals(error.status, 503);
    assert(error.ambiguous, "a write answered 5xx may have been applied");
  });
  assertEquals(seen.length, 3);
});

Deno.test("S3Bucket: a 409 ConditionalRequestConflict is retried", async () => {
  const conflict = s3Error(409, "ConditionalRequestConflict");
  const seen = await withFake([conflict, conflict, ok()], async (b) => {
    await b.put("k", body, { ifNoneMatch: "*" });
  });
  assertEquals(seen.length, 3);
  assertEquals(seen[2].headers["if-none-match"], "*");
});

Deno.test("S3Bucket: 412 is PreconditionFailed, flagged when a 5xx came first", async () => {
  await withFake([s3Error(412, "PreconditionFailed")], async (b) => {
    const e = await assertRejects(() => b.put("k", body, { ifMatch: '"x"' }), PreconditionFailed);
    assertEquals(e.maybeOwnWrite, false);
    assertEquals(e.key, "k");
  });
  await withFake([s3Error(500, "InternalError"), s3Error(412, "PreconditionFailed")], async (b) => {
    const e = await assertRejects(() => b.put("k", body, { ifNoneMatch: "*" }), PreconditionFailed);
    assertEquals(e.maybeOwnWrite, true);
    assertEquals(e.condition, "ifNoneMatch");
  });
});

Deno.test("S3Bucket: a 403 is a BucketRequestError, not resent", async () => {
  const seen = await withFake([s3Error(403, "AccessDenied")], async (b) => {
    const e = await assertRejects(() => b.get("k"), BucketRequestError);
    assertEquals(e.code, "AccessDenied");
  });
  assertEquals(seen.length, 1);
});

Deno.test("S3Bucket: an upload is not resent after a timeout", async () => {
  const seen = await withFake(["silent", ok()], async (b) => {
    const e = await assertRejects(() => b.put("k", body), BucketUnavailable);
    assert(e.ambiguous);
  });
  assertEquals(seen.length, 1);
});

Deno.test("S3Bucket: an upload is not resent after a broken connection", async () => {
  const seen = await withFake(["drop", ok()], async (b) => {
    const e = await assertRejects(() => b.put("k", body), BucketUnavailable);
    assert(e.ambiguous);
  });
  assertEquals(seen.length, 1);
});

Deno.test("S3Bucket: a read is resent after a broken connection and after silence", async () => {
  const seen = await withFake(["drop", "silent", ok({}, "hello")], async (b) => {
    const got = await b.get("k");
    assertEquals(new TextDecoder().decode(got!.body), "hello");
  });
  assertEquals(seen.map((r) => r.method), ["GET", "GET", "GET"]);
});

Deno.test("S3Bucket: a request that could not be sent is resent, and is not ambiguous", async () => {
  const closed = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = (closed.addr as Deno.NetAddr).port;
  closed.close();
  const bucket = S3Bucket.fromUrl("s3://b", {
    AWS_ENDPOINT: `http://127.0.0.1:${port}`,
    AWS_ALLOW_HTTP: "1",
    AWS_ACCESS_KEY_ID: "k",
    AWS_SECRET_ACCESS_KEY: "s",
  });
  try {
    const e = await assertRejects(() => bucket.put("k", body), BucketUnavailable);
    assertEquals(e.ambiguous, false);
  } finally {
    await bucket.close();
  }
});

Deno.test("S3Bucket: listing pages strip the prefix and pass the token on", async () => {
  const page = (keys: string[], next?: string): Reply => ({
    status: 200,
    headers: { "content-type": "application/xml" },
    body: `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult><Name>b</Name>` +
      `<IsTruncated>${next ? "true" : "false"}</IsTruncated>` +
      (next ? `<NextContinuationToken>${next}</NextContinuationToken>` : "") +
      keys.map((k) =>
        `<Contents><Key>pre/${k}</Key><ETag>"e"</ETag><Size>3</Size>` +
        `<LastModified>2025-01-01T00:00:00.000Z</LastModified></Contents>`
      ).join("") + `</ListBucketResult>`,
  });
  const seen = await withFake([page(["a", "b"], "t1"), page(["c"])], async (b) => {
    const first = await b.list("", { startAfter: "0" });
    assertEquals(first.objects.map((o) => o.key), ["a", "b"]);
    assertEquals(first.continuationToken, "t1");
    const second = await b.list("", { continuationToken: "t1" });
    assertEquals(second.objects[0], {
      key: "c",
      etag: '"e"',
      size: 3,
      lastModified: Date.UTC(2025, 0, 1),
    });
    assertEquals(second.continuationToken, undefined);
  });
  assert(seen[0].path.includes("start-after=pre%2F0"));
  assert(seen[0].path.includes("prefix=pre%2F"));
  assert(seen[1].path.includes("continuation-token=t1"));
});

Deno.test("s3 settings: plain http needs AWS_ALLOW_HTTP", () => {
  let message = "";
  try {
    s3SettingsFromEnv({ AWS_ENDPOINT: "http://127.0.0.1:5055" });
  } catch (e) {
    message = (e as Error).message;
  }
  assert(message.includes("AWS_ALLOW_HTTP=true"), message);
  const settings = s3SettingsFromEnv({
    AWS_ENDPOINT: "http://127.0.0.1:5055",
    AWS_ALLOW_HTTP: "true",
    AWS_REGION: "eu-west-3",
    AWS_ACCESS_KEY_ID: "id",
    AWS_SECRET_ACCESS_KEY: "secret",
  });
  assertEquals(settings.region, "eu-west-3");
  assertEquals(settings.credentials, {
    accessKeyId: "id",
    secretAccessKey: "secret",
    sessionToken: undefined,
  });
  const keys = { AWS_ACCESS_KEY_ID: "id", AWS_SECRET_ACCESS_KEY: "secret" };
  assertEquals(s3SettingsFromEnv(keys).region, "us-east-1");
  assertEquals(s3SettingsFromEnv(keys).endpoint, undefined);
});

Deno.test("s3 URLs: bucket and prefix", () => {
  assertEquals(parseS3Url("s3://b"), { bucket: "b", prefix: "" });
  assertEquals(parseS3Url("s3://b/"), { bucket: "b", prefix: "" });
  assertEquals(parseS3Url("s3://b/prod"), { bucket: "b", prefix: "prod/" });
  assertEquals(parseS3Url("s3://b/a/b/"), { bucket: "b", prefix: "a/b/" });
});

Deno.test("openBucket: s3:// and file:// URLs, a clear error for others", async () => {
  const s3 = openBucket("s3://b/p", {
    env: { AWS_REGION: "us-east-1", AWS_ACCESS_KEY_ID: "id", AWS_SECRET_ACCESS_KEY: "secret" },
  });
  assert(s3 instanceof S3Bucket);
  await s3.close();
  const file = openBucket("file:///tmp/x");
  assert(file instanceof FileBucket);
  for (const url of ["gs://b", "/tmp/x", "file://", "s3:/b"]) {
    let message = "";
    try {
      openBucket(url);
    } catch (e) {
      message = (e as Error).message;
    }
    assert(
      message.includes("s3://BUCKET") || message.includes("file://PATH"),
      `${url}: ${message}`,
    );
  }
});
