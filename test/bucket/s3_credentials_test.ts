import { assert, assertEquals } from "./assert.ts";
import { FakeClock } from "./fake_clock.ts";
import type { Bucket, DeleteOptions, PutOptions } from "../../src/bucket/bucket.ts";
import { BucketRequestError } from "../../src/bucket/errors.ts";
import { MemoryBucket } from "../../src/bucket/memory.ts";
import { BucketView } from "../../src/bucket/bucket_view.ts";
import { openBucket } from "../../src/bucket/open.ts";
import { probeBucket } from "../../src/bucket/probe.ts";
import { seededRandom } from "../../src/bucket/random.ts";
import { type Env, S3ConfigError, s3SettingsFromEnv } from "../../src/bucket/s3_config.ts";

const KEYS = { AWS_ACCESS_KEY_ID: "AKIDEXAMPLE", AWS_SECRET_ACCESS_KEY: "secret" };

function refusal(env: Env): string {
  try {
    s3SettingsFromEnv(env);
  } catch (e) {
    assert(e instanceof S3ConfigError, String(e));
    assert(e instanceof TypeError);
    return e.message;
  }
  throw new Error(`accepted ${JSON.stringify(env)}`);
}

Deno.test("s3 credentials: none set is refused, naming the variables and the opt-in", () => {
  for (const env of [{}, { AWS_REGION: "eu-west-3" }, { AWS_SESSION_TOKEN: "t" }]) {
    const message = refusal(env);
    assert(message.includes("set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"), message);
    assert(message.includes("AWS_SESSION_TOKEN"), message);
    assert(message.includes("WASMKEEP_S3_CREDENTIALS=default-chain"), message);
    assert(!message.includes("\n"), message);
  }
  // Empty values count as unset, as a shell's `export AWS_ACCESS_KEY_ID=` gives.
  assert(
    refusal({ AWS_ACCESS_KEY_ID: "", AWS_SECRET_ACCESS_KEY: "" }).startsWith("no S3 credentials"),
  );
});

Deno.test("s3 credentials: one key of the pair is refused, naming the missing one", () => {
  assertEquals(
    refusal({ AWS_ACCESS_KEY_ID: "AKIDEXAMPLE" }),
    "AWS_SECRET_ACCESS_KEY is not set but AWS_ACCESS_KEY_ID is: set both, the key's id and its secret",
  );
  assertEquals(
    refusal({ AWS_SECRET_ACCESS_KEY: "secret" }),
    "AWS_ACCESS_KEY_ID is not set but AWS_SECRET_ACCESS_KEY is: set both, the key's id and its secret",
  );
  // The SDK's chain would skip half a pair unnoticed: refused with the opt-in too.
  assert(
    refusal({ AWS_ACCESS_KEY_ID: "AKIDEXAMPLE", WASMKEEP_S3_CREDENTIALS: "default-chain" })
      .startsWith("AWS_SECRET_ACCESS_KEY is not set"),
  );
});

Deno.test("s3 credentials: static keys from the environment, with a session token", () => {
  assertEquals(s3SettingsFromEnv(KEYS).credentials, {
    accessKeyId: "AKIDEXAMPLE",
    secretAccessKey: "secret",
    sessionToken: undefined,
  });
  assertEquals(s3SettingsFromEnv({ ...KEYS, AWS_SESSION_TOKEN: "token" }).credentials, {
    accessKeyId: "AKIDEXAMPLE",
    secretAccessKey: "secret",
    sessionToken: "token",
  });
  assertEquals(s3SettingsFromEnv({ ...KEYS, WASMKEEP_S3_CREDENTIALS: "env" }).credentials, {
    accessKeyId: "AKIDEXAMPLE",
    secretAccessKey: "secret",
    sessionToken: undefined,
  });
});

Deno.test("s3 credentials: WASMKEEP_S3_CREDENTIALS=default-chain hands them to the SDK's chain", () => {
  const settings = s3SettingsFromEnv({ WASMKEEP_S3_CREDENTIALS: "default-chain" });
  assertEquals(settings, {
    region: "us-east-1",
    endpoint: undefined,
    credentials: "default-chain",
  });
  // The chain reads these variables itself, first.
  assertEquals(
    s3SettingsFromEnv({ ...KEYS, WASMKEEP_S3_CREDENTIALS: "default-chain" }).credentials,
    "default-chain",
  );
  assertEquals(
    refusal({ ...KEYS, WASMKEEP_S3_CREDENTIALS: "imds" }),
    "WASMKEEP_S3_CREDENTIALS must be env (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY) or " +
      "default-chain (the AWS SDK's own chain), not 'imds'",
  );
});

Deno.test("s3 settings: AWS_ENDPOINT_URL_S3 is an endpoint too, checked like AWS_ENDPOINT", () => {
  assertEquals(
    s3SettingsFromEnv({ ...KEYS, AWS_ENDPOINT_URL_S3: "https://s3.example.net" }).endpoint,
    "https://s3.example.net",
  );
  assertEquals(
    s3SettingsFromEnv({
      ...KEYS,
      AWS_ENDPOINT: "https://a.example.net",
      AWS_ENDPOINT_URL_S3: "https://b.example.net",
      AWS_ENDPOINT_URL: "https://c.example.net",
    }).endpoint,
    "https://a.example.net",
  );
  assert(
    refusal({ ...KEYS, AWS_ENDPOINT_URL_S3: "http://127.0.0.1:5055" })
      .startsWith("AWS_ENDPOINT_URL_S3 http://127.0.0.1:5055 is plain http"),
  );
});

Deno.test("openBucket: an s3:// bucket without credentials is an S3ConfigError", () => {
  let error: unknown;
  try {
    openBucket("s3://b", { env: { AWS_REGION: "us-east-1" } });
  } catch (e) {
    error = e;
  }
  assert(error instanceof S3ConfigError, String(error));
});

/** A bucket that answers 403 to every call until `accept()`. */
class RefusingBucket extends MemoryBucket {
  refusing = true;

  #check(op: string, key: string): void {
    if (this.refusing) {
      throw new BucketRequestError(`${op} ${key}: 403 InvalidAccessKeyId`, {
        status: 403,
        code: "InvalidAccessKeyId",
      });
    }
  }

  override async put(
    key: string,
    body: Uint8Array,
    options?: PutOptions,
  ): Promise<{ etag: string }> {
    this.#check("PUT", key);
    return await super.put(key, body, options);
  }

  override async delete(key: string, options?: DeleteOptions): Promise<void> {
    this.#check("DELETE", key);
    await super.delete(key, options);
  }
}

Deno.test("probe: a bucket refusing the credentials (403) is probed again, saying so", async () => {
  const clock = new FakeClock();
  const bucket = new RefusingBucket({ clock });
  const logs: string[] = [];
  const probe = probeBucket(bucket, {
    clock,
    random: seededRandom(4),
    log: (level, message) => {
      logs.push(`${level}: ${message}`);
      if (logs.filter((l) => l.includes("refused this node's credentials")).length === 3) {
        bucket.refusing = false;
      }
    },
  });
  await clock.runUntilSettled(probe);
  assertEquals(await probe, { ok: true });
  const refused = logs.filter((l) =>
    /^warn: the bucket refused this node's credentials \(PUT probe\/\w+: 403 InvalidAccessKeyId\); probing again in \d+ ms$/
      .test(l)
  );
  assertEquals(refused.length, 3, logs.join("\n"));
  assertEquals(logs.at(-1), "info: the bucket refuses conflicting conditional writes");
  assertEquals((await bucket.list("probe/")).objects, []);
});

Deno.test("probe: other refusals than 403 are still a verdict", async () => {
  const bucket: Bucket = new BucketView(new MemoryBucket(), {
    before: ({ op }) => {
      if (op !== "put") return;
      throw new BucketRequestError("PUT probe/x: 404 NoSuchBucket", {
        status: 404,
        code: "NoSuchBucket",
      });
    },
  });
  const result = await probeBucket(bucket, { clock: new FakeClock(), random: seededRandom(5) });
  assertEquals(result, {
    ok: false,
    reason:
      "the bucket refused a conditional write the cluster needs: PUT probe/x: 404 NoSuchBucket",
  });
});
