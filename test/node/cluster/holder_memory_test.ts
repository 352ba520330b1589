/**
 * Holders remembered (issue 17): a node forwards to the holder it
 * remembers without reading the actor's ownership record, and reads it
 * again only when it must: the holder is not live any more, or it answers
 * that it does not hold the actor. Through real node processes on a file
 * bucket, each forwarded request is answered once, by the right node, and
 * runs once (the actor counts its rows).
 */

import assert from "node:assert/strict";
import { type NodeProcess, TESTBED_WASM } from "../../../src/testing/node_process.ts";
import { request, scratchDir, startClusterNode } from "../../../src/testing/cluster.ts";
import {
  countingBucketArgs,
  OWNER_READS_FILE_VARIABLE,
  ownerReads,
} from "../../helpers/counting_bucket_open.ts";
import { until } from "../../helpers/until.ts";

const TESTBED = ["--actor", `testbed=${TESTBED_WASM}`];

/** Inserts one row through `via`; the node that answered. */
async function insert(via: NodeProcess, actor: string, tag: string): Promise<string | null> {
  const answer = await request(`${via.url}/actor/testbed/${actor}/insert?${tag}`, {
    method: "POST",
  });
  assert.equal(answer.status, 200, `${tag} through ${via.url}: ${answer.status} ${answer.body}`);
  return answer.node;
}

/** The rows the actor holds, read through `via`, and the node that answered. */
async function rows(via: NodeProcess, actor: string): Promise<[number, string | null]> {
  const answer = await request(`${via.url}/actor/testbed/${actor}/rows`);
  assert.equal(answer.status, 200, answer.body);
  return [Number(answer.body), answer.node];
}

Deno.test("holders remembered: 1,000 forwarded requests read the ownership record at most once", async () => {
  const dir = await scratchDir("wk-holders-reads-");
  const bucketUrl = `file://${dir}/bucket`;
  const reads = `${dir}/owner-reads`;
  // The spec's ttl: a holder's heartbeat stays live in b's view on a loaded machine too.
  const [a, b] = await Promise.all([
    startClusterNode("a", dir, bucketUrl, TESTBED, { leaseTtlSecs: 10 }),
    startClusterNode("b", dir, bucketUrl, TESTBED, {
      leaseTtlSecs: 10,
      env: { [OWNER_READS_FILE_VARIABLE]: reads },
      denoArgs: countingBucketArgs(dir),
    }),
  ]);
  try {
    assert.equal(await insert(a, "hot", "first"), "a");
    // Steady state: b's view of the heartbeats has listed a (every 3 s).
    await new Promise((resolve) => setTimeout(resolve, 7_000));
    const before = ownerReads(reads);
    for (let i = 0; i < 1000; i++) {
      const answer = await request(`${b.url}/actor/testbed/hot/rows`);
      assert.deepEqual([answer.status, answer.node], [200, "a"]);
    }
    const made = ownerReads(reads) - before;
    assert.ok(made <= 1, `${made} ownership reads for 1,000 forwarded requests`);
  } finally {
    await Promise.all([a.stop(), b.stop()]);
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("holders remembered: after the holder's hibernation, its clean stop, its fence and a takeover by a third node, each forwarded request runs once, on the node that holds the actor", async () => {
  const dir = await scratchDir("wk-holders-");
  const bucketUrl = `file://${dir}/bucket`;
  const idle = { extra: ["--idle-secs", "1"] };
  const [a, b, c] = await Promise.all([
    startClusterNode("a", dir, bucketUrl, TESTBED, idle),
    startClusterNode("b", dir, bucketUrl, TESTBED, idle),
    startClusterNode("c", dir, bucketUrl, TESTBED, idle),
  ]);
  let written = 0;
  try {
    // b learns that a holds the actor.
    assert.equal(await insert(a, "x", "a1"), "a");
    written++;
    assert.equal(await insert(b, "x", "b1"), "a");
    written++;

    // a hibernates it (releasing its record); b still remembers a, which
    // takes it again and runs the request.
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    assert.equal(await insert(b, "x", "after-hibernation"), "a");
    written++;

    // Takeover by a third node: a hibernates it, c takes it; b, still
    // remembering a, is told "not held" and routes again to c.
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    assert.equal(await insert(c, "x", "c1"), "c");
    written++;
    assert.equal(await insert(b, "x", "after-takeover"), "c");
    written++;
    const [count] = await rows(c, "x");
    assert.equal(count, written, "each request ran once");

    // A clean stop of the holder: b reads the record (released) and takes it.
    await c.stop();
    assert.equal(await insert(b, "x", "after-stop"), "b");
    written++;

    // A fence: once b hibernated it, a takes it and dies; once a is fenced,
    // the next request is taken at b.
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    assert.equal(await insert(a, "x", "a2"), "a");
    written++;
    assert.equal(await insert(b, "x", "b2"), "a");
    written++;
    // Its plain writes' uploads land (a crash may lose those under way).
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    await a.killTree();
    await until("the actor taken over after a's fence", async () => {
      const answer = await request(`${b.url}/actor/testbed/x/rows`);
      return answer.status === 200 && answer.node === "b";
    }, 30_000);
    assert.equal(await insert(b, "x", "after-fence"), "b");
    written++;
    const [final, node] = await rows(b, "x");
    assert.equal(node, "b");
    assert.equal(final, written, "each request ran once, none lost");
  } finally {
    for (const node of [a, b, c]) await node.stop().catch(() => {});
    await Deno.remove(dir, { recursive: true });
  }
});
