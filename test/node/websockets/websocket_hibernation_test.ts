/**
 * Rooms that hibernate with their sockets open (issue 18, item 3), through
 * real node processes on one file bucket: the actor's instance dropped and
 * its ownership record released while its node keeps the sockets; a
 * message wakes it there, taking the record again; once another node took
 * it meanwhile, the first node's socket closes with 1012 at its next
 * message, and no `on-websocket-close` runs for it there.
 */

import assert from "node:assert/strict";
import { openSocket } from "../../helpers/websocket_client.ts";
import { FileBucket } from "../../../src/bucket/file.ts";
import { decodeOwnerRecord, type OwnerRecord } from "../../../src/cluster/ownership.ts";
import { scratchDir, startClusterNode } from "../../../src/testing/cluster.ts";
import { metric, type NodeProcess, TESTBED_WASM } from "../../../src/testing/node_process.ts";
import { until } from "../../helpers/until.ts";

const ACTORS = ["--actor", `testbed=${TESTBED_WASM}`];
const RECORD = "owners/default/testbed/room";

/**
 * Nodes a and b on one file bucket, hibernating idle actors after 1 s;
 * `run` gets them and a reader of the room's ownership record.
 */
async function withIdlePair(
  run: (
    a: NodeProcess,
    b: NodeProcess,
    record: () => Promise<OwnerRecord | undefined>,
  ) => Promise<void>,
): Promise<void> {
  const dir = await scratchDir("wk-ws-hib-");
  const bucketUrl = `file://${dir}/bucket`;
  const bucket = new FileBucket(`${dir}/bucket`);
  const record = async () => {
    const object = await bucket.get(RECORD);
    return object ? decodeOwnerRecord(object.body, RECORD) : undefined;
  };
  const idle = { extra: ["--idle-secs", "1"] };
  try {
    const [a, b] = await Promise.all([
      startClusterNode("a", dir, bucketUrl, ACTORS, idle),
      startClusterNode("b", dir, bucketUrl, ACTORS, idle),
    ]);
    try {
      await run(a, b, record);
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  } finally {
    await bucket.close();
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("websockets: a quiet room hibernates with its sockets open, wakes on a message, and closes with 1012 once another node took it", () =>
  withIdlePair(async (a, b, record) => {
    const socket = await openSocket(`${a.url.replace(/^http/, "ws")}/actor/testbed/room`);
    socket.socket.send("insert");
    assert.equal(await socket.next(), "inserted");
    assert.equal((await record())?.node, "a");

    // Quiet: the instance goes and the record is released; the socket stays.
    await until("the room's hibernation", async () =>
      (await record())?.state === "released" &&
      await metric(a.url, "wasmkeep_resident_actors") === 0);
    assert.equal(await metric(a.url, "wasmkeep_websockets"), 1);
    const released = await record();

    // A message wakes it on a, at a new generation, its state restored.
    socket.socket.send("count");
    assert.equal(await socket.next(), "1");
    const woken = await record();
    assert.equal(woken?.node, "a");
    assert.equal(woken?.state, "held");
    assert.ok(woken!.generation > released!.generation, "taken again at a new generation");

    // Quiet again, and a request on b takes the room there.
    await until("the second hibernation", async () => (await record())?.state === "released");
    const rows = await fetch(`${b.url}/actor/testbed/room/rows`);
    assert.equal(rows.headers.get("x-wasmkeep-node"), "b");
    assert.equal((await rows.text()).trim(), "1", "b restored what a's socket wrote");
    assert.equal((await record())?.node, "b");

    // a's socket closes at its next message, unannounced on a.
    socket.socket.send("hello?");
    const closed = await socket.closed;
    assert.equal(closed.code, 1012);
    assert.equal(closed.reason, "the actor moved to another node");
    assert.equal(a.logs().includes("websocket close"), false);
    assert.equal(await metric(a.url, "wasmkeep_websockets"), 0);
  }));

Deno.test("websockets: a socket that only listens is closed with 1012 by its node's owner sweep, a minute at most after another node took its room", () =>
  withIdlePair(async (a, b, record) => {
    const listener = await openSocket(`${a.url.replace(/^http/, "ws")}/actor/testbed/room`);
    await until("the room's hibernation", async () => (await record())?.state === "released");
    const rows = await fetch(`${b.url}/actor/testbed/room/rows`);
    assert.equal(rows.headers.get("x-wasmkeep-node"), "b");
    await rows.body?.cancel();
    const takenAt = performance.now();
    const closed = await listener.closed;
    const afterMs = performance.now() - takenAt;
    assert.equal(closed.code, 1012);
    assert.ok(afterMs <= 62_000, `closed ${afterMs} ms after b took the room`);
    assert.match(a.logs(), /closed the sockets of actors another node took/);
    assert.equal(a.logs().includes("websocket close"), false);
  }));

Deno.test("websockets: a room that went to another node and came back by a request closes its old sockets with 1012 at that take, before they are served again", () =>
  withIdlePair(async (a, b, record) => {
    const socket = await openSocket(`${a.url.replace(/^http/, "ws")}/actor/testbed/room`);
    socket.socket.send("insert");
    assert.equal(await socket.next(), "inserted");
    await until("the room's hibernation on a", async () => (await record())?.state === "released");
    // b takes the room for a request, and lets it go.
    const onB = await fetch(`${b.url}/actor/testbed/room/rows`);
    assert.equal(onB.headers.get("x-wasmkeep-node"), "b");
    await onB.body?.cancel();
    await until("the room's hibernation on b", async () => {
      const now = await record();
      return now?.node === "b" && now.state === "released";
    });
    // A request through a takes it back on a, from b's record: a's socket is stale now.
    const back = await fetch(`${a.url}/actor/testbed/room/rows`);
    assert.equal(back.headers.get("x-wasmkeep-node"), "a");
    await back.body?.cancel();
    assert.equal((await record())?.node, "a");
    // At the take itself: no message of the socket is needed (nor the minute's sweep).
    let timer: ReturnType<typeof setTimeout> | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error("the socket stayed open after the take")), 5_000);
    });
    const closed = await Promise.race([socket.closed, late]).finally(() => clearTimeout(timer));
    assert.equal(closed.code, 1012);
    assert.equal(closed.reason, "the actor moved to another node");
    assert.equal(a.logs().includes("websocket close"), false);
  }));
