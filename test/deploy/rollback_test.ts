import assert from "node:assert/strict";
import { MemoryBucket } from "../../src/bucket/memory.ts";
import { appComponentKey } from "../../src/bucket/keys.ts";
import { readCurrent, readVersion } from "../../src/deploy/app_objects.ts";
import { deploy, DeployRefusal, rollback } from "../../src/deploy/deploy.ts";
import { CHAT_WASM, COUNTER_WASM, KV_WASM } from "../../src/testing/node_process.ts";
import { snapshot } from "./hooked_bucket.ts";
import { onEachStore } from "./stores.ts";

const SHOP = { tenant: "acme", app: "shop" };

Deno.test("a rollback makes the previous version current again, as a new version", async (t) => {
  await onEachStore(t, async (bucket) => {
    const v1 = await deploy(bucket, SHOP, {
      actors: { counter: COUNTER_WASM },
      access: { counter: { kind: "internal" } },
      config: { counter: { GREETING: "one" } },
      requires: { counter: ["GREETING"] },
    });
    const v2 = await deploy(bucket, SHOP, {
      actors: { counter: KV_WASM, chat: CHAT_WASM },
      config: { counter: { GREETING: "two" } },
      requires: { counter: [] },
    });
    const v3 = await deploy(bucket, SHOP, { actors: { counter: CHAT_WASM } });

    // It brings chat back, which v3 does not serve: a reopening.
    const back = await rollback(bucket, SHOP, { now: () => 99, allowReopen: true });
    assert.equal(back.kind, "rolled-back");
    assert.equal(back.restored?.id, v2.after.id);
    assert.deepEqual(await readVersion(bucket, SHOP, back.after.id), {
      app: "acme/shop",
      seq: 4,
      // Every version of the app keeps its first one's line.
      line: v1.after.version.line,
      previous: v1.after.id,
      rolledBackFrom: v3.after.id,
      rulesDeployed: true,
      writtenAt: 99,
      classes: v2.after.version.classes,
    });
    assert.deepEqual((await readCurrent(bucket, SHOP))?.current, {
      version: back.after.id,
      seq: 4,
    });
    assert.ok(
      back.changes.some((line) => /^class chat: added/.test(line)),
      back.changes.join("\n"),
    );

    // A second rollback steps further back: to v1, whose previous is none.
    const again = await rollback(bucket, SHOP);
    assert.equal(again.restored?.id, v1.after.id);
    assert.deepEqual(again.after.version.classes, v1.after.version.classes);
    assert.equal(again.after.version.seq, 5);
    assert.equal(again.after.version.previous, null);
    assert.equal(again.after.version.rolledBackFrom, back.after.id);
    assert.deepEqual(again.after.version.classes.counter.requires, ["GREETING"]);
    assert.deepEqual(again.after.version.classes.counter.config, { GREETING: "one" });

    // Nothing before that: refused, bucket unchanged.
    const before = await snapshot(bucket);
    await assert.rejects(rollback(bucket, SHOP), (error: Error) => {
      assert.ok(error instanceof DeployRefusal);
      assert.equal(
        error.message,
        `no version before the current one ${again.after.id} (seq 5) to roll back to`,
      );
      return true;
    });
    assert.deepEqual(await snapshot(bucket), before);
  });
});

Deno.test("a rollback with nothing deployed, or to a first version, is refused", async () => {
  const bucket = new MemoryBucket();
  await assert.rejects(rollback(bucket, SHOP), /acme\/shop has no current version to roll back/);
  const v1 = await deploy(bucket, SHOP, { actors: { counter: COUNTER_WASM } });
  await assert.rejects(
    rollback(bucket, SHOP),
    new RegExp(`no version before the current one ${v1.after.id} \\(seq 1\\)`),
  );
});

Deno.test("a rollback that makes a class more open is refused without --allow-reopen", async () => {
  const bucket = new MemoryBucket();
  const v1 = await deploy(bucket, SHOP, {
    actors: { counter: COUNTER_WASM, chat: CHAT_WASM },
    access: { chat: { kind: "existing", creatable: "main" } },
  });
  // v2 closes counter and narrows chat.
  await deploy(bucket, SHOP, {
    access: { counter: { kind: "existing" }, chat: { kind: "existing" } },
  });
  const before = await snapshot(bucket);
  await assert.rejects(rollback(bucket, SHOP), (error: Error) => {
    assert.ok(error instanceof DeployRefusal);
    assert.equal(
      error.message,
      `rolling back to ${v1.after.id} would make class chat more open: its rule is existing ` +
        `now and existing:main in ${v1.after.id}; give --allow-reopen to roll back anyway`,
    );
    return true;
  });
  assert.deepEqual(await snapshot(bucket), before);
  const back = await rollback(bucket, SHOP, { allowReopen: true });
  assert.deepEqual(back.after.version.classes.counter.access, { kind: "open" });
  assert.deepEqual(back.after.version.classes.chat.access, { kind: "existing", creatable: "main" });
  assert.ok(back.changes.includes("class counter: rule existing -> open"), back.changes.join("\n"));
});

Deno.test("a rollback that brings back a class the current version does not serve is a reopening", async () => {
  const bucket = new MemoryBucket();
  const v1 = await deploy(bucket, SHOP, { actors: { counter: COUNTER_WASM, chat: CHAT_WASM } });
  // v2 removes chat (a class not given with --actor is removed).
  await deploy(bucket, SHOP, { actors: { counter: COUNTER_WASM } });
  const before = await snapshot(bucket);
  await assert.rejects(rollback(bucket, SHOP), (error: Error) => {
    assert.ok(error instanceof DeployRefusal);
    assert.equal(
      error.message,
      `rolling back to ${v1.after.id} would make class chat more open: it is not served now ` +
        "and would be, with the rule open; give --allow-reopen to roll back anyway",
    );
    return true;
  });
  assert.deepEqual(await snapshot(bucket), before);
  const back = await rollback(bucket, SHOP, { allowReopen: true });
  assert.deepEqual(Object.keys(back.after.version.classes).sort(), ["chat", "counter"]);
});

Deno.test("a rollback that brings back a class as internal needs no --allow-reopen", async () => {
  const bucket = new MemoryBucket();
  await deploy(bucket, SHOP, {
    actors: { counter: COUNTER_WASM, chat: CHAT_WASM },
    access: { chat: { kind: "internal" } },
  });
  await deploy(bucket, SHOP, { actors: { counter: COUNTER_WASM } });
  const back = await rollback(bucket, SHOP);
  assert.deepEqual(back.after.version.classes.chat.access, { kind: "internal" });
});

Deno.test("a rollback to a more closed rule needs no --allow-reopen", async () => {
  const bucket = new MemoryBucket();
  await deploy(bucket, SHOP, {
    actors: { counter: COUNTER_WASM },
    access: { counter: { kind: "internal" } },
  });
  await deploy(bucket, SHOP, { access: { counter: { kind: "open" } } });
  const back = await rollback(bucket, SHOP);
  assert.deepEqual(back.after.version.classes.counter.access, { kind: "internal" });
});

Deno.test("a rollback to a version whose component is gone is refused", async () => {
  const bucket = new MemoryBucket();
  const v1 = await deploy(bucket, SHOP, { actors: { counter: COUNTER_WASM } });
  await deploy(bucket, SHOP, { actors: { counter: KV_WASM } });
  const component = v1.after.version.classes.counter.component;
  await bucket.delete(appComponentKey("acme", "shop", component));
  await assert.rejects(
    rollback(bucket, SHOP),
    new RegExp(`names the component ${component} of class counter, which is not in the bucket`),
  );
});
