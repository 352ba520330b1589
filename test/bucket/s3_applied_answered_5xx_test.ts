/**
 * Writes the store applied and answered 500, then the client sent again: the
 * resend's answer must not be taken for the whole story.
 */
import assert from "node:assert/strict";
import { startStatefulS3 } from "./stateful_s3.ts";
import { S3Bucket } from "../../src/bucket/s3.ts";
import { BucketUnavailable, PreconditionFailed } from "../../src/bucket/errors.ts";
import { probeBucket } from "../../src/bucket/probe.ts";
import { seededRandom } from "../../src/bucket/random.ts";
import { systemClock } from "../../src/time/clock.ts";

function bucketOn(endpoint: string): S3Bucket {
  return S3Bucket.fromUrl("s3://b", {
    AWS_ENDPOINT: endpoint,
    AWS_ALLOW_HTTP: "true",
    AWS_ACCESS_KEY_ID: "k",
    AWS_SECRET_ACCESS_KEY: "s",
  }, { random: seededRandom(7) });
}

Deno.test("S3Bucket: a write answered 5xx, then refused for good on its resends, stays ambiguous", async () => {
  let puts = 0;
  const s3 = startStatefulS3((method) => {
    if (method !== "PUT") return undefined;
    return ++puts === 1 ? "apply-500" : { status: 409, code: "ConditionalRequestConflict" };
  });
  const bucket = bucketOn(s3.endpoint);
  try {
    const error = await bucket.put("k", new Uint8Array([1]), { ifNoneMatch: "*" }).then(
      () => undefined,
      (e) => e,
    );
    assert.ok(s3.objects.has("/b/k"), "the first try landed");
    assert.ok(error instanceof BucketUnavailable, `${error}`);
    assert.equal(error.ambiguous, true);
    assert.match(error.message, /after a try answered 5xx that may have been applied/);
  } finally {
    await bucket.close();
    await s3.close();
  }
});

Deno.test("S3Bucket: a conditional delete answered 5xx, then 404, may have been this client's own", async () => {
  let deletes = 0;
  const s3 = startStatefulS3((method) =>
    method === "DELETE" && deletes++ === 0 ? "apply-500" : undefined
  );
  const bucket = bucketOn(s3.endpoint);
  try {
    const { etag } = await bucket.put("nodes/x", new Uint8Array([1]), { ifNoneMatch: "*" });
    const error = await bucket.delete("nodes/x", { ifMatch: etag }).then(() => undefined, (e) => e);
    assert.equal(s3.objects.size, 0, "the delete landed");
    assert.ok(error instanceof PreconditionFailed, `${error}`);
    assert.equal(error.maybeOwnWrite, true);
  } finally {
    await bucket.close();
    await s3.close();
  }
});

Deno.test("probeBucket: a refusal of its own write answered 5xx is probed again, not a verdict", async () => {
  let faulted = false;
  const s3 = startStatefulS3((method, path) => {
    if (!faulted && method === "PUT" && path.includes("/probe/")) {
      faulted = true;
      return "apply-500";
    }
    return undefined;
  });
  const bucket = bucketOn(s3.endpoint);
  try {
    const result = await probeBucket(bucket, { clock: systemClock, random: seededRandom(1) });
    assert.deepEqual(result, { ok: true }, s3.log.join("\n"));
  } finally {
    await bucket.close();
    await s3.close();
  }
});
