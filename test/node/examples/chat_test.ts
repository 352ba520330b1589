/**
 * The example room (examples/chat, issue 18 item 7) through two real node
 * processes on moto: clients on different nodes share one room and see
 * every message, their own included, as it was sent and in one order; the
 * room counts and keeps them in SQLite across its hibernation and a move to
 * the other node.
 */

import assert from "node:assert/strict";
import { openSocket, type TestSocket } from "../../helpers/websocket_client.ts";
import { scratchDir, startClusterNode } from "../../../src/testing/cluster.ts";
import { startMoto } from "../../../src/testing/moto.ts";
import { CHAT_WASM, metric } from "../../../src/testing/node_process.ts";
import { until } from "../../helpers/until.ts";

const CHAT = ["--actor", `chat=${CHAT_WASM}`];

async function get(url: string): Promise<{ body: string; node: string | null }> {
  const response = await fetch(url);
  assert.equal(response.status, 200, url);
  return { body: await response.text(), node: response.headers.get("x-wasmkeep-node") };
}

/** The next `count` messages of `client`. */
async function received(client: TestSocket, count: number): Promise<(string | Uint8Array)[]> {
  const messages: (string | Uint8Array)[] = [];
  for (let i = 0; i < count; i++) messages.push(await client.next());
  return messages;
}

Deno.test("examples/chat: one room through two nodes on moto, every message to everyone in one order, counted and kept across hibernation and a move", async () => {
  const dir = await scratchDir("wk-chat-");
  const moto = await startMoto();
  const bucketUrl = `s3://${moto.bucket}/chat`;
  const options = { env: moto.env, extra: ["--idle-secs", "1"] };
  try {
    const [a, b] = await Promise.all([
      startClusterNode("a", dir, bucketUrl, CHAT, options),
      startClusterNode("b", dir, bucketUrl, CHAT, options),
    ]);
    let aStopped = false;
    try {
      assert.deepEqual(await get(`${a.url}/actor/chat/lobby`), { body: "0", node: "a" });
      const onA = await openSocket(`${a.url.replace(/^http/, "ws")}/actor/chat/lobby`);
      const onB = await openSocket(`${b.url.replace(/^http/, "ws")}/actor/chat/lobby`);
      const sent: (string | Uint8Array)[] = [];
      for (let i = 0; i < 10; i++) {
        const fromA = `a says ${i} ✓`;
        const fromB = i === 5 ? new Uint8Array([0, 1, 2, 255]) : `b says ${i}`;
        onA.socket.send(fromA);
        onB.socket.send(fromB);
        sent.push(fromA, fromB);
      }
      const [seenA, seenB] = await Promise.all([received(onA, 20), received(onB, 20)]);
      assert.deepEqual(seenA, seenB, "one order for everyone");
      const own = (seen: (string | Uint8Array)[], prefix: string) =>
        seen.filter((m) => typeof m === "string" && m.startsWith(prefix));
      assert.deepEqual(own(seenA, "a says"), sent.filter((_, i) => i % 2 === 0));
      assert.deepEqual(
        own(seenA, "b says"),
        sent.filter((m, i) => i % 2 === 1 && typeof m === "string"),
      );
      assert.deepEqual(seenA.find((m) => m instanceof Uint8Array), new Uint8Array([0, 1, 2, 255]));
      assert.deepEqual(await get(`${b.url}/actor/chat/lobby`), { body: "20", node: "a" });

      // Quiet for longer than --idle-secs: the room hibernates with both sockets open.
      await until(
        "the room to hibernate",
        async () => await metric(a.url, "wasmkeep_resident_actors") === 0,
      );
      assert.equal(await metric(a.url, "wasmkeep_websockets"), 2);
      onB.socket.send("after a nap");
      assert.deepEqual(await onA.next(), "after a nap");
      assert.deepEqual(await onB.next(), "after a nap");
      const textsSent = [...seenA.filter((m) => typeof m === "string"), "after a nap"];
      const history = await get(`${a.url}/actor/chat/lobby/history`);
      assert.deepEqual(history.body.trimEnd().split("\n"), textsSent);

      // a stops cleanly: both clients get 1012 and reconnect through b, where the room is now.
      await a.stop();
      aStopped = true;
      assert.equal((await onA.closed).code, 1012);
      assert.equal((await onB.closed).code, 1012);
      const back = await openSocket(`${b.url.replace(/^http/, "ws")}/actor/chat/lobby`);
      back.socket.send("moved");
      assert.equal(await back.next(), "moved");
      assert.deepEqual(await get(`${b.url}/actor/chat/lobby`), { body: "22", node: "b" });
      const moved = await get(`${b.url}/actor/chat/lobby/history?limit=2`);
      assert.equal(moved.body, "after a nap\nmoved\n");
      back.socket.close();
      await back.closed;
    } finally {
      await Promise.all([aStopped ? Promise.resolve() : a.stop(), b.stop()]);
    }
  } finally {
    await moto.stop();
    await Deno.remove(dir, { recursive: true });
  }
});
