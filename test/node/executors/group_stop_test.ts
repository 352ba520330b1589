/**
 * A node and its executors signalled as one process group, as systemd's
 * `KillMode=control-group` and Ctrl-C in a terminal do: the executors
 * outlive the node's clean stop, so every answered write is uploaded before
 * the node releases its actors; and a node killed outright leaves no
 * executor running, and nothing that the next start does not clean.
 */

import assert from "node:assert/strict";
import {
  COUNTER_WASM,
  type NodeProcess,
  startNode,
  TESTBED_WASM,
} from "../../../src/testing/node_process.ts";
import { nodeFlags, scratchDir } from "../../../src/testing/cluster.ts";
import { exists } from "../../helpers/exists.ts";
import { processState } from "../../../src/os/process_alive.ts";

const ACTORS = 20;
const CLIENTS = 8;
/** How long the clients write before the group is signalled. */
const LOAD_MS = 1500;

function startGroupNode(id: string, dir: string, actors: string[]): Promise<NodeProcess> {
  return startNode(
    [...actors, ...nodeFlags(id), "--data-dir", `${dir}/${id}`, "--bucket", `file://${dir}/bucket`],
    {},
    { ownProcessGroup: true },
  );
}

/** The counts of every actor, as `node` serves them (restoring them first). */
async function counts(node: NodeProcess): Promise<number[]> {
  return await Promise.all(Array.from({ length: ACTORS }, async (_, i) => {
    const response = await fetch(`${node.url}/actor/counter/c${i}`);
    const body = (await response.text()).trim();
    assert.equal(response.status, 200, body);
    return Number(body);
  }));
}

/**
 * Clients POSTing to the actors until the node stops answering; resolves to
 * the highest count answered per actor.
 */
function writeUntilGone(node: NodeProcess, stop: AbortSignal): Promise<number[]> {
  const answered = new Array<number>(ACTORS).fill(0);
  const client = async (index: number) => {
    for (let n = index; !stop.aborted; n += CLIENTS) {
      const actor = n % ACTORS;
      try {
        const response = await fetch(`${node.url}/actor/counter/c${actor}`, { method: "POST" });
        const body = (await response.text()).trim();
        if (response.status === 200) answered[actor] = Math.max(answered[actor], Number(body));
      } catch {
        // The node stopped listening.
        return;
      }
    }
  };
  return Promise.all(Array.from({ length: CLIENTS }, (_, i) => client(i))).then(() => answered);
}

for (const signal of ["SIGTERM", "SIGINT"] as const) {
  Deno.test(`${signal} to the process group of a node under writes: the next node restores every answered write, three rounds in a row, and the stop logs no ERROR`, async () => {
    const dir = await scratchDir("wk-group-stop-");
    const actors = ["--actor", `counter=${COUNTER_WASM}`];
    let previous: number[] = new Array(ACTORS).fill(0);
    try {
      for (let round = 0; round < 3; round++) {
        const node = await startGroupNode(`n${round}`, dir, actors);
        try {
          const restored = await counts(node);
          for (let i = 0; i < ACTORS; i++) {
            assert.ok(
              restored[i] >= previous[i],
              `round ${round}: c${i} restored at ${restored[i]}, ${previous[i]} had been answered`,
            );
          }
          const stop = new AbortController();
          const writing = writeUntilGone(node, stop.signal);
          await new Promise((resolve) => setTimeout(resolve, LOAD_MS));
          node.signalGroup(signal);
          const status = await node.status;
          stop.abort();
          previous = await writing;
          assert.ok(previous.some((count) => count > restored[0]), "no write was answered");
          assert.equal(status.code, 0, node.logs());
          const stopLogs = node.logs().slice(node.logs().indexOf("node stopping"));
          assert.doesNotMatch(stopLogs, /^\S+ ERROR /m, stopLogs);
          assert.match(stopLogs, /node stopped/);
        } finally {
          await node.kill();
        }
      }
      const last = await startGroupNode("n3", dir, actors);
      try {
        const restored = await counts(last);
        for (let i = 0; i < ACTORS; i++) {
          assert.ok(restored[i] >= previous[i], `c${i}: ${restored[i]} < ${previous[i]}`);
        }
      } finally {
        await last.stop();
      }
    } finally {
      await Deno.remove(dir, { recursive: true });
    }
  });
}

Deno.test("SIGKILL of a node: its executors exit by themselves, a looping one too, and the next start removes what it left", async () => {
  const dir = await scratchDir("wk-group-kill-");
  // Two executors, whatever the cores: counter/x and testbed/spin are on
  // different shards of two, and an executor starts on its shard's first event.
  const actors = [
    "--actor",
    `counter=${COUNTER_WASM}`,
    "--actor",
    `testbed=${TESTBED_WASM}`,
    "--executors",
    "2",
  ];
  try {
    const node = await startGroupNode("a", dir, actors);
    let executors: number[];
    let socketDir: string | undefined;
    try {
      assert.equal((await fetch(`${node.url}/actor/counter/x`, { method: "POST" })).status, 200);
      // One executor busy in a loop: it never reads its socket's end.
      const looping = fetch(`${node.url}/actor/testbed/spin/loop`).then((r) => r.body?.cancel())
        .catch(() => {});
      await new Promise((resolve) => setTimeout(resolve, 500));
      executors = node.descendants();
      assert.ok(executors.length >= 2, `executors: ${executors}`);
      socketDir = executorSocketDir(executors[0]);
      assert.ok(socketDir, "the executors' socket folder");
      await node.kill();
      await looping;
    } finally {
      await node.kill();
    }
    const deadline = Date.now() + 3000;
    while (executors.some((pid) => processState(pid) !== "gone") && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    assert.deepEqual(executors.filter((pid) => processState(pid) !== "gone"), []);

    // What an upload under way at the kill leaves (named after its executor).
    const wal = `${dir}/bucket/actors/default/counter/x/wal`;
    const temp = `${wal}/0000000000000099.ltx.obj.tmp-${executors[0]}-0011223344556677`;
    const lock = `${wal}/0000000000000099.ltx.obj.lock`;
    await Deno.writeTextFile(temp, "wk1 torn");
    await Deno.writeTextFile(lock, `${executors[0]}\n`);
    assert.ok(socketDir && exists(socketDir), "the killed node left its socket folder");

    const next = await startGroupNode("b", dir, actors);
    try {
      const deadline = Date.now() + 10_000;
      while ((exists(temp) || exists(lock) || exists(socketDir!)) && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      assert.deepEqual([exists(temp), exists(lock), exists(socketDir!)], [false, false, false]);
      assert.match(next.logs(), /removed what killed writers left in the file bucket/);
      assert.match(next.logs(), /removed executor socket folders of killed nodes/);
      const answer = await fetch(`${next.url}/actor/counter/x`);
      assert.deepEqual([answer.status, (await answer.text()).trim()], [200, "1"]);
    } finally {
      await next.stop();
    }
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

/** The socket folder an executor was started with (the folder of its argument). */
function executorSocketDir(pid: number): string | undefined {
  const args = Deno.readTextFileSync(`/proc/${pid}/cmdline`).split("\0");
  const socket = args.find((arg) => arg.endsWith(".sock"));
  return socket?.slice(0, socket.lastIndexOf("/"));
}
