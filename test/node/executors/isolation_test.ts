import assert from "node:assert/strict";
import { shardOf } from "../../../src/actors/executor_pool.ts";
import { processTreeCpuTicks, TESTBED_WASM, withNode } from "../../../src/testing/node_process.ts";

function nameOnShard(shard: number, prefix: string): string {
  for (let i = 0;; i++) {
    if (shardOf(`default/testbed/${prefix}${i}`, 2) === shard) return `${prefix}${i}`;
  }
}

async function text(response: Response): Promise<string> {
  return (await response.text()).trim();
}

Deno.test("a trap answers 500 with a logged error id, rolls back, and the next request works", async () => {
  await withNode(["--actor", `testbed=${TESTBED_WASM}`], async (node) => {
    const actor = `${node.url}/actor/testbed/t1`;
    assert.equal((await fetch(`${actor}/insert?one`)).status, 200);
    const trapped = await fetch(`${actor}/trap`);
    assert.equal(trapped.status, 500);
    const message = await text(trapped);
    const id = message.match(/error id ([0-9a-f]{12})/)?.[1];
    assert.ok(id, message);
    assert.match(node.logs(), new RegExp(`error_id=${id}`));

    assert.equal(await text(await fetch(`${actor}/rows`)), "1");
    assert.equal((await fetch(`${actor}/tx-trap`)).status, 500);
    assert.equal(
      await text(await fetch(`${actor}/rows`)),
      "1",
      "the trapped transaction was rolled back",
    );

    const open = await fetch(`${actor}/open-tx`);
    assert.equal(open.status, 500);
    assert.match(await text(open), /transaction open; it was rolled back/);
    assert.equal(await text(await fetch(`${actor}/rows`)), "1");
  });
});

Deno.test("an endless loop gets 504 while health and other actors keep answering", async () => {
  await withNode([
    "--actor",
    `testbed=${TESTBED_WASM}`,
    "--executors",
    "2",
    "--event-timeout-secs",
    "2",
  ], async (node) => {
    const looper = nameOnShard(0, "loop");
    const neighbour = nameOnShard(0, "same");
    const stranger = nameOnShard(1, "other");
    // Wake the neighbour first so its instance is lost with the executor.
    assert.equal((await fetch(`${node.url}/actor/testbed/${neighbour}/insert?x`)).status, 200);
    // And the stranger, whose executor starts on its shard's first event.
    assert.equal((await fetch(`${node.url}/actor/testbed/${stranger}/rows`)).status, 200);
    const started = performance.now();
    const loop = fetch(`${node.url}/actor/testbed/${looper}/loop`);
    await new Promise((r) => setTimeout(r, 300));
    // Queued behind the loop on the same worker: it must not be lost.
    const queued = fetch(`${node.url}/actor/testbed/${neighbour}/rows`);

    const health = await fetch(`${node.url}/_wasmkeep/health`);
    assert.equal(health.status, 200);
    await health.body?.cancel();
    const other = await fetch(`${node.url}/actor/testbed/${stranger}/insert?y`);
    assert.equal(other.status, 200);
    await other.body?.cancel();
    assert.ok(
      performance.now() - started < 1500,
      "health and another actor answered during the loop",
    );

    const timedOut = await loop;
    assert.equal(timedOut.status, 504);
    assert.match(await text(timedOut), /did not finish its event within 2 s/);
    assert.ok(performance.now() - started >= 1900);

    const neighbourAnswer = await queued;
    assert.equal(neighbourAnswer.status, 200);
    assert.equal(await text(neighbourAnswer), "1");

    const again = await fetch(`${node.url}/actor/testbed/${looper}/rows`);
    assert.equal(again.status, 200);
    assert.equal(await text(again), "0");
    assert.match(node.logs(), /replacing its executor/);

    // The loop is over, not just abandoned: the node and its executors sit
    // idle (a terminated Deno Worker would keep spinning on a core).
    const before = processTreeCpuTicks(node.pid);
    await new Promise((r) => setTimeout(r, 1000));
    const used = processTreeCpuTicks(node.pid) - before;
    assert.ok(used < 30, `the idle node used ${used} ticks of CPU in one second`);
  });
});

Deno.test("a full queue answers 503 with Retry-After, and a stop lets the event under way end", async () => {
  await withNode([
    "--actor",
    `testbed=${TESTBED_WASM}`,
    "--event-timeout-secs",
    "2",
    "--max-queued-events",
    "2",
  ], async (node) => {
    const loop = fetch(`${node.url}/actor/testbed/busy/loop`);
    await new Promise((r) => setTimeout(r, 300));
    const queued = [
      fetch(`${node.url}/actor/testbed/busy/rows`),
      fetch(`${node.url}/actor/testbed/busy/rows`),
    ];
    await new Promise((r) => setTimeout(r, 100));
    const refused = await fetch(`${node.url}/actor/testbed/busy/rows`);
    assert.equal(refused.status, 503);
    assert.equal(refused.headers.get("retry-after"), "1");
    assert.match(await text(refused), /the actor has 2 events waiting; retry/);

    // The stop waits for the event under way (ended by its 504) and the
    // queued ones, then exits cleanly.
    const stopped = node.stop();
    assert.equal((await loop).status, 504);
    for (const response of await Promise.all(queued)) {
      assert.equal(response.status, 200);
      assert.equal(await text(response), "0");
    }
    assert.equal((await stopped).code, 0);
    assert.match(node.logs(), /node stopped/);
  });
});

function childPids(pid: number): number[] {
  const children: number[] = [];
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      const stat = Deno.readTextFileSync(`/proc/${entry.name}/stat`);
      if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === pid) {
        children.push(Number(entry.name));
      }
    } catch {
      // Exited while we looked.
    }
  }
  return children;
}

Deno.test("an executor killed from outside is replaced, and its actors answer again with their state", async () => {
  await withNode(["--actor", `testbed=${TESTBED_WASM}`, "--executors", "2"], async (node) => {
    const names = [nameOnShard(0, "a"), nameOnShard(1, "b")];
    for (const name of names) {
      assert.equal((await fetch(`${node.url}/actor/testbed/${name}/insert?x`)).status, 200);
    }
    const executors = childPids(node.pid);
    assert.equal(executors.length, 2, "one process per executor");
    for (const pid of executors) Deno.kill(pid, "SIGKILL");
    for (const name of names) {
      let answer = "";
      for (let i = 0; i < 50 && answer !== "1"; i++) {
        const response = await fetch(`${node.url}/actor/testbed/${name}/rows`);
        answer = await text(response);
        if (answer !== "1") await new Promise((r) => setTimeout(r, 100));
      }
      assert.equal(answer, "1", `${name} answers from its database after its executor died`);
    }
    assert.match(node.logs(), /executor exited/);
    const replaced = childPids(node.pid);
    assert.equal(replaced.length, 2);
    assert.ok(
      replaced.every((pid) => !executors.includes(pid)),
      "both executors are new processes",
    );
  });
});

Deno.test("lists an actor hands the host are bounded: elements that share one string fail the event, not the executor", async () => {
  await withNode(["--actor", `testbed=${TESTBED_WASM}`, "--executors", "1"], async (node) => {
    const actor = `${node.url}/actor/testbed/hostile`;
    const bystander = `${node.url}/actor/testbed/bystander`;
    assert.equal((await fetch(`${bystander}/insert?before`)).status, 200);
    for (
      const [path, reason] of [
        // 100 headers sharing one 1 MiB value: 100 MiB once lifted.
        ["/aliased-headers?1024,100", "strings and bytes come to over"],
        // 70,000 empty headers: over the element bound.
        ["/aliased-headers?0,70000", "elements, over the 65536 allowed"],
        // 100 statement parameters sharing one 1 MiB string.
        ["/aliased-params?1024,100", "strings and bytes come to over"],
      ] as const
    ) {
      const response = await fetch(`${actor}${path}`);
      assert.equal(response.status, 500, path);
      const id = (await text(response)).match(/error id ([0-9a-f]{12})/)?.[1];
      assert.ok(id, path);
      const line = node.logs().split("\n").find((l) => l.includes(`error_id=${id}`)) ?? "";
      assert.ok(line.includes(reason), `${path}: ${line}`);
    }
    // Within the bounds the same lists go through.
    const fine = await fetch(`${actor}/aliased-headers?1,10`);
    assert.equal(fine.status, 200);
    assert.equal(fine.headers.get("x-aliased")?.length, 10 * 1024 + 9 * 2);
    await fine.body?.cancel();
    // The executor lived: the other actor's instance is still there.
    assert.equal(await text(await fetch(`${bystander}/rows`)), "1");
    assert.doesNotMatch(node.logs(), /replacing its executor|executor .*exited/);
  });
});
