/**
 * WebSockets relayed to the actor's owner from any node (issue 18, item 2;
 * issue 17's relayed upgrade through a second node), through real node
 * processes on one file bucket: over the cluster listeners (mutual TLS) and
 * plain in accept mode. Clients on different nodes share one room; a
 * relay is cut once the owner stops trusting the relaying node.
 */

import assert from "node:assert/strict";
import { openSocket } from "../../helpers/websocket_client.ts";
import { scratchDir, startClusterNode, startTlsClusterNode } from "../../../src/testing/cluster.ts";
import { metric, runWasmkeep, TESTBED_WASM } from "../../../src/testing/node_process.ts";

const TESTBED = ["--actor", `testbed=${TESTBED_WASM}`];

const wsOf = (url: string) => url.replace(/^http/, "ws");

async function text(url: string): Promise<{ status: number; body: string; node: string | null }> {
  const response = await fetch(url);
  return {
    status: response.status,
    body: (await response.text()).trim(),
    node: response.headers.get("x-wasmkeep-node"),
  };
}

Deno.test("relayed websockets over mutual TLS: a client on another node shares the owner's room, and is cut once its node is fenced", async () => {
  const dir = await scratchDir("wk-wsr-");
  const bucketUrl = `file://${dir}/bucket`;
  try {
    const [a, b] = await Promise.all([
      startTlsClusterNode("a", dir, bucketUrl, TESTBED),
      startTlsClusterNode("b", dir, bucketUrl, TESTBED),
    ]);
    try {
      // The room lives on a.
      assert.equal((await text(`${a.url}/actor/testbed/room/rows`)).node, "a");
      const far = await openSocket(`${wsOf(b.url)}/actor/testbed/room`);
      const near = await openSocket(`${wsOf(a.url)}/actor/testbed/room`);
      far.socket.send("hello from b");
      assert.equal(await far.next(), "hello from b", "echoed by the actor on a, through b");
      near.socket.send("count");
      assert.equal(await near.next(), "2", "one room: both sockets are the actor's, on a");
      // A request through b runs on a and reaches both clients.
      const sent = await text(`${b.url}/actor/testbed/room/ws-send?news`);
      assert.deepEqual(sent, { status: 200, body: "sent 2", node: "a" });
      assert.equal(await far.next(), "news");
      assert.equal(await near.next(), "news");
      assert.match(a.logs(), /websocket open \//);
      assert.equal(await metric(b.url, "wasmkeep_websocket_relays_total"), 1);
      assert.equal(await metric(b.url, "wasmkeep_relays"), 1);
      assert.equal(await metric(b.url, "wasmkeep_websockets"), 0, "b holds no actor socket");
      assert.equal(await metric(a.url, "wasmkeep_websockets"), 2);

      // b's heartbeat fenced: a stops trusting b at its next listing and cuts b's connections.
      const fencedAt = performance.now();
      const fenced = await runWasmkeep(["cluster", "fence", "b", "--bucket", bucketUrl]);
      assert.equal(fenced.code, 0, fenced.stderr);
      const cut = await far.closed;
      const afterMs = cut.at - fencedAt;
      console.log(`relayed socket cut ${Math.round(afterMs)} ms after b was fenced`);
      // A listing a period (1 s with ttl 3 s) at most after the fence, then the 500 ms.
      assert.ok(afterMs < 2_500, `cut ${afterMs} ms after the fence`);
      // Whichever came first cut it: a's trust sweep (its listing saw b fenced: the
      // in-process test of test/http/upgrade_relay_test.ts times that path alone), or b
      // itself, stopping at its next heartbeat write, cutting its relays with 1012.
      assert.equal(cut.code, 1012);
      // The owner's own client is untouched.
      near.socket.send("still here");
      assert.equal(await near.next(), "still here");
      near.socket.close();
      await near.closed;
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("relayed websockets in plain accept mode: through the owner's client port, and cut with 1012 once the owner's heartbeat is no longer live", async () => {
  const dir = await scratchDir("wk-wsr-");
  const bucketUrl = `file://${dir}/bucket`;
  try {
    const [a, b] = await Promise.all([
      startClusterNode("a", dir, bucketUrl, TESTBED),
      startClusterNode("b", dir, bucketUrl, TESTBED),
    ]);
    try {
      assert.equal((await text(`${a.url}/actor/testbed/room/rows`)).node, "a");
      const far = await openSocket(`${wsOf(b.url)}/actor/testbed/room`);
      far.socket.send(JSON.stringify({ hello: "plain" }));
      assert.equal(await far.next(), JSON.stringify({ hello: "plain" }));
      assert.equal((await text(`${a.url}/actor/testbed/room/ws`)).body, "1");
      far.socket.send("close");
      assert.equal((await far.closed).code, 4000, "the actor's close code comes through b");

      // The owner freezes: its connection to b stays open, silent. b cuts the
      // relay once a's heartbeat is no longer live (ttl 3 s and the skew after
      // its last write), not never.
      const silent = await openSocket(`${wsOf(b.url)}/actor/testbed/room`);
      silent.socket.send("count");
      assert.equal(await silent.next(), "1");
      const frozenAt = performance.now();
      a.signalTree("SIGSTOP");
      try {
        const cut = await silent.closed;
        const afterMs = cut.at - frozenAt;
        console.log(`the plain relay was cut ${Math.round(afterMs)} ms after its owner froze`);
        assert.equal(cut.code, 1012);
        // a's last heartbeat was at most a period (0.9 s) old at the freeze; b sees it
        // stale at the ttl (3 s) after it, and cuts at its next sweep.
        assert.ok(afterMs > 1_500 && afterMs < 8_000, `cut ${afterMs} ms after the freeze`);
        assert.match(b.logs(), /cut relays to peers no longer trusted/);
      } finally {
        a.signalTree("SIGCONT");
      }
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("a SIGKILL of the owner: the socket relayed through b closes with 1012, and an upgrade kept by the failover wait is answered 101 by b once it took the room", async () => {
  const dir = await scratchDir("wk-wsr-");
  const bucketUrl = `file://${dir}/bucket`;
  try {
    // The default ttl (10 s): the spec's timings.
    const [a, b] = await Promise.all([
      startClusterNode("a", dir, bucketUrl, TESTBED, { leaseTtlSecs: 10 }),
      startClusterNode("b", dir, bucketUrl, TESTBED, { leaseTtlSecs: 10 }),
    ]);
    try {
      const first = await openSocket(`${wsOf(a.url)}/actor/testbed/room`);
      const relayed = await openSocket(`${wsOf(b.url)}/actor/testbed/room`);
      first.socket.send("insert");
      assert.equal(await first.next(), "inserted");
      // Durable, and with it the socket's write before it: b restores both.
      assert.equal((await text(`${a.url}/actor/testbed/room/durable`)).body, "ok");
      await a.killTree();
      const killedAt = performance.now();
      // The socket b relayed to a closes with 1012: its client reconnects.
      assert.equal((await relayed.closed).code, 1012);
      // Out of b's view (10 s after a's last write): the upgrade is kept, not refused.
      await new Promise((resolve) => setTimeout(resolve, 11_000));
      const kept = await openSocket(`${wsOf(b.url)}/actor/testbed/room`);
      const openedAfter = (performance.now() - killedAt) / 1000;
      assert.ok(
        openedAfter >= 12 && openedAfter <= 23,
        `opened ${openedAfter.toFixed(1)} s after the kill`,
      );
      kept.socket.send("count");
      assert.equal(await kept.next(), "1", "the room runs on b now");
      assert.equal((await text(`${b.url}/actor/testbed/room/rows`)).body, "2", "with a's writes");
      assert.equal(await metric(b.url, 'wasmkeep_failover_waits_total{outcome="served"}'), 1);
      kept.socket.close();
      await kept.closed;
    } finally {
      await a.kill().catch(() => {});
      await b.stop();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("one room across two nodes: every client sees every message in one order; a SIGTERM of the owner closes with 1012, and clients reconnecting through any node find the room with its history", async () => {
  const dir = await scratchDir("wk-wsr-");
  const bucketUrl = `file://${dir}/bucket`;
  try {
    const [a, b] = await Promise.all([
      startTlsClusterNode("a", dir, bucketUrl, TESTBED),
      startTlsClusterNode("b", dir, bucketUrl, TESTBED),
    ]);
    let stopped = false;
    try {
      assert.equal((await text(`${a.url}/actor/testbed/room/rows`)).node, "a");
      const onA = await openSocket(`${wsOf(a.url)}/actor/testbed/room`);
      const onB = await openSocket(`${wsOf(b.url)}/actor/testbed/room`);
      // Both send at once; the room broadcasts each message to everyone, one event at a time.
      for (let i = 0; i < 20; i++) {
        onA.socket.send(`all:a${i}`);
        onB.socket.send(`all:b${i}`);
      }
      const seen = async (client: typeof onA) => {
        const messages: string[] = [];
        for (let i = 0; i < 40; i++) messages.push(String(await client.next()));
        return messages;
      };
      const [fromA, fromB] = await Promise.all([seen(onA), seen(onB)]);
      assert.deepEqual(fromA, fromB, "one order for everyone");
      for (const who of ["a", "b"]) {
        const own = fromA.filter((m) => m.startsWith(who));
        assert.deepEqual(
          own,
          Array.from({ length: 20 }, (_, i) => `${who}${i}`),
          `${who}'s in order`,
        );
      }
      onA.socket.send("insert");
      assert.equal(await onA.next(), "inserted");

      // The owner stops cleanly: its own client and the one relayed through b get 1012.
      await a.stop();
      stopped = true;
      assert.equal((await onA.closed).code, 1012);
      assert.equal((await onB.closed).code, 1012);
      // Reconnecting through b: the room runs there now, with what it had.
      const again = await openSocket(`${wsOf(b.url)}/actor/testbed/room`);
      again.socket.send("count");
      assert.equal(await again.next(), "1");
      assert.equal((await text(`${b.url}/actor/testbed/room/rows`)).body, "1");
      assert.equal((await text(`${b.url}/actor/testbed/room/rows`)).node, "b");
      again.socket.close();
      await again.closed;
    } finally {
      await Promise.all([stopped ? Promise.resolve() : a.stop(), b.stop()]);
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});
