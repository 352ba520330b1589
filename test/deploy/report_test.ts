import assert from "node:assert/strict";
import { MemoryBucket } from "../../src/bucket/memory.ts";
import { deploy } from "../../src/deploy/deploy.ts";
import {
  configWarnings,
  hasUrlWithPassword,
  looksLikeSecretName,
} from "../../src/deploy/deploy_report.ts";
import { CHAT_WASM, COUNTER_WASM, KV_WASM } from "../../src/testing/node_process.ts";

const SHOP = { tenant: "acme", app: "shop" };

Deno.test("names that look like secrets: a part of the name, whole", () => {
  for (
    const name of [
      "ADMIN_TOKEN",
      "API_KEY",
      "apiKey",
      "DB_PASSWORD",
      "SMTP_PASS",
      "SECRET",
      "aws.credentials",
      "PRIVATE_PEM",
      "github-token",
      "APIKEY",
    ]
  ) {
    assert.ok(looksLikeSecretName(name), name);
  }
  for (
    const name of ["GREETING", "MONKEY", "PASSAGE", "TOKENIZER_MODE", "KEYBOARD", "DATABASE_URL"]
  ) {
    assert.ok(!looksLikeSecretName(name), name);
  }
});

Deno.test("values that are URLs with a password", () => {
  for (
    const value of [
      "postgres://app:s3cret@db.internal/shop",
      "redis://:hunter2@cache:6379",
      "see https://user:pw@example.com/x",
    ]
  ) {
    assert.ok(hasUrlWithPassword(value), value);
  }
  for (
    const value of [
      "https://example.com/a:b@c",
      "https://user@example.com",
      "user:pass@host",
      "https://example.com:8443/",
    ]
  ) {
    assert.ok(!hasUrlWithPassword(value), value);
  }
});

Deno.test("configuration warnings name the class and the name, never the value", async () => {
  const bucket = new MemoryBucket();
  const secret = "hunter2-value-never-printed";
  const outcome = await deploy(bucket, SHOP, {
    actors: { counter: COUNTER_WASM, hub: CHAT_WASM },
    config: {
      hub: {
        ADMIN_TOKEN: secret,
        DATABASE_URL: `postgres://app:${secret}@db/shop`,
        GREETING: "hello",
      },
    },
  });
  assert.deepEqual(outcome.warnings, [
    "class hub: configuration ADMIN_TOKEN looks like a secret; --config is stored in the clear " +
    "in the bucket; keep secrets in serve --env files on each node",
    "class hub: configuration DATABASE_URL is a URL with a password; --config is stored in the " +
    "clear in the bucket; keep secrets in serve --env files on each node",
  ]);
  const printed = [...outcome.warnings, ...outcome.changes].join("\n");
  assert.ok(!printed.includes(secret), printed);
  assert.ok(printed.includes("class hub: configuration ADMIN_TOKEN, DATABASE_URL, GREETING added"));
  // Changing a value says its name changed, never either value.
  const next = await deploy(bucket, SHOP, {
    config: { hub: { ADMIN_TOKEN: `${secret}-2`, DATABASE_URL: "x", GREETING: "hello" } },
  });
  assert.ok(next.changes.includes("class hub: configuration ADMIN_TOKEN, DATABASE_URL changed"));
  assert.ok(!next.changes.join("\n").includes(secret));
  // Only configuration given in this deploy is warned about, not the kept one.
  const code = await deploy(bucket, SHOP, { actors: { counter: KV_WASM, hub: CHAT_WASM } });
  assert.deepEqual(code.warnings, []);
  assert.deepEqual(configWarnings({}), []);
});

Deno.test("a rename that leaves a class open is warned about", async () => {
  const bucket = new MemoryBucket();
  await deploy(bucket, SHOP, {
    actors: { counter: COUNTER_WASM, chat: CHAT_WASM },
    access: { chat: { kind: "existing" } },
  });
  const renamed = await deploy(bucket, SHOP, {
    actors: { counter: COUNTER_WASM, room: CHAT_WASM },
  });
  assert.deepEqual(renamed.warnings, [
    "class chat (existing) removed with a rule, and the added class room has none (open to every " +
    "client): if this is a rename, deploy again with --access room=RULE",
  ]);
  // The added class given a rule in the same deploy: no warning.
  const bucket2 = new MemoryBucket();
  await deploy(bucket2, SHOP, {
    actors: { chat: CHAT_WASM },
    access: { chat: { kind: "internal" } },
  });
  const ruled = await deploy(bucket2, SHOP, {
    actors: { room: CHAT_WASM },
    access: { room: { kind: "internal" } },
  });
  assert.deepEqual(ruled.warnings, []);
  // A removed class that was open: nothing to warn about.
  const open = await deploy(bucket, SHOP, { actors: { counter: COUNTER_WASM, hall: CHAT_WASM } });
  assert.deepEqual(open.warnings, []);
});
