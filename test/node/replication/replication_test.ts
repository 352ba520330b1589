/**
 * Replication through real nodes: the bucket is the durable copy of every
 * actor (issue 4; the spec's "Replication" and "History in the bucket").
 */

import assert from "node:assert/strict";
import { DatabaseSync } from "node:sqlite";
import {
  metric,
  type NodeProcess,
  startNode,
  TESTBED_WASM,
} from "../../../src/testing/node_process.ts";
import { startMoto } from "../../../src/testing/moto.ts";
import { scratchDir, startClusterNode } from "../../../src/testing/cluster.ts";
import { verifyLtxChainBytes } from "../../helpers/ltx_verify.ts";
import { FileBucket } from "../../../src/bucket/file.ts";
import { type Bucket, listAll } from "../../../src/bucket/bucket.ts";
import { actorWalPrefix as walPrefixOf } from "../../../src/bucket/keys.ts";
import { deletedKey } from "../../../src/replication/history.ts";
import { shardOf } from "../../../src/actors/executor_pool.ts";

const TESTBED = ["--actor", `testbed=${TESTBED_WASM}`];

const testbed = (name: string) => ({ tenant: "default", class: "testbed", name });
const actorWalPrefix = (name: string) => walPrefixOf(testbed(name));
const deletedKeyOf = (name: string) => deletedKey(testbed(name));

async function text(response: Response): Promise<string> {
  return (await response.text()).trim();
}

async function get(peer: NodeProcess, path: string): Promise<[number, string]> {
  const response = await fetch(`${peer.url}${path}`);
  return [response.status, await text(response)];
}

/**
 * GET until the answer is not a 503: after a node was killed its actors are
 * held until a peer fences it (ttl + grace after its last write).
 */
async function getOnceFree(peer: NodeProcess, path: string): Promise<[number, string]> {
  const deadline = Date.now() + 15_000;
  while (true) {
    const answer = await get(peer, path);
    if (answer[0] !== 503 || Date.now() > deadline) return answer;
    await new Promise((r) => setTimeout(r, 250));
  }
}

/** The keys under an actor's `wal/`, relative to it, sorted. */
async function walKeys(bucket: Bucket, name: string): Promise<string[]> {
  const prefix = actorWalPrefix(name);
  const keys: string[] = [];
  for await (const object of listAll(bucket, prefix)) keys.push(object.key.slice(prefix.length));
  return keys.sort();
}

function rowsOf(path: string): string[] {
  const db = new DatabaseSync(path, { readOnly: true });
  try {
    assert.equal(
      (db.prepare("PRAGMA integrity_check").get() as Record<string, string>).integrity_check,
      "ok",
    );
    return db.prepare("SELECT x FROM t ORDER BY rowid").all().map((row) => String(row.x));
  } finally {
    db.close();
  }
}

for (const store of ["file", "moto"] as const) {
  Deno.test(`an acknowledged durable write survives SIGKILL: a node with an empty data dir serves it (${store} bucket)`, async () => {
    const dir = await scratchDir("wk-repl-");
    const moto = store === "moto" ? await startMoto() : undefined;
    const bucketUrl = moto ? `s3://${moto.bucket}/durable` : `file://${dir}/bucket`;
    const env = moto?.env ?? {};
    try {
      const a = await startClusterNode("a", dir, bucketUrl, TESTBED, { env });
      try {
        assert.deepEqual(await get(a, "/actor/testbed/keeper/insert?plain"), [200, "1"]);
        assert.deepEqual(await get(a, "/actor/testbed/keeper/durable"), [200, "ok"]);
      } finally {
        await a.killTree();
      }
      const b = await startClusterNode("b", dir, bucketUrl, TESTBED, { env });
      try {
        assert.deepEqual(await getOnceFree(b, "/actor/testbed/keeper/rows"), [200, "2"]);
        assert.match(b.logs(), /actor restored actor=default\/testbed\/keeper outcome=restored/);
      } finally {
        await b.stop();
      }
    } finally {
      await moto?.stop();
      await Deno.remove(dir, { recursive: true });
    }
  });
}

/**
 * An S3 front for moto that can hold every upload of LTX files, as a bucket
 * that stopped answering writes: a plain write is acknowledged meanwhile, a
 * durable one is not.
 */
function stallingProxy(target: string) {
  let stalling = false;
  const held: (() => void)[] = [];
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen: () => {} }, async (req) => {
    const url = new URL(req.url);
    if (stalling && req.method === "PUT" && url.pathname.includes("/wal/")) {
      // Held until the test ends: never forwarded.
      await new Promise<void>((resolve) => held.push(resolve));
      return new Response("stalled", { status: 503 });
    }
    const body = req.method === "GET" || req.method === "HEAD"
      ? undefined
      : await req.arrayBuffer();
    const headers = new Headers(req.headers);
    headers.delete("host");
    const answer = await fetch(`${target}${url.pathname}${url.search}`, {
      method: req.method,
      headers,
      body,
    });
    const empty = req.method === "HEAD" || [204, 205, 304].includes(answer.status);
    return new Response(empty ? null : await answer.arrayBuffer(), {
      status: answer.status,
      headers: answer.headers,
    });
  });
  return {
    endpoint: `http://127.0.0.1:${server.addr.port}`,
    stall: () => stalling = true,
    async close() {
      for (const release of held.splice(0)) release();
      await server.shutdown();
    },
  };
}

Deno.test("a plain write is acknowledged before its upload and can be lost with its node; a durable one is not acknowledged until it landed", async () => {
  const dir = await scratchDir("wk-repl-");
  const moto = await startMoto();
  const proxy = stallingProxy(moto.endpoint);
  const bucketUrl = `s3://${moto.bucket}/window`;
  try {
    const a = await startClusterNode("a", dir, bucketUrl, TESTBED, {
      env: { ...moto.env, AWS_ENDPOINT: proxy.endpoint },
    });
    try {
      assert.deepEqual(await get(a, "/actor/testbed/window/durable"), [200, "ok"]);
      proxy.stall();
      // Committed here and answered at once; its upload never lands.
      assert.deepEqual(await get(a, "/actor/testbed/window/insert?plain"), [200, "1"]);
      assert.deepEqual(await get(a, "/actor/testbed/window/rows"), [200, "2"]);
      // A durable write waits for its upload, so it is not answered.
      const controller = new AbortController();
      const durable = fetch(`${a.url}/actor/testbed/window/durable`, { signal: controller.signal });
      const early = await Promise.race([
        durable.then(() => "answered", () => "aborted"),
        new Promise((r) => setTimeout(() => r("waiting"), 1500)),
      ]);
      assert.equal(early, "waiting");
      controller.abort();
      await durable.catch(() => {});
    } finally {
      await a.killTree();
    }
    const b = await startClusterNode("b", dir, bucketUrl, TESTBED, { env: moto.env });
    try {
      // The first durable write only: the plain write and the unanswered
      // durable one died with node a.
      assert.deepEqual(await getOnceFree(b, "/actor/testbed/window/rows"), [200, "1"]);
    } finally {
      await b.stop();
    }
  } finally {
    await proxy.close();
    await moto.stop();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("200 writes make a snapshot every 64 uploads; a restore reads the last one and what follows; the files verify independently", async () => {
  const dir = await scratchDir("wk-repl-");
  const bucketUrl = `file://${dir}/bucket`;
  try {
    const a = await startClusterNode("a", dir, bucketUrl, TESTBED);
    try {
      // Durable writes: each lands before the next, so each is one upload.
      for (let i = 0; i < 200; i++) {
        assert.deepEqual(await get(a, "/actor/testbed/many/durable"), [200, "ok"]);
      }
    } finally {
      await a.stop();
    }
    const bucket = new FileBucket(`${dir}/bucket`);
    const keys = await walKeys(bucket, "many");
    const snapshots = keys.filter((key) => /\/0000000000000001-/.test(key));
    assert.deepEqual(snapshots, [
      "0000000000000001/0000000000000001-0000000000000001.ltx",
      "0000000000000001/0000000000000001-0000000000000041.ltx",
      "0000000000000001/0000000000000001-0000000000000081.ltx",
      "0000000000000001/0000000000000001-00000000000000c1.ltx",
    ]);

    // The chain from the last snapshot on, read back and checked by a
    // decoder written apart from ours.
    const chain = keys.filter((key) => {
      const [min, max] = key.split("/")[1].replace(".ltx", "").split("-").map((h) =>
        parseInt(h, 16)
      );
      return key.endsWith(".ltx") && (min === 1 ? max === 0xc1 : min > 0xc1);
    });
    assert.equal(chain.length, 8);
    const files = [];
    for (const key of chain) {
      files.push((await bucket.get(`${actorWalPrefix("many")}${key}`))!.body);
    }
    const verified = await verifyLtxChainBytes(files);
    assert.ok(verified.ok, verified.output);
    await Deno.writeFile(`${dir}/independent.db`, verified.image!);

    const b = await startClusterNode("b", dir, bucketUrl, TESTBED);
    try {
      assert.deepEqual(await get(b, "/actor/testbed/many/rows"), [200, "200"]);
      assert.match(
        b.logs(),
        /actor restored actor=default\/testbed\/many outcome=restored txid=200 snapshot_txid=193 files=8 /,
      );
    } finally {
      await b.stop();
    }
    const own = rowsOf(`${dir}/a/actors/default/testbed/many.db`);
    assert.equal(own.length, 200);
    assert.deepEqual(rowsOf(`${dir}/b/actors/default/testbed/many.db`), own);
    assert.deepEqual(rowsOf(`${dir}/independent.db`), own);
    await bucket.close();
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("retention 0 collects the history the rule allows and keeps what a restore needs", async () => {
  const dir = await scratchDir("wk-repl-");
  const bucketUrl = `file://${dir}/bucket`;
  try {
    const a = await startClusterNode("a", dir, bucketUrl, TESTBED, {
      extra: ["--history-retention-secs", "0"],
    });
    try {
      for (let i = 0; i < 70; i++) {
        assert.deepEqual(await get(a, "/actor/testbed/short/durable"), [200, "ok"]);
      }
      // Collection runs in the background after the snapshot at 65.
      let collected = 0;
      for (let i = 0; i < 50 && collected < 65; i++) {
        collected = (await metric(a.url, "wasmkeep_history_collected_total")) ?? 0;
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.equal(collected, 65);
    } finally {
      await a.stop();
    }
    const bucket = new FileBucket(`${dir}/bucket`);
    assert.deepEqual(await walKeys(bucket, "short"), [
      "0000000000000001/0000000000000001-0000000000000041.ltx",
      "0000000000000001/0000000000000042-0000000000000042.ltx",
      "0000000000000001/0000000000000043-0000000000000043.ltx",
      "0000000000000001/0000000000000044-0000000000000044.ltx",
      "0000000000000001/0000000000000045-0000000000000045.ltx",
      "0000000000000001/0000000000000046-0000000000000046.ltx",
      "0000000000000001/base",
    ]);
    await bucket.close();
    const b = await startClusterNode("b", dir, bucketUrl, TESTBED);
    try {
      assert.deepEqual(await get(b, "/actor/testbed/short/rows"), [200, "70"]);
    } finally {
      await b.stop();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a deleted actor stays deleted on another node, and its history is erased", async () => {
  const dir = await scratchDir("wk-repl-");
  const bucketUrl = `file://${dir}/bucket`;
  try {
    const a = await startClusterNode("a", dir, bucketUrl, TESTBED);
    try {
      assert.deepEqual(await get(a, "/actor/testbed/gone/insert?one"), [200, "1"]);
      assert.deepEqual(await get(a, "/actor/testbed/gone/insert?two"), [200, "1"]);
      assert.deepEqual(await get(a, "/actor/testbed/gone/delete"), [200, "deleted"]);
      // Here too: an empty database, on-init ran again.
      assert.deepEqual(await get(a, "/actor/testbed/gone/rows"), [200, "0"]);
      assert.deepEqual(await get(a, "/actor/testbed/gone/inits"), [200, "1"]);
    } finally {
      await a.stop();
    }
    const bucket = new FileBucket(`${dir}/bucket`);
    const marker = await bucket.get(deletedKeyOf("gone"));
    assert.ok(marker, "the delete is recorded");
    // Only what came after the delete (its first file is a snapshot).
    const keys = await walKeys(bucket, "gone");
    assert.ok(keys.every((key) => !key.endsWith("base")), keys.join());
    assert.ok(keys.every((key) => key.includes("/0000000000000001-")), keys.join());
    await bucket.close();

    const b = await startClusterNode("b", dir, bucketUrl, TESTBED);
    try {
      assert.deepEqual(await get(b, "/actor/testbed/gone/rows"), [200, "0"]);
    } finally {
      await b.stop();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a corrupted LTX file in the bucket answers 500 and leaves the local file untouched", async () => {
  const dir = await scratchDir("wk-repl-");
  const bucketUrl = `file://${dir}/bucket`;
  const start = () => startClusterNode("a", dir, bucketUrl, TESTBED);
  try {
    const a = await start();
    try {
      assert.deepEqual(await get(a, "/actor/testbed/broken/insert?one"), [200, "1"]);
      assert.deepEqual(await get(a, "/actor/testbed/broken/durable"), [200, "ok"]);
    } finally {
      await a.stop();
    }
    const bucket = new FileBucket(`${dir}/bucket`);
    const keys = (await walKeys(bucket, "broken")).filter((key) => key.endsWith(".ltx"));
    const last = `${actorWalPrefix("broken")}${keys[keys.length - 1]}`;
    const object = (await bucket.get(last))!;
    const body = object.body.slice();
    body[Math.floor(body.length / 2)] ^= 0xff;
    await bucket.put(last, body);
    await bucket.close();
    const local = `${dir}/a/actors/default/testbed/broken.db`;
    const before = await Deno.readFile(local);

    const again = await start();
    try {
      const [status, message] = await get(again, "/actor/testbed/broken/rows");
      assert.equal(status, 500);
      assert.match(message, /cannot be restored without losing data/);
      assert.equal(await metric(again.url, "wasmkeep_restore_failures_total"), 1);
    } finally {
      await again.stop();
    }
    assert.deepEqual(await Deno.readFile(local), before);
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("exec-durable inside a transaction takes only the COMMIT", async () => {
  const dir = await scratchDir("wk-repl-");
  try {
    const a = await startNode([...TESTBED, "--data-dir", `${dir}/a`]);
    try {
      const [status, message] = await get(a, "/actor/testbed/tx/durable-in-tx");
      assert.equal(status, 200, message);
      assert.match(message, /^refused: inside a transaction exec-durable takes only the COMMIT/);
      // The refused statement never ran; the transaction committed durably.
      assert.deepEqual(await get(a, "/actor/testbed/tx/rows"), [200, "1"]);
      for (
        const name of [
          "wasmkeep_snapshot_upload_failures_total",
          "wasmkeep_restore_failures_total",
          "wasmkeep_history_collected_total",
          "wasmkeep_history_collect_failures_total",
        ]
      ) {
        assert.equal(await metric(a.url, name), 0, name);
      }
    } finally {
      await a.stop();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** A testbed actor name that hashes to executor `shard` of two. */
function nameOnShard(shard: number, prefix: string): string {
  for (let i = 0;; i++) {
    if (shardOf(`default/testbed/${prefix}${i}`, 2) === shard) return `${prefix}${i}`;
  }
}

Deno.test("commits made before an event waits are uploaded even if its database is closed while it waits", async () => {
  const dir = await scratchDir("wk-repl-wait-");
  const bucketUrl = `file://${dir}/bucket`;
  // A database unused for 1 s is closed; the callee loops until its 3 s limit.
  const options = {
    extra: ["--executors", "2", "--db-idle-secs", "1", "--event-timeout-secs", "3"],
  };
  const caller = nameOnShard(0, "caller");
  const callee = nameOnShard(1, "callee");
  const a = await startClusterNode("a", dir, bucketUrl, TESTBED, options);
  try {
    // The caller's wake runs its on-init, which commits its tables; then its
    // event waits on the call, longer than its database stays open unused.
    // (It ends with its own limit's 504, as its callee loops.)
    const call = encodeURIComponent(`testbed/${callee}/loop`);
    assert.equal((await get(a, `/actor/testbed/${caller}/call?${call}`))[0], 504);
    assert.deepEqual(await get(a, `/actor/testbed/${caller}/insert?hello`), [200, "1"]);
  } finally {
    await a.stop();
  }
  const b = await startClusterNode("b", dir, bucketUrl, TESTBED, options);
  try {
    assert.deepEqual(await getOnceFree(b, `/actor/testbed/${caller}/rows`), [200, "1"]);
    assert.deepEqual(await get(b, `/actor/testbed/${caller}/inits`), [200, "1"]);
  } finally {
    await b.stop();
    await Deno.remove(dir, { recursive: true });
  }
});
