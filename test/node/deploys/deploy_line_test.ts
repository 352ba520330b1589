/**
 * The deploy seq an actor ran counts within its app's line of deploys
 * (ADR 0008): every version an actor meets is recorded, one that changed
 * only rules too, and again after a delete-self emptied its database; and the next app of a tenant, after the first one's
 * `current` was deleted, finds the actors of its classes and serves them
 * (the spec's "Deploying": "the next app of the tenant finds the actors of
 * any class with the same name"), though its seqs start again at 1.
 */

import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import { request, scratchDir, startClusterNode } from "../../../src/testing/cluster.ts";
import { runWasmkeep, TESTBED_WASM } from "../../../src/testing/node_process.ts";
import { openBucket } from "../../../src/bucket/open.ts";
import { appCurrentKey } from "../../../src/bucket/keys.ts";
import { readCurrent, readVersion } from "../../../src/deploy/app_objects.ts";
import { actorDatabasePath } from "../../../src/actors/protocol.ts";
import { META_TABLE } from "../../../src/sqlite/actor_database.ts";
import { DEPLOY_LINE_KEY, DEPLOY_SEQ_KEY } from "../../../src/executor/deploy_seq.ts";
import { until } from "../../helpers/until.ts";

async function deploy(url: string, app: string, ...args: string[]) {
  const run = await runWasmkeep(["deploy", "--app", app, "--bucket", url, ...args]);
  assert.equal(run.code, 0, `deploy ${args.join(" ")}: ${run.stderr}`);
}

/** The deploy seq and line recorded in the closed database of actor acme/testbed/`name`. */
function recorded(dataDir: string, name: string): { seq?: string; line?: string } {
  const path = actorDatabasePath(dataDir, { tenant: "acme", class: "testbed", name });
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    const read = (key: string) =>
      (db.prepare(`SELECT value FROM ${META_TABLE} WHERE key = ?`).get(key) as
        | { value: string }
        | undefined)?.value;
    return { seq: read(DEPLOY_SEQ_KEY), line: read(DEPLOY_LINE_KEY) };
  } finally {
    db.close();
  }
}

Deno.test("deploy lines: a rules-only version is recorded with the actors it meets; the tenant's next app, after the first one's current was deleted, serves its actors from seq 1", async () => {
  const dir = await scratchDir("wk-deploy-line-");
  const url = `file://${dir}/bucket`;
  const bucket = openBucket(url);
  try {
    await deploy(url, "acme/shop", "--actor", `testbed=${TESTBED_WASM}`);
    const shop = await readCurrent(bucket, { tenant: "acme", app: "shop" });
    const line = (await readVersion(bucket, { tenant: "acme", app: "shop" }, shop!.current.version))
      .line;
    assert.match(line ?? "", /^[0-9a-f]{16}$/);

    const a = await startClusterNode("a", dir, url, ["--app", "acme/shop"]);
    try {
      assert.equal((await request(`${a.url}/actor/testbed/r/insert?kept`)).body, "1");
      assert.equal((await request(`${a.url}/actor/testbed/d/insert?x`)).body, "1");
      // Only a rule changes (seq 2): the actor's instance stays, and its next event records the seq.
      await deploy(url, "acme/shop", "--access", "testbed=existing");
      // A new name each time: one asked while the class was open exists from then on.
      let probe = 0;
      await until(
        "the rule applies",
        async () => (await request(`${a.url}/actor/testbed/never${probe++}/rows`)).status === 404,
      );
      assert.equal((await request(`${a.url}/actor/testbed/r/rows`)).body, "1");
      // A delete-self empties the database, the record with it: the actor
      // made anew records the version again with its first event.
      assert.equal((await request(`${a.url}/actor/testbed/d/delete`)).body, "deleted");
      assert.equal((await request(`${a.url}/actor/testbed/d/rows`)).body, "0");
    } finally {
      await a.stop();
    }
    assert.deepEqual(recorded(`${dir}/a`, "r"), { seq: "2", line });
    assert.deepEqual(recorded(`${dir}/a`, "d"), { seq: "2", line });

    // The first app freed as the spec says (its nodes stopped, its current deleted).
    await bucket.delete(appCurrentKey("acme", "shop"));
    await deploy(url, "acme/store", "--actor", `testbed=${TESTBED_WASM}`);
    const store = await readCurrent(bucket, { tenant: "acme", app: "store" });
    assert.equal(store?.current.seq, 1);
    const storeLine =
      (await readVersion(bucket, { tenant: "acme", app: "store" }, store!.current.version)).line;
    assert.notEqual(storeLine, line);

    const b = await startClusterNode("b", dir, url, ["--app", "acme/store"]);
    try {
      // Restored from the bucket on b, at the seq 2 of shop's line: served at store's seq 1.
      const rows = await request(`${b.url}/actor/testbed/r/rows`);
      assert.equal(rows.status, 200, rows.body);
      assert.equal(rows.body, "1");
    } finally {
      await b.stop();
    }
    assert.deepEqual(recorded(`${dir}/b`, "r"), { seq: "1", line: storeLine });
  } finally {
    await bucket.close();
    await Deno.remove(dir, { recursive: true });
  }
});
