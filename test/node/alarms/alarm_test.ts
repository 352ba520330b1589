/**
 * Alarms on one node (issue 19), through a real node process and the
 * testbed actor: on time, on-alarm's view of its own alarm, retries, the
 * index entries in the (file) bucket, a change inside a trapping event, a
 * hibernated actor woken, and a restart.
 */

import assert from "node:assert/strict";
import { metric, startNode, TESTBED_WASM, withNode } from "../../../src/testing/node_process.ts";
import { until } from "../../helpers/until.ts";
import { FileBucket } from "../../../src/bucket/file.ts";
import { listAll } from "../../../src/bucket/bucket.ts";
import { alarmKey } from "../../../src/bucket/keys.ts";

const TESTBED = ["--actor", `testbed=${TESTBED_WASM}`];

async function text(url: string, init?: RequestInit): Promise<string> {
  const response = await fetch(url, init);
  return (await response.text()).trim();
}

/** The testbed's rows of t, in order. */
async function rows(actor: string): Promise<string[]> {
  const body = await text(`${actor}/sql?${encodeURIComponent("SELECT x FROM t ORDER BY rowid")}`);
  return body === "" ? [] : body.split("\n");
}

/** When on-alarm fired, each time (its 'fired-at:<ms>' rows). */
async function firings(actor: string): Promise<number[]> {
  return (await rows(actor)).filter((row) => row.startsWith("fired-at:")).map((row) =>
    Number(row.slice("fired-at:".length))
  );
}

/** The keys of the alarm index in a standalone node's file bucket. */
async function indexKeys(dataDir: string): Promise<string[]> {
  const bucket = new FileBucket(`${dataDir}/bucket`);
  try {
    const keys: string[] = [];
    for await (const object of listAll(bucket, "alarms/")) keys.push(object.key);
    return keys;
  } finally {
    await bucket.close();
  }
}

const entry = (due: number, name: string) =>
  alarmKey(due, { tenant: "default", class: "testbed", name });

Deno.test("alarms: an alarm fires on time on its owner, on-alarm sees its own state and its alarm still set, and its entry goes once it fired", async () => {
  await withNode(TESTBED, async (node, dataDir) => {
    const actor = `${node.url}/actor/testbed/punctual`;
    assert.equal(await text(`${actor}/insert?before`), "1");
    const due = Date.now() + 1_500;
    assert.equal(await text(`${actor}/alarm?${due}`), "set");
    assert.equal(await text(`${actor}/alarm-get`), String(due));
    assert.deepEqual(await indexKeys(dataDir), [entry(due, "punctual")]);
    assert.equal(await metric(node.url, "wasmkeep_alarms_set_total"), 1);

    await until("the alarm fired", async () => (await firings(actor)).length > 0, 10_000);
    const [firedAt] = await firings(actor);
    assert.ok(firedAt >= due, `fired ${due - firedAt} ms early`);
    assert.ok(firedAt - due < 500, `fired ${firedAt - due} ms late`);
    // It ran once, after the request's row, and saw its own alarm set.
    assert.deepEqual((await rows(actor)).filter((row) => !row.startsWith("fired-at:")), [
      "before",
      "attempt",
      "alarm",
      `alarm:${due}`,
    ]);
    assert.equal(await text(`${actor}/alarm-get`), "unset");
    await until("its entry was deleted", async () => (await indexKeys(dataDir)).length === 0);
    assert.equal(
      await metric(node.url, "wasmkeep_alarms_fired_total", { by: "owner" }),
      1,
    );
    assert.equal(await metric(node.url, "wasmkeep_alarms_retried_total"), 0);
    assert.equal(await metric(node.url, "wasmkeep_alarms_armed"), 0);
  });
});

Deno.test("alarms: an on-alarm that traps is retried with backoff until it succeeds, its alarm still set meanwhile; one that answers an error too", async () => {
  await withNode(TESTBED, async (node) => {
    const actor = `${node.url}/actor/testbed/retried`;
    // The next two attempts trap.
    await text(`${actor}/insert?alarm-fail`);
    await text(`${actor}/insert?alarm-fail`);
    const due = Date.now() + 500;
    assert.equal(await text(`${actor}/alarm?${due}`), "set");
    await until("the third attempt succeeded", async () => (await firings(actor)).length > 0);
    const [firedAt] = await firings(actor);
    // Attempts at the due time, 1 s later, then 2 s after that.
    assert.ok(firedAt - due >= 3_000, `succeeded ${firedAt - due} ms after due`);
    assert.ok(firedAt - due < 4_500, `succeeded ${firedAt - due} ms after due`);
    const all = await rows(actor);
    assert.equal(all.filter((row) => row === "attempt").length, 3);
    assert.ok(all.includes(`alarm:${due}`), "the retry saw the alarm still set");
    assert.equal(await metric(node.url, "wasmkeep_alarms_retried_total"), 2);
    assert.equal(await text(`${actor}/alarm-get`), "unset");
    assert.match(node.logs(), /actor failed/);

    // An error answer is retried the same way, until the actor stops refusing.
    const other = `${node.url}/actor/testbed/refusing`;
    await text(`${other}/insert?alarm-err`);
    const second = Date.now() + 200;
    await text(`${other}/alarm?${second}`);
    await until(
      "two failed attempts",
      async () => (await rows(other)).filter((row) => row === "attempt").length >= 2,
    );
    assert.equal(await text(`${other}/alarm-get`), String(second));
    assert.match(node.logs(), /on-alarm failed: on-alarm refused/);
    await text(`${other}/sql?${encodeURIComponent("DELETE FROM t WHERE x = 'alarm-err'")}`);
    await until("it fired", async () => (await firings(other)).length === 1, 10_000);
  });
});

Deno.test("alarms: set, move and delete inside an event that traps change nothing; a move and a delete leave no stale entry", async () => {
  await withNode(TESTBED, async (node, dataDir) => {
    const actor = `${node.url}/actor/testbed/careful`;
    const x = 4_102_444_800_000, y = x + 1_000, z = x + 2_000;
    assert.equal(await text(`${actor}/alarm?${x}`), "set");
    assert.deepEqual(await indexKeys(dataDir), [entry(x, "careful")]);

    const trapped = await fetch(`${actor}/alarm-trap?${y}`);
    assert.equal(trapped.status, 500);
    await trapped.body?.cancel();
    assert.equal(await text(`${actor}/alarm-get`), String(x));
    const deleted = await fetch(`${actor}/alarm-trap?delete`);
    assert.equal(deleted.status, 500);
    await deleted.body?.cancel();
    assert.equal(await text(`${actor}/alarm-get`), String(x));
    assert.deepEqual(await indexKeys(dataDir), [entry(x, "careful")]);

    assert.equal(await text(`${actor}/alarm?${z}`), "set");
    assert.equal(await text(`${actor}/alarm-get`), String(z));
    await until("the moved alarm's old entry went", async () => {
      const keys = await indexKeys(dataDir);
      return keys.length === 1 && keys[0] === entry(z, "careful");
    });
    assert.equal(await text(`${actor}/alarm-delete`), "deleted");
    assert.equal(await text(`${actor}/alarm-get`), "unset");
    await until("no entry is left", async () => (await indexKeys(dataDir)).length === 0);
    // Only the two sets that committed were counted.
    assert.equal(await metric(node.url, "wasmkeep_alarms_set_total"), 2);
  });
});

Deno.test("alarms: a hibernated actor's alarm wakes it on time", async () => {
  await withNode([...TESTBED, "--idle-secs", "1"], async (node) => {
    const actor = `${node.url}/actor/testbed/sleeper`;
    const due = Date.now() + 3_500;
    assert.equal(await text(`${actor}/alarm?${due}`), "set");
    await until(
      "the actor hibernated",
      async () => await metric(node.url, "wasmkeep_resident_actors") === 0,
    );
    assert.ok(Date.now() < due, "hibernated before its alarm");
    await until(
      "it woke and fired",
      async () => await metric(node.url, "wasmkeep_alarms_fired_total", { by: "owner" }) === 1,
      10_000,
    );
    const [firedAt] = await firings(actor);
    assert.ok(firedAt >= due && firedAt - due < 500, `fired ${firedAt - due} ms from due`);
  });
});

Deno.test("alarms: a standalone node that restarts fires its actors' alarms on time (its sweep looks one period ahead)", async () => {
  const dataDir = await Deno.makeTempDir();
  try {
    const first = await startNode([...TESTBED, "--data-dir", dataDir]);
    const due = Date.now() + 6_000;
    try {
      assert.equal(await text(`${first.url}/actor/testbed/patient/alarm?${due}`), "set");
    } finally {
      await first.stop();
    }
    const second = await startNode([...TESTBED, "--data-dir", dataDir]);
    try {
      assert.ok(Date.now() < due, "restarted before the alarm was due");
      const actor = `${second.url}/actor/testbed/patient`;
      await until("it fired", async () => {
        return await metric(second.url, "wasmkeep_alarms_fired_total", { by: "sweep" }) === 1;
      }, 15_000);
      const [firedAt] = await firings(actor);
      assert.ok(firedAt >= due && firedAt - due < 500, `fired ${firedAt - due} ms from due`);
    } finally {
      await second.stop();
    }
  } finally {
    await Deno.remove(dataDir, { recursive: true });
  }
});
