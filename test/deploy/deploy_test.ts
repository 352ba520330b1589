import assert from "node:assert/strict";
import { MemoryBucket } from "../../src/bucket/memory.ts";
import { appComponentKey, appCurrentKey, appVersionKey } from "../../src/bucket/keys.ts";
import { ComponentError } from "../../src/actors/component.ts";
import { readCurrent, readVersion } from "../../src/deploy/app_objects.ts";
import { componentHash } from "../../src/deploy/manifest.ts";
import {
  deploy,
  DeployConflict,
  DeployRefusal,
  DeployUsageError,
} from "../../src/deploy/deploy.ts";
import { CHAT_WASM, COUNTER_WASM, KV_WASM, REMINDER_WASM } from "../../src/testing/node_process.ts";
import { HookedBucket, snapshot } from "./hooked_bucket.ts";
import { onEachStore } from "./stores.ts";

const SHOP = { tenant: "acme", app: "shop" };

async function hashOf(path: string): Promise<string> {
  return componentHash(await Deno.readFile(path));
}

async function scratchFile(name: string, text: string | Uint8Array): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "wk-deploy-file-" });
  const path = `${dir}/${name}`;
  if (typeof text === "string") await Deno.writeTextFile(path, text);
  else await Deno.writeFile(path, text);
  return path;
}

Deno.test("a first deploy writes the components, the version and current", async (t) => {
  await onEachStore(t, async (bucket) => {
    const outcome = await deploy(bucket, SHOP, {
      actors: { counter: COUNTER_WASM, chat: CHAT_WASM },
      access: { chat: { kind: "existing", creatable: "main" } },
      config: { chat: { GREETING: "hello" } },
      requires: { counter: ["ADMIN_TOKEN"] },
    }, { now: () => 1234 });
    assert.equal(outcome.kind, "deployed");
    const counter = await hashOf(COUNTER_WASM);
    const chat = await hashOf(CHAT_WASM);
    assert.deepEqual(outcome.uploaded.sort(), [counter, chat].sort());
    for (const [hash, path] of [[counter, COUNTER_WASM], [chat, CHAT_WASM]]) {
      const stored = await bucket.get(appComponentKey("acme", "shop", hash));
      assert.deepEqual(stored?.body, await Deno.readFile(path));
    }
    const read = await readCurrent(bucket, SHOP);
    assert.deepEqual(read?.current, { version: outcome.after.id, seq: 1 });
    const version = await readVersion(bucket, SHOP, outcome.after.id);
    // A first deploy draws the app's line of deploys.
    assert.match(version.line ?? "", /^[0-9a-f]{16}$/);
    assert.deepEqual(version, {
      app: "acme/shop",
      seq: 1,
      line: version.line,
      previous: null,
      rulesDeployed: true,
      writtenAt: 1234,
      classes: {
        chat: {
          component: chat,
          size: (await Deno.readFile(CHAT_WASM)).length,
          access: { kind: "existing", creatable: "main" },
          config: { GREETING: "hello" },
          requires: [],
        },
        counter: {
          component: counter,
          size: (await Deno.readFile(COUNTER_WASM)).length,
          access: { kind: "open" },
          config: {},
          requires: ["ADMIN_TOKEN"],
        },
      },
    });
    assert.deepEqual(outcome.changes, [
      `class chat: added (code ${chat.slice(0, 12)}, ${version.classes.chat.size} bytes)`,
      "class chat: rule open -> existing:main",
      "class chat: configuration GREETING added",
      `class counter: added (code ${counter.slice(0, 12)}, ${version.classes.counter.size} bytes)`,
      "class counter: required names ADMIN_TOKEN (were none)",
      "access rules and configuration now come from the deployed version: nodes following the app refuse --access from now on",
    ]);
  });
});

Deno.test("required names alone do not set rulesDeployed (ADR 0013)", async () => {
  const bucket = new MemoryBucket();
  const first = await deploy(bucket, SHOP, {
    actors: { counter: COUNTER_WASM },
    requires: { counter: ["TOKEN"] },
  });
  assert.equal(first.after.version.rulesDeployed, false);
  const second = await deploy(bucket, SHOP, { access: { counter: { kind: "open" } } });
  // `--access counter=open` changes no rule, but it is a rule deployed.
  assert.equal(second.kind, "deployed");
  assert.equal(second.after.version.rulesDeployed, true);
  const third = await deploy(bucket, SHOP, { requires: { counter: [] } });
  assert.equal(third.after.version.rulesDeployed, true, "kept once set");
});

Deno.test("an unchanged class is never uploaded again", async (t) => {
  await onEachStore(t, async (inner) => {
    const bucket = new HookedBucket(inner);
    await deploy(bucket, SHOP, { actors: { counter: COUNTER_WASM, kv: KV_WASM } });
    bucket.calls.length = 0;
    // Same counter, new kv code under the class name kv.
    const second = await deploy(bucket, SHOP, { actors: { counter: COUNTER_WASM, kv: CHAT_WASM } });
    const chat = await hashOf(CHAT_WASM);
    assert.deepEqual(second.uploaded, [chat]);
    const componentPuts = bucket.puts().filter((key) => key.includes("/components/"));
    assert.deepEqual(componentPuts, [appComponentKey("acme", "shop", chat)]);
    // Without --actor nothing is uploaded at all: the classes are kept.
    bucket.calls.length = 0;
    const third = await deploy(bucket, SHOP, { config: { kv: { MODE: "fast" } } });
    assert.equal(third.kind, "deployed");
    assert.deepEqual(bucket.puts().filter((key) => key.includes("/components/")), []);
    assert.equal(third.after.version.classes.counter.component, await hashOf(COUNTER_WASM));
    assert.equal(third.after.version.classes.kv.component, chat);
  });
});

Deno.test("a deploy changes what it names and keeps the rest", async (t) => {
  await onEachStore(t, async (bucket) => {
    await deploy(bucket, SHOP, {
      actors: { counter: COUNTER_WASM, chat: CHAT_WASM },
      access: { counter: { kind: "existing" }, chat: { kind: "internal" } },
      config: { counter: { A: "1", B: "2" }, chat: { C: "3" } },
      requires: { counter: ["A"], chat: ["C"] },
    });
    // New code for counter only: its rule, configuration and names stay, and chat's too.
    const code = await deploy(bucket, SHOP, {
      actors: { counter: KV_WASM, chat: CHAT_WASM },
    });
    const kept = code.after.version.classes;
    assert.deepEqual(kept.counter.access, { kind: "existing" });
    assert.deepEqual(kept.counter.config, { A: "1", B: "2" });
    assert.deepEqual(kept.counter.requires, ["A"]);
    assert.deepEqual(kept.chat.access, { kind: "internal" });
    assert.equal(kept.counter.component, await hashOf(KV_WASM));
    assert.deepEqual(code.changes, [
      `class counter: code changed ${(await hashOf(COUNTER_WASM)).slice(0, 12)} -> ${
        (await hashOf(KV_WASM)).slice(0, 12)
      }`,
    ]);
    // The removal forms: open removes a rule, an empty config and empty names remove them.
    const removed = await deploy(bucket, SHOP, {
      access: { counter: { kind: "open" } },
      config: { counter: {} },
      requires: { counter: [] },
    });
    const after = removed.after.version.classes;
    assert.deepEqual(after.counter, {
      ...kept.counter,
      access: { kind: "open" },
      config: {},
      requires: [],
    });
    assert.deepEqual(after.chat, kept.chat, "a class not named keeps everything");
    assert.deepEqual(removed.changes, [
      "class counter: rule existing -> open",
      "class counter: configuration A, B removed",
      "class counter: required names none (were A)",
    ]);
    // A configuration given replaces the class's whole configuration; names are reported, not values.
    const config = await deploy(bucket, SHOP, { config: { chat: { C: "4", D: "5" } } });
    assert.deepEqual(config.after.version.classes.chat.config, { C: "4", D: "5" });
    assert.deepEqual(config.changes, ["class chat: configuration D added; C changed"]);
    // --actor without a current class removes it.
    const dropped = await deploy(bucket, SHOP, { actors: { counter: KV_WASM } });
    assert.deepEqual(Object.keys(dropped.after.version.classes), ["counter"]);
    assert.match(dropped.changes[0], /^class chat: removed \(was code [0-9a-f]{12}\)$/);
  });
});

Deno.test("a deploy that changes nothing writes nothing", async () => {
  const bucket = new HookedBucket(new MemoryBucket());
  const first = await deploy(bucket, SHOP, {
    actors: { counter: COUNTER_WASM },
    access: { counter: { kind: "existing" } },
  });
  const before = await snapshot(bucket.inner);
  bucket.calls.length = 0;
  for (
    const request of [
      {},
      { actors: { counter: COUNTER_WASM } },
      { access: { counter: { kind: "existing" as const } } },
      { requires: { counter: [] } },
    ]
  ) {
    const outcome = await deploy(bucket, SHOP, request);
    assert.equal(outcome.kind, "unchanged");
    assert.equal(outcome.after.id, first.after.id);
  }
  assert.deepEqual(bucket.puts(), []);
  assert.deepEqual(bucket.calls.filter((c) => c.method === "delete"), []);
  assert.deepEqual(await snapshot(bucket.inner), before);
});

Deno.test("a broken component is refused and the bucket is unchanged", async (t) => {
  const text = await scratchFile("x.wasm", "not a component\n");
  const counter = await Deno.readFile(COUNTER_WASM);
  const truncated = await scratchFile("truncated.wasm", counter.subarray(0, counter.length / 2));
  await onEachStore(t, async (bucket) => {
    // On an empty bucket and on one with a current version.
    for (const setup of [false, true]) {
      if (setup) await deploy(bucket, SHOP, { actors: { counter: COUNTER_WASM } });
      const before = await snapshot(bucket);
      for (const broken of [text, truncated, "/nonexistent/y.wasm"]) {
        await assert.rejects(
          deploy(bucket, SHOP, { actors: { counter: COUNTER_WASM, kv: broken } }),
          (error: Error) => {
            assert.ok(error instanceof ComponentError, String(error));
            assert.ok(error.message.startsWith(`${broken}: `), error.message);
            return true;
          },
        );
        assert.deepEqual(await snapshot(bucket), before, `bucket unchanged after ${broken}`);
      }
    }
  });
  await Deno.remove(text);
  await Deno.remove(truncated);
});

Deno.test("two deploys at once: exactly one wins, current is the winner's", async (t) => {
  for (const first of [true, false]) {
    await t.step(first ? "first deploy" : "later deploy", async () => {
      const bucket = new HookedBucket(new MemoryBucket());
      if (!first) await deploy(bucket, SHOP, { actors: { counter: COUNTER_WASM } });
      // Hold both deploys' reads of current until both made them: each then writes from the same current.
      const currentKey = appCurrentKey("acme", "shop");
      let arrived = 0;
      let release!: () => void;
      const bothRead = new Promise<void>((resolve) => release = resolve);
      bucket.before = async (call) => {
        if (call.method !== "get" || call.key !== currentKey || arrived >= 2) return;
        if (++arrived === 2) release();
        await bothRead;
      };
      const results = await Promise.allSettled([
        deploy(bucket, SHOP, { actors: { counter: KV_WASM } }),
        deploy(bucket, SHOP, { actors: { counter: CHAT_WASM } }),
      ]);
      const won = results.filter((r) => r.status === "fulfilled");
      const lost = results.filter((r) => r.status === "rejected");
      assert.equal(won.length, 1);
      assert.equal(lost.length, 1);
      const winner = (won[0] as PromiseFulfilledResult<Awaited<ReturnType<typeof deploy>>>).value;
      const error = (lost[0] as PromiseRejectedResult).reason;
      assert.ok(error instanceof DeployConflict, String(error));
      assert.equal(
        error.message,
        `another deploy made version ${winner.after.id} (seq ${winner.after.version.seq}) ` +
          "current while this one was written; run deploy again",
      );
      const read = await readCurrent(bucket, SHOP);
      assert.deepEqual(read?.current, { version: winner.after.id, seq: first ? 1 : 2 });
    });
  }
});

Deno.test("one app per tenant per prefix: a first deploy beside another app is refused", async (t) => {
  await onEachStore(t, async (bucket) => {
    await deploy(bucket, { tenant: "acme", app: "legacy" }, { actors: { counter: COUNTER_WASM } });
    // Another tenant's apps do not count.
    await deploy(bucket, { tenant: "globex", app: "shop" }, { actors: { counter: COUNTER_WASM } });
    const before = await snapshot(bucket);
    await assert.rejects(
      deploy(bucket, SHOP, { actors: { counter: COUNTER_WASM } }),
      (error: Error) => {
        assert.ok(error instanceof DeployRefusal);
        assert.match(error.message, /^app acme\/legacy of tenant acme is deployed on this prefix/);
        assert.match(error.message, /another prefix \(s3:\/\/BUCKET\/OTHER-PREFIX\)/);
        assert.match(error.message, /another tenant \(--app OTHER\/shop\)/);
        return true;
      },
    );
    assert.deepEqual(await snapshot(bucket), before);
    // With its current deleted, the tenant is free (its versions stay).
    await bucket.delete(appCurrentKey("acme", "legacy"));
    const outcome = await deploy(bucket, SHOP, { actors: { counter: COUNTER_WASM } });
    assert.equal(outcome.after.version.seq, 1);
  });
});

Deno.test("legacy: two apps of a tenant are warned about, a further one refused", async () => {
  const bucket = new MemoryBucket();
  // Two apps deployed before the check: written by hand as an older deploy would have.
  await deploy(bucket, { tenant: "acme", app: "a" }, { actors: { counter: COUNTER_WASM } });
  const b = await deploy(bucket, { tenant: "acme", app: "b-old" }, {
    actors: { counter: COUNTER_WASM },
  }).catch((e) => e);
  assert.ok(b instanceof DeployRefusal);
  const a = await readCurrent(bucket, { tenant: "acme", app: "a" });
  const aBytes = await bucket.get(appVersionKey("acme", "a", a!.current.version));
  await bucket.put(appVersionKey("acme", "b", a!.current.version), aBytes!.body);
  await bucket.put(
    appCurrentKey("acme", "b"),
    (await bucket.get(appCurrentKey("acme", "a")))!.body,
  );
  const again = await deploy(bucket, { tenant: "acme", app: "a" }, {
    actors: { counter: KV_WASM },
  });
  assert.equal(again.warnings.length, 1);
  assert.match(
    again.warnings[0],
    /^tenant acme has other apps deployed on this prefix \(acme\/b\)/,
  );
  await assert.rejects(
    deploy(bucket, { tenant: "acme", app: "c" }, { actors: { counter: COUNTER_WASM } }),
    /apps acme\/a, acme\/b of tenant acme are deployed on this prefix/,
  );
});

Deno.test("a first deploy whose listing fails is refused", async () => {
  const bucket = new HookedBucket(new MemoryBucket());
  bucket.before = (call) => {
    if (call.method === "list") throw new Error("AccessDenied: s3:ListBucket");
  };
  await assert.rejects(
    deploy(bucket, SHOP, { actors: { counter: COUNTER_WASM } }),
    (error: Error) => {
      assert.ok(error instanceof DeployRefusal);
      assert.equal(
        error.message,
        "cannot list apps/acme/ to check that no other app of tenant acme is deployed on this " +
          "prefix (a first deploy needs list access there): AccessDenied: s3:ListBucket",
      );
      return true;
    },
  );
  assert.deepEqual(bucket.puts(), []);
});

Deno.test("names: a new app's must match, a deployed one keeps its own", async () => {
  const bucket = new MemoryBucket();
  for (
    const name of [{ tenant: "acme", app: "9shop" }, { tenant: "Acme", app: "shop" }, {
      tenant: "acme",
      app: "my_shop",
    }]
  ) {
    await assert.rejects(
      deploy(bucket, name, { actors: { counter: COUNTER_WASM } }),
      (error: Error) => {
        assert.ok(error instanceof DeployUsageError);
        // The one rule and its one message (issue 28): serve and deploy say the same.
        assert.match(
          error.message,
          /must match \[a-z\]\[a-z0-9-\]\{0,63\} \(a lower-case letter, then lower-case letters, digits or '-'\)/,
        );
        return true;
      },
    );
  }
  assert.deepEqual(await snapshot(bucket), new Map());
  // An app deployed earlier (by an older deploy) under a name that is no longer accepted.
  const legacy = { tenant: "acme", app: "my_shop" };
  const made = await deploy(new MemoryBucket(), { tenant: "acme", app: "x" }, {
    actors: { counter: COUNTER_WASM },
  });
  const { encodeVersion, encodeCurrent } = await import("../../src/deploy/manifest.ts");
  const { id, bytes } = await encodeVersion({ ...made.after.version, app: "acme/my_shop" });
  await bucket.put(
    appComponentKey("acme", "my_shop", made.after.version.classes.counter.component),
    await Deno.readFile(COUNTER_WASM),
  );
  await bucket.put(appVersionKey("acme", "my_shop", id), bytes);
  await bucket.put(appCurrentKey("acme", "my_shop"), encodeCurrent({ version: id, seq: 1 }));
  const outcome = await deploy(bucket, legacy, { actors: { counter: KV_WASM } });
  assert.equal(outcome.after.version.seq, 2);
});

Deno.test("usage errors: classes that are not there, bad names, a first deploy without --actor", async () => {
  const bucket = new MemoryBucket();
  await assert.rejects(
    deploy(bucket, SHOP, { access: { counter: { kind: "internal" } } }),
    /the first deploy of acme\/shop needs at least one --actor CLASS=PATH/,
  );
  await deploy(bucket, SHOP, { actors: { counter: COUNTER_WASM, chat: CHAT_WASM } });
  const before = await snapshot(bucket);
  const cases: [Parameters<typeof deploy>[2], RegExp][] = [
    [
      { access: { hub: { kind: "internal" } } },
      /^--access hub=\.\.\.: no class 'hub' in the current version \(chat, counter\) and no --actor gives it$/,
    ],
    [{ config: { hub: {} } }, /^--config hub=\.\.\.: no class 'hub'/],
    [{ requires: { hub: ["A"] } }, /^--requires hub=\.\.\.: no class 'hub'/],
    [
      { actors: { counter: COUNTER_WASM }, access: { chat: { kind: "internal" } } },
      /^--access chat=\.\.\.: class 'chat' is not among this deploy's --actor classes, so the deploy removes it$/,
    ],
    [{ actors: { Counter: COUNTER_WASM } }, /^--actor Counter=\.\.\.: a class name is lower-case/],
    [{ requires: { counter: ["1BAD"] } }, /^--requires counter=1BAD: '1BAD' is not a name/],
    [{ requires: { counter: ["A B"] } }, /'A B' is not a name/],
  ];
  for (const [request, message] of cases) {
    await assert.rejects(deploy(bucket, SHOP, request), (error: Error) => {
      assert.ok(error instanceof DeployUsageError, String(error));
      assert.match(error.message, message);
      return true;
    });
  }
  assert.deepEqual(await snapshot(bucket), before);
  // A class --actor adds may be given its rule in the same deploy.
  const added = await deploy(bucket, SHOP, {
    actors: { counter: COUNTER_WASM, chat: CHAT_WASM, reminder: REMINDER_WASM },
    access: { reminder: { kind: "internal" } },
  });
  assert.deepEqual(added.after.version.classes.reminder.access, { kind: "internal" });
});

Deno.test("a current version that cannot be read refuses the deploy", async () => {
  const bucket = new MemoryBucket();
  const first = await deploy(bucket, SHOP, { actors: { counter: COUNTER_WASM } });
  await bucket.put(appVersionKey("acme", "shop", first.after.id), new TextEncoder().encode("{"));
  await assert.rejects(
    deploy(bucket, SHOP, { actors: { counter: KV_WASM } }),
    (error: Error) =>
      error instanceof DeployRefusal &&
      error.message.startsWith(`the current version ${first.after.id} (seq 1) cannot be read`),
  );
});
