/**
 * Deploys through real node processes (issue 20): nodes following an app
 * (`serve --app`) switch to each version within a poll, keep every actor's
 * data, run on-init once per version, never run an actor on older code
 * than it ran (a lagging node refuses it, then serves it once caught up),
 * and take their access rules, configuration and required names from the
 * version. On moto and the file bucket.
 */

import assert from "node:assert/strict";
import { request, scratchDir, startClusterNode } from "../../../src/testing/cluster.ts";
import {
  GREETER_WASM,
  metric,
  type NodeProcess,
  runWasmkeep,
  TESTBED_V2_WASM,
  TESTBED_WASM,
} from "../../../src/testing/node_process.ts";
import { until } from "../../helpers/until.ts";
import { openSocket } from "../../helpers/websocket_client.ts";
import { openBucket } from "../../../src/bucket/open.ts";
import { appComponentKey, appCurrentKey, appVersionKey } from "../../../src/bucket/keys.ts";
import { readCurrent, readVersion } from "../../../src/deploy/app_objects.ts";
import { componentHash, encodeCurrent, encodeVersion } from "../../../src/deploy/manifest.ts";
import { APP_POLL_MS } from "../../../src/limits.ts";
import { APP, callVia, deploy, get, servesVersion, upgradeHead } from "./deploy_helpers.ts";

Deno.test("deploys: configuration from the version with --env over it by name (never a value in a log), new values without on-init, and required names answered 503 until set, logged once each time they go missing", async () => {
  const dir = await scratchDir("wk-deploy-config-");
  const url = `file://${dir}/bucket`;
  const deployed = "deployed-7f3a9c";
  const local = "env-only-91c2e4";
  await Deno.writeTextFile(`${dir}/v1.env`, `A=${deployed}\nB=b1\n`);
  await Deno.writeTextFile(`${dir}/v2.env`, `A=${deployed}\nB=b2\nNEEDED=\n`);
  await Deno.writeTextFile(`${dir}/node.env`, `A=${local}\n`);
  await Deno.writeTextFile(`${dir}/v3.env`, `A=${deployed}\nB=b3\n`);
  /** The lines of `node`'s log that name testbed's missing required values. */
  const missingLines = (node: NodeProcess) =>
    node.logs().split("\n").filter((line) =>
      /a class is missing required values.*class=testbed/.test(line)
    ).length;
  try {
    await deploy(
      url,
      {},
      "--actor",
      `testbed=${TESTBED_WASM}`,
      "--config",
      `testbed=${dir}/v1.env`,
    );
    const a = await startClusterNode("a", dir, url, APP);
    const b = await startClusterNode("b", dir, url, APP, { extra: ["--env", `${dir}/node.env`] });
    try {
      assert.deepEqual(
        [(await get(a, "p", "/config?A")).body, (await get(b, "q", "/config?A")).body],
        [deployed, local],
      );
      assert.match(b.logs(), /an --env value wins over the deployed configuration.*name=A/);
      // Rules alone (seq 2) keep the actor's instance: its count in memory goes on.
      const before = Number((await get(a, "p", "/instance")).body);
      await deploy(url, {}, "--access", "testbed=existing");
      await until("a applies seq 2", () => /app version applied.*seq=2/.test(a.logs()));
      assert.equal(Number((await get(a, "p", "/instance")).body), before + 1);
      // Required names: 503 on every node until a value sets them.
      await deploy(url, {}, "--requires", "testbed=NEEDED");
      await until("p is refused", async () => (await get(a, "p", "/rows")).status === 503);
      await until("q is refused", async () => (await get(b, "q", "/rows")).status === 503);
      const refused = await get(b, "q", "/rows");
      assert.equal(refused.status, 503);
      assert.equal(refused.retryAfter, "1");
      assert.match(refused.body, /missing required values \(NEEDED\)/);
      assert.match(a.logs(), /a class is missing required values.*class=testbed.*missing=NEEDED/);
      // Logged once while they stay missing, a version later too.
      await deploy(url, {}, "--access", "testbed=existing:p");
      await until(
        "a applies seq 4",
        () => /app version applied.*seq=4/.test(a.logs()),
      );
      assert.equal(missingLines(a), 1);
      // The empty string counts as set; B's new value drops the instance, on-init not run again.
      await deploy(url, {}, "--config", `testbed=${dir}/v2.env`);
      await until("p runs again", async () => (await get(a, "p", "/rows")).status === 200);
      // A new value made a new instance: its count in memory started again
      // with that /rows (the requests refused meanwhile never reached it).
      assert.equal((await get(a, "p", "/instance")).body, "2");
      assert.deepEqual(
        [(await get(a, "p", "/config?B")).body, (await get(a, "p", "/config?NEEDED")).body],
        ["b2", ""],
      );
      assert.equal((await get(a, "p", "/inits")).body, "1");
      // Missing again: logged again.
      await deploy(url, {}, "--config", `testbed=${dir}/v3.env`);
      await until("p is refused again", async () => (await get(a, "p", "/rows")).status === 503);
      assert.equal(missingLines(a), 2);
      for (const node of [a, b]) {
        assert.ok(!node.logs().includes(deployed), "a deployed value in a log");
        assert.ok(!node.logs().includes(local), "an --env value in a log");
      }
    } finally {
      await a.stop();
      await b.stop();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("deploys: access rules from the version, from outside and through actors.call, and the --access migration (ADR 0013)", async () => {
  const dir = await scratchDir("wk-deploy-access-");
  const url = `file://${dir}/bucket`;
  try {
    await deploy(url, {}, "--actor", `caller=${TESTBED_WASM}`, "--actor", `target=${TESTBED_WASM}`);
    // Step 1: a node with --access, the app has no rules yet: its flags rule.
    let a = await startClusterNode("a", dir, url, [...APP, "--access", "target=internal"]);
    try {
      assert.equal((await get(a, "old", "/rows", "target")).status, 403);
      assert.equal((await callVia(a, "target/old/insert?one")).status, 200);
      // Step 2: deploy the rules; the node switches to them and says --access is ignored.
      await deploy(url, {}, "--access", "target=existing");
      await until(
        "target is open to existing actors",
        async () => (await get(a, "old", "/rows", "target")).status === 200,
      );
      assert.match(a.logs(), /--access is now ignored/);
      const missing = await get(a, "never", "/rows", "target");
      assert.equal(missing.status, 404);
      assert.match(
        missing.body,
        /no actor 'never' of class 'target': the class serves only actors that exist/,
      );
      // A call may create one; from then on it exists.
      assert.equal((await callVia(a, "target/made/rows")).status, 200);
      assert.equal((await get(a, "made", "/rows", "target")).status, 200);

      await deploy(url, {}, "--access", "target=existing:main");
      await until(
        "main may be created",
        async () => (await get(a, "main", "/rows", "target")).status === 200,
      );
      assert.equal((await get(a, "other", "/rows", "target")).status, 404);
      // A call reaches any actor of it, and may create one of another name.
      assert.equal((await callVia(a, "target/other/rows")).status, 200);
      assert.equal((await get(a, "other", "/rows", "target")).status, 200);

      await deploy(url, {}, "--access", "target=internal");
      await until(
        "target is internal",
        async () => (await get(a, "old", "/rows", "target")).status === 403,
      );
      assert.equal((await callVia(a, "target/old/rows")).body, "1");
    } finally {
      await a.stop();
    }
    // Step 3: --access is refused from now on, naming the deploy command.
    const refused = await runWasmkeep([
      "serve",
      ...APP,
      "--access",
      "target=open",
      "--data-dir",
      `${dir}/a`,
      "--bucket",
      url,
      "--node-id",
      "a",
      "--cluster-plaintext",
      "accept",
    ]);
    assert.equal(refused.code, 1);
    assert.match(
      refused.stderr,
      /--access is refused: the app acme\/shop deploys its own access rules .* wasmkeep deploy --app acme\/shop --bucket .* --access target=open/,
    );
    a = await startClusterNode("a", dir, url, APP);
    try {
      assert.equal((await get(a, "old", "/rows", "target")).status, 403);
    } finally {
      await a.stop();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("deploys: a node that never got rules logs that every class is open; one that cannot apply a version (a component that does not compile, a manifest it cannot read, a current below its seq) keeps its own and is not ready; another app of the tenant cannot start beside it, and a legacy one is warned about by name", async () => {
  const dir = await scratchDir("wk-deploy-broken-");
  const url = `file://${dir}/bucket`;
  const shop = { tenant: "acme", app: "shop" };
  try {
    await deploy(url, {}, "--actor", `testbed=${TESTBED_WASM}`);
    const a = await startClusterNode("a", dir, url, APP);
    try {
      assert.match(a.logs(), /the app never deployed access rules .* every class is open/);
      assert.equal((await get(a, "p", "/version")).body, "1");
      // A version whose component does not compile anywhere (written by hand:
      // deploy would refuse it).
      const bucket = openBucket(url);
      const read = (await readCurrent(bucket, shop))!;
      const version = await readVersion(bucket, shop, read.current.version);
      const junk = new TextEncoder().encode("not a component");
      const hash = await componentHash(junk);
      await bucket.put(appComponentKey("acme", "shop", hash), junk);
      const broken = await encodeVersion({
        ...version,
        seq: 2,
        previous: read.current.version,
        classes: { testbed: { ...version.classes.testbed, component: hash, size: junk.length } },
      });
      await bucket.put(appVersionKey("acme", "shop", broken.id), broken.bytes);
      await bucket.put(
        appCurrentKey("acme", "shop"),
        encodeCurrent({ version: broken.id, seq: 2 }),
        { ifMatch: read.etag },
      );
      await until("a is not ready", async () => {
        const ready = await request(`${a.url}/_wasmkeep/ready`);
        return ready.status === 503 && /cannot be applied/.test(ready.body);
      }, APP_POLL_MS + 2_000);
      assert.equal((await get(a, "p", "/version")).body, "1", "the previous version kept");
      // A good deploy after it makes the node ready again.
      await deploy(url, {}, "--actor", `testbed=${TESTBED_V2_WASM}`);
      await servesVersion(a, "p", "2", APP_POLL_MS + 2_000);
      assert.equal((await request(`${a.url}/_wasmkeep/ready`)).status, 200);
      const notReady = (pattern: RegExp) =>
        until(`a is not ready (${pattern.source})`, async () => {
          const ready = await request(`${a.url}/_wasmkeep/ready`);
          return ready.status === 503 && pattern.test(ready.body);
        }, APP_POLL_MS + 2_000);
      // A version whose manifest cannot be read.
      const good = (await readCurrent(bucket, shop))!;
      const unreadable = "00000000000000aa";
      await bucket.put(appVersionKey("acme", "shop", unreadable), new TextEncoder().encode("{"));
      await bucket.put(
        appCurrentKey("acme", "shop"),
        encodeCurrent({ version: unreadable, seq: good.current.seq + 1 }),
        { ifMatch: good.etag },
      );
      await notReady(/cannot be applied: .*not JSON/);
      assert.equal((await get(a, "p", "/version")).body, "2", "the applied version kept");
      // A current below the seq applied (a bucket restored from a backup).
      const now = (await readCurrent(bucket, shop))!;
      await bucket.put(
        appCurrentKey("acme", "shop"),
        encodeCurrent({ version: read.current.version, seq: read.current.seq }),
        { ifMatch: now.etag },
      );
      await notReady(/has seq 1, not above the seq 3 this node runs/);
      assert.equal((await get(a, "p", "/version")).body, "2", "the applied version kept");

      // Another app of the tenant deployed before the one-app check: a node warns, naming it.
      await bucket.put(
        appCurrentKey("acme", "legacy"),
        encodeCurrent({ version: read.current.version, seq: 1 }),
      );
      const c = await startClusterNode("c", dir, url, APP);
      try {
        assert.match(
          c.logs(),
          /another app of this tenant is deployed on this prefix.*app=acme\/shop.*other=acme\/legacy/,
        );
      } finally {
        await c.stop();
      }
      await bucket.delete(appCurrentKey("acme", "legacy"));
      await bucket.close();

      const other = await runWasmkeep([
        "serve",
        "--app",
        "acme/other",
        "--data-dir",
        `${dir}/b`,
        "--bucket",
        url,
        "--node-id",
        "b",
        "--cluster-plaintext",
        "accept",
        "--lease-ttl-secs",
        "3",
      ]);
      assert.equal(other.code, 1);
      assert.match(
        other.stderr,
        /node a serves acme\/shop, another app of tenant acme on this prefix: one app per tenant per prefix/,
      );
    } finally {
      await a.stop();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("deploys: examples/greeter answers 503 while GREETING is required and unset, then its greeting", async () => {
  const dir = await scratchDir("wk-deploy-greeter-");
  const url = `file://${dir}/bucket`;
  await Deno.writeTextFile(`${dir}/greeting.env`, "GREETING=hello\n");
  try {
    await deploy(url, {}, "--actor", `greeter=${GREETER_WASM}`, "--requires", "greeter=GREETING");
    const a = await startClusterNode("a", dir, url, APP);
    try {
      const refused = await get(a, "ann", "", "greeter");
      assert.equal(refused.status, 503);
      assert.match(refused.body, /class 'greeter' is missing required values \(GREETING\)/);
      await deploy(url, {}, "--config", `greeter=${dir}/greeting.env`);
      await until(
        "the greeting",
        async () => (await get(a, "ann", "", "greeter")).body === "hello, ann",
      );
    } finally {
      await a.stop();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("deploys: an alarm of a class missing a required value waits, and fires once the value is set (within the retry ceiling)", async () => {
  const dir = await scratchDir("wk-deploy-alarm-");
  const url = `file://${dir}/bucket`;
  await Deno.writeTextFile(`${dir}/needed.env`, "NEEDED=yes\n");
  try {
    await deploy(url, {}, "--actor", `testbed=${TESTBED_WASM}`);
    const a = await startClusterNode("a", dir, url, APP, {
      extra: ["--alarm-retry-max-secs", "2"],
    });
    try {
      // Far enough ahead that the deploy and the node's next poll land
      // before it is due, even on a loaded machine: an alarm due earlier
      // would fire before the class lacks anything.
      const due = Date.now() + 12_000;
      assert.equal((await get(a, "r", `/alarm?${due}`)).body, "set");
      await deploy(url, {}, "--requires", "testbed=NEEDED");
      await until("the class is refused", async () => (await get(a, "r", "/rows")).status === 503);
      assert.ok(
        Date.now() < due,
        `the requirement landed ${Date.now() - due} ms after the alarm was due`,
      );
      await until(
        "the alarm was retried",
        async () => (await metric(a.url, "wasmkeep_alarms_retried_total") ?? 0) >= 2,
        due - Date.now() + 8_000,
      );
      assert.equal(await metric(a.url, "wasmkeep_alarms_fired_total", { by: "owner" }), 0);
      await deploy(url, {}, "--config", `testbed=${dir}/needed.env`);
      await until("the alarm fired", async () => {
        const sql = encodeURIComponent("SELECT count(*) FROM t WHERE x = 'alarm'");
        return (await get(a, "r", `/sql?${sql}`)).body === "1";
      }, APP_POLL_MS + 2_000 + 2_000);
    } finally {
      await a.stop();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("deploys: a class made internal closes its open sockets with 1008 at their next message and refuses new ones with 403; one missing a required value closes them with 1011 and answers upgrades 503; an existing class answers an upgrade for an actor never created 404", async () => {
  const dir = await scratchDir("wk-deploy-sockets-");
  const url = `file://${dir}/bucket`;
  try {
    await deploy(url, {}, "--actor", `testbed=${TESTBED_WASM}`);
    const a = await startClusterNode("a", dir, url, APP);
    try {
      const wsUrl = (name: string) => `${a.url.replace("http", "ws")}/actor/testbed/${name}`;
      const internal = await openSocket(wsUrl("room"));
      internal.socket.send("hello");
      assert.equal(await internal.next(), "hello");
      await deploy(url, {}, "--access", "testbed=internal");
      await until(
        "the class is internal",
        async () => (await get(a, "room", "/rows")).status === 403,
      );
      internal.socket.send("again");
      const closed = await internal.closed;
      assert.deepEqual([closed.code, closed.reason], [1008, "class 'testbed' is internal now"]);
      // A new socket is refused before anything else.
      assert.match(await upgradeHead(a, "room"), /^http\/1\.1 403 /);

      await deploy(url, {}, "--access", "testbed=open");
      await until("the class is open", async () => (await get(a, "room", "/rows")).status === 200);
      const required = await openSocket(wsUrl("room"));
      required.socket.send("hello");
      assert.equal(await required.next(), "hello");
      await deploy(url, {}, "--requires", "testbed=NEEDED");
      await until(
        "the class is refused",
        async () => (await get(a, "room", "/rows")).status === 503,
      );
      required.socket.send("again");
      const missing = await required.closed;
      assert.deepEqual(
        [missing.code, missing.reason],
        [1011, "class 'testbed' is missing required values (NEEDED)"],
      );
      const waiting = await upgradeHead(a, "room");
      assert.match(waiting, /^http\/1\.1 503 /);
      assert.match(waiting, /\r\nretry-after: 1(\r\n|$)/);

      // Only existing actors: an upgrade for one never created is 404, one that exists opens.
      await deploy(url, {}, "--requires", "testbed=", "--access", "testbed=existing");
      await until(
        "the class runs again",
        async () => (await get(a, "room", "/rows")).status === 200,
      );
      assert.match(await upgradeHead(a, "nobody"), /^http\/1\.1 404 /);
      assert.match(await upgradeHead(a, "room"), /^http\/1\.1 101 /);
    } finally {
      await a.stop();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
