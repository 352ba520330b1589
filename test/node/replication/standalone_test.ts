/**
 * A standalone node (no `--bucket`) keeps its actors' databases on its own
 * disk and replicates nothing into its embedded bucket (ADR 0005).
 */

import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import {
  metric,
  type NodeProcess,
  startNode,
  TESTBED_WASM,
} from "../../../src/testing/node_process.ts";
import { FileBucket } from "../../../src/bucket/file.ts";
import { listAll } from "../../../src/bucket/bucket.ts";

async function get(node: NodeProcess, path: string): Promise<[number, string]> {
  const response = await fetch(`${node.url}${path}`);
  return [response.status, (await response.text()).trim()];
}

/** Every file under `dir`, relative to it, sorted. */
function filesUnder(dir: string, prefix = ""): string[] {
  const files: string[] = [];
  for (const entry of Deno.readDirSync(dir)) {
    const name = `${prefix}${entry.name}`;
    if (entry.isDirectory) files.push(...filesUnder(`${dir}/${entry.name}`, `${name}/`));
    else files.push(name);
  }
  return files.sort();
}

async function bucketKeys(dataDir: string, prefix: string): Promise<string[]> {
  const bucket = new FileBucket(`${dataDir}/bucket`);
  try {
    const keys: string[] = [];
    for await (const object of listAll(bucket, prefix)) keys.push(object.key);
    return keys.sort();
  } finally {
    await bucket.close();
  }
}

function countRows(path: string): number {
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    assert.equal(
      (db.prepare("PRAGMA integrity_check").get() as Record<string, string>).integrity_check,
      "ok",
    );
    return Number((db.prepare("SELECT count(*) AS n FROM t").get() as { n: number }).n);
  } finally {
    db.close();
    // A reader without the node's exclusive lock made a -shm; it is ours.
    Deno.removeSync(`${path}-shm`);
  }
}

Deno.test("a standalone node keeps its actors on its own disk: nothing under actors/ in its embedded bucket, exec-durable and delete-self work, state survives a restart and a SIGKILL", async () => {
  const dataDir = await Deno.makeTempDir({ prefix: "wk-standalone-" });
  const args = ["--actor", `testbed=${TESTBED_WASM}`, "--data-dir", dataDir, "--node-id", "solo"];
  let node = await startNode(args);
  try {
    // A plain write, a durable write, and a durable COMMIT of a transaction.
    assert.deepEqual(await get(node, "/actor/testbed/keep/insert?plain"), [200, "1"]);
    assert.deepEqual(await get(node, "/actor/testbed/keep/durable"), [200, "ok"]);
    const [status, refused] = await get(node, "/actor/testbed/keep/durable-in-tx");
    assert.equal(status, 200, refused);
    assert.match(refused, /^refused: inside a transaction exec-durable takes only the COMMIT/);
    assert.deepEqual(await get(node, "/actor/testbed/keep/rows"), [200, "3"]);

    // delete-self wipes the local database; the next event starts afresh.
    assert.deepEqual(await get(node, "/actor/testbed/gone/insert?x"), [200, "1"]);
    assert.deepEqual(await get(node, "/actor/testbed/gone/durable"), [200, "ok"]);
    assert.deepEqual(await get(node, "/actor/testbed/gone/delete"), [200, "deleted"]);
    assert.deepEqual(await get(node, "/actor/testbed/gone/rows"), [200, "0"]);
    assert.deepEqual(await get(node, "/actor/testbed/gone/inits"), [200, "1"]);
    assert.deepEqual(await get(node, "/actor/testbed/gone/insert?after"), [200, "1"]);

    for (
      const name of [
        "wasmkeep_restore_failures_total",
        "wasmkeep_history_collected_total",
        "wasmkeep_history_collect_failures_total",
      ]
    ) {
      assert.equal(await metric(node.url, name), 0, name);
    }
    assert.equal((await node.stop()).code, 0, node.logs());
    assert.doesNotMatch(node.logs(), /actor restored/);

    // Nothing was replicated: no history, no delete marker, no .pos files;
    // the ownership records are there as before.
    assert.deepEqual(await bucketKeys(dataDir, "actors/"), []);
    assert.equal((await bucketKeys(dataDir, "owners/")).length, 2);
    const actorsDir = `${dataDir}/actors/default/testbed`;
    assert.deepEqual(filesUnder(actorsDir), ["gone.db", "keep.db"]);
    assert.equal(countRows(`${actorsDir}/keep.db`), 3);
    assert.equal(countRows(`${actorsDir}/gone.db`), 1);

    node = await startNode(args);
    assert.deepEqual(await get(node, "/actor/testbed/keep/rows"), [200, "3"]);
    assert.deepEqual(await get(node, "/actor/testbed/keep/inits"), [200, "1"]);
    assert.deepEqual(await get(node, "/actor/testbed/gone/rows"), [200, "1"]);
    assert.deepEqual(await get(node, "/actor/testbed/keep/durable"), [200, "ok"]);
    assert.deepEqual(await get(node, "/actor/testbed/keep/insert?lost-with-nothing"), [200, "1"]);

    // Killed with its executors, it comes back from its own files: the local
    // file is the only copy, and nothing is restored.
    await node.killTree();
    node = await startNode(args);
    assert.deepEqual(await get(node, "/actor/testbed/keep/rows"), [200, "5"]);
    assert.deepEqual(await get(node, "/actor/testbed/keep/inits"), [200, "1"]);
    assert.deepEqual(await get(node, "/actor/testbed/gone/rows"), [200, "1"]);
    assert.equal((await node.stop()).code, 0, node.logs());
    assert.deepEqual(await bucketKeys(dataDir, "actors/"), []);
    assert.deepEqual(filesUnder(actorsDir), ["gone.db", "keep.db"]);
  } finally {
    await node.stop();
    await Deno.remove(dataDir, { recursive: true });
  }
});
