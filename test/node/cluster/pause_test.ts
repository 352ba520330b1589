/**
 * A node paused (SIGSTOP) past its lease, then resumed (SIGCONT): it stops
 * running actors before anyone takes them, and writes nothing after it was
 * fenced; it exits, and its actors carry on on another node.
 */

import assert from "node:assert/strict";
import { COUNTER_WASM } from "../../../src/testing/node_process.ts";
import { request, scratchDir, startClusterNode } from "../../../src/testing/cluster.ts";
import { startMoto } from "../../../src/testing/moto.ts";
import { FileBucket } from "../../../src/bucket/file.ts";
import { S3Bucket } from "../../../src/bucket/s3.ts";
import { systemClock, systemRandom } from "../../../src/time/clock.ts";
import { decodeHeartbeat } from "../../../src/cluster/heartbeat.ts";
import { decodeOwnerRecord } from "../../../src/cluster/ownership.ts";

const COUNTER = ["--actor", `counter=${COUNTER_WASM}`];

for (const store of ["file", "moto"] as const) {
  Deno.test(`SIGSTOP past the lease, then SIGCONT: the paused node is fenced, its actor served elsewhere, and it stops without writing again (${store} bucket)`, async () => {
    const dir = await scratchDir("wk-pause-");
    const moto = store === "moto" ? await startMoto() : undefined;
    const bucketUrl = moto ? `s3://${moto.bucket}/${store}` : `file://${dir}/bucket`;
    const env = moto?.env;
    try {
      const [a, b] = await Promise.all([
        startClusterNode("a", dir, bucketUrl, COUNTER, { env }),
        startClusterNode("b", dir, bucketUrl, COUNTER, { env }),
      ]);
      try {
        const first = await request(`${a.url}/actor/counter/paused`, { method: "POST" });
        assert.deepEqual([first.status, first.body, first.node], [200, "1", "a"]);

        // The write is answered before its upload lands (a plain write):
        // wait for it, or the pause would lose it, as the spec says it may.
        const bucket = moto
          ? S3Bucket.fromUrl(bucketUrl, moto.env, { clock: systemClock, random: systemRandom })
          : new FileBucket(`${dir}/bucket`);
        const uploaded = async () => {
          const page = await bucket.list("actors/default/counter/paused/wal/");
          return page.objects.some((object) => object.key.endsWith(".ltx"));
        };
        for (let i = 0; i < 50 && !(await uploaded()); i++) {
          await new Promise((r) => setTimeout(r, 100));
        }
        assert.ok(await uploaded(), "the first write reached the bucket");

        a.signalTree("SIGSTOP");
        // ttl 3 s: a's lease ends 2.4 s after its last write; b fences it no
        // sooner than 4.5 s after it, then takes the actor.
        let taken;
        const deadline = Date.now() + 20_000;
        while (Date.now() < deadline) {
          // A request b forwards to the paused a waits for it (a silent host
          // is answered 504 only after 30 s): the client gives up sooner.
          taken = await request(`${b.url}/actor/counter/paused`, {
            method: "POST",
            signal: AbortSignal.timeout(2000),
          }).catch(() => undefined);
          if (taken?.status === 200) break;
          await new Promise((r) => setTimeout(r, 200));
        }
        assert.deepEqual([taken?.status, taken?.body, taken?.node], [200, "2", "b"]);

        const fenced = decodeHeartbeat((await bucket.get("nodes/a"))!.body, "nodes/a");
        assert.equal(fenced.lease, "fenced");
        assert.equal(fenced.fencedBy, "b");

        a.signalTree("SIGCONT");
        // Its lease ran out while it slept: it runs nothing for the actor now.
        const after = await request(`${a.url}/actor/counter/paused`, { method: "POST" }).catch(
          () => undefined,
        );
        if (after) assert.ok(after.node !== "a" || after.status !== 200, JSON.stringify(after));
        const status = await Promise.race([
          a.status,
          new Promise<undefined>((r) => setTimeout(() => r(undefined), 10_000)),
        ]);
        assert.equal(status?.code, 1, "the fenced node stops with an error");
        assert.match(
          a.logs(),
          /another writer took this node's lease: stopping node=a reason="node b fenced it"\n/,
        );
        const exit = a.logs().split("\n").filter((line) => line.startsWith("wasmkeep: "));
        assert.deepEqual(exit, ["wasmkeep: the node lease nodes/a was lost: node b fenced it"]);

        // Nothing of a's after the fence: the heartbeat is still the fence, and
        // the record names b.
        const still = decodeHeartbeat((await bucket.get("nodes/a"))!.body, "nodes/a");
        assert.equal(still.lease, "fenced");
        const record = decodeOwnerRecord(
          (await bucket.get("owners/default/counter/paused"))!.body,
        );
        assert.equal(record.node, "b");
        const next = await request(`${b.url}/actor/counter/paused`, { method: "POST" });
        assert.deepEqual([next.status, next.body, next.node], [200, "3", "b"]);
        await bucket.close();
      } finally {
        a.signalTree("SIGCONT");
        await a.kill().catch(() => {});
        await b.stop();
      }
    } finally {
      await moto?.stop();
      await Deno.remove(dir, { recursive: true });
    }
  });
}
