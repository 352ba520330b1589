/**
 * Several real nodes on one bucket (issue 5): forwarding, clean stops, a
 * duplicate node id, and `cluster status` over what they wrote.
 */

import assert from "node:assert/strict";
import { COUNTER_WASM, metric } from "../../../src/testing/node_process.ts";
import { startMoto } from "../../../src/testing/moto.ts";
import {
  clusterStatus,
  request,
  scratchDir,
  startClusterNode,
} from "../../../src/testing/cluster.ts";
import { startNode } from "../../../src/testing/node_process.ts";

const COUNTER = ["--actor", `counter=${COUNTER_WASM}`];

for (const store of ["file", "moto"] as const) {
  Deno.test(`try it locally: a POST to a then to b counts 1 then 2, b forwarding to a; a clean stop hands the actor to b at once (${store} bucket)`, async () => {
    const dir = await scratchDir("wk-cluster-");
    const moto = store === "moto" ? await startMoto() : undefined;
    const bucketUrl = moto ? `s3://${moto.bucket}/demo` : `file://${dir}/bucket`;
    const env = moto?.env;
    try {
      const [a, b] = await Promise.all([
        startClusterNode("a", dir, bucketUrl, COUNTER, { env }),
        startClusterNode("b", dir, bucketUrl, COUNTER, { env }),
      ]);
      let aStopped = false;
      try {
        const first = await request(`${a.url}/actor/counter/alice`, { method: "POST" });
        assert.deepEqual([first.status, first.body, first.node], [200, "1", "a"]);
        const second = await request(`${b.url}/actor/counter/alice`, { method: "POST" });
        assert.deepEqual([second.status, second.body, second.node], [200, "2", "a"]);

        // A clean stop releases the actor: b takes it with the next request.
        await a.stop();
        aStopped = true;
        const started = performance.now();
        const third = await request(`${b.url}/actor/counter/alice`, { method: "POST" });
        assert.deepEqual([third.status, third.body, third.node], [200, "3", "b"]);
        assert.ok(performance.now() - started < 3000, "served at once, not after a fence");
        assert.match(a.logs(), /node stopped/);
        // A release is not a lapse: the stop logs no warning or error, and says what it did.
        const stopLines = a.logs().slice(a.logs().indexOf("node stopping"));
        assert.doesNotMatch(stopLines, /^\S+ (WARN|ERROR) /m);
        assert.match(
          stopLines,
          /INFO {2}node lease given up by the clean stop: releasing the heartbeat/,
        );
        assert.match(stopLines, /INFO {2}node lease released key=nodes\/a/);

        const status = await clusterStatus(bucketUrl, env);
        assert.equal(status.code, 0, status.stderr);
        assert.match(status.stdout, /^a\s+no \(released\)/m);
        assert.match(status.stdout, /^b\s+yes/m);
      } finally {
        if (!aStopped) await a.stop();
        await b.stop();
      }
      const none = await clusterStatus(bucketUrl, env);
      assert.equal(none.code, 1, "no live node");
      assert.match(none.stdout, /^b\s+no \(released\)/m);
    } finally {
      await moto?.stop();
      await Deno.remove(dir, { recursive: true });
    }
  });
}

Deno.test("a second process with the same node id is refused, naming the first one's address", async () => {
  const dir = await scratchDir("wk-cluster-");
  const bucketUrl = `file://${dir}/bucket`;
  try {
    const first = await startClusterNode("same", dir, bucketUrl, COUNTER);
    try {
      await assert.rejects(
        () =>
          startNode([
            ...COUNTER,
            "--node-id",
            "same",
            "--cluster-plaintext",
            "accept",
            "--lease-ttl-secs",
            "3",
            "--data-dir",
            `${dir}/same-2`,
            "--bucket",
            bucketUrl,
          ]),
        (error: Error) => {
          assert.match(error.message, /exited before listening|did not listen/);
          assert.ok(error.message.includes(first.url), error.message);
          return true;
        },
      );
      // The first one still serves.
      const answer = await request(`${first.url}/actor/counter/x`, { method: "POST" });
      assert.deepEqual([answer.status, answer.node], [200, "same"]);
    } finally {
      await first.stop();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a fenced node is shown fenced, and stops at its next heartbeat write", async () => {
  const dir = await scratchDir("wk-cluster-");
  const bucketUrl = `file://${dir}/bucket`;
  try {
    const a = await startClusterNode("fenced", dir, bucketUrl, COUNTER);
    try {
      const fence = await new Deno.Command(Deno.execPath(), {
        args: ["run", "-A", "main.ts", "cluster", "fence", "fenced", "--bucket", bucketUrl],
        cwd: new URL("../../../", import.meta.url).pathname,
        stdout: "piped",
        stderr: "piped",
      }).output();
      assert.equal(fence.code, 0, new TextDecoder().decode(fence.stderr));
      // Its next write (within a period, 0.9 s) finds the fence and it stops.
      const deadline = Date.now() + 5000;
      while (!/another writer took this node's lease/.test(a.logs()) && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 100));
      }
      assert.match(a.logs(), /another writer took this node's lease/);
      // It exits by itself: no signal is sent, which would race its own stop.
      let timer: ReturnType<typeof setTimeout> | undefined;
      const status = await Promise.race([
        a.status,
        new Promise<never>((_, reject) => {
          timer = setTimeout(() => reject(new Error("serve did not exit by itself")), 15_000);
        }),
      ]).finally(() => clearTimeout(timer));
      assert.equal(status.code, 1, "serve exits with an error after losing its lease");
      // Its last words say what happened, once.
      const exit = a.logs().split("\n").filter((line) => line.startsWith("wasmkeep: "));
      assert.deepEqual(exit, [
        "wasmkeep: the node lease nodes/fenced was lost: node cli fenced it",
      ]);
      const shown = await clusterStatus(bucketUrl);
      assert.equal(shown.code, 1);
      assert.match(shown.stdout, /^fenced\s+no \(fenced\)/m);
    } finally {
      await a.stop().catch(() => {});
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("an owner alive but refusing connections: the request that finds it out gets 503, the GETs after it are kept until its next lease write, then sent as usual", async () => {
  const dir = await scratchDir("wk-cluster-");
  const bucketUrl = `file://${dir}/bucket`;
  // A port nothing listens on: b cannot open a connection to a there.
  const closed = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const deadPort = (closed.addr as Deno.NetAddr).port;
  closed.close();
  try {
    const [a, b] = await Promise.all([
      startClusterNode("a", dir, bucketUrl, COUNTER, {
        extra: ["--advertise", `http://127.0.0.1:${deadPort}`],
      }),
      startClusterNode("b", dir, bucketUrl, COUNTER),
    ]);
    try {
      const taken = await request(`${a.url}/actor/counter/shy`, { method: "POST" });
      assert.deepEqual([taken.status, taken.node], [200, "a"]);

      const first = await request(`${b.url}/actor/counter/shy`);
      assert.equal(first.status, 503);
      assert.match(first.body, /did not answer/);

      // Kept until a writes its lease again (every 0.9 s with a 3 s ttl),
      // then sent to it as usual: here it refuses again.
      const started = performance.now();
      const kept = await request(`${b.url}/actor/counter/shy`);
      const waited = performance.now() - started;
      assert.equal(kept.status, 503);
      assert.ok(waited >= 500, `kept for ${waited.toFixed(0)} ms`);
      assert.equal(
        await metric(b.url, 'wasmkeep_failover_waits_total{outcome="forwarded"}'),
        1,
      );
      // A POST is never kept.
      const post = await request(`${b.url}/actor/counter/shy`, { method: "POST" });
      assert.equal(post.status, 503);
    } finally {
      await a.stop();
      await b.stop();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
