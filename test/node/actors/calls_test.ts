/**
 * actors.call on one node: a call runs the callee's event and returns its
 * answer, the callee sees its caller (a client cannot forge one), internal
 * classes answer only calls, and a call that would wait on itself is
 * refused instead of deadlocking.
 */

import assert from "node:assert/strict";
import { TESTBED_WASM, withNode } from "../../../src/testing/node_process.ts";
import { request } from "../../../src/testing/cluster.ts";

/** Two classes of the testbed, one internal; one executor, so callers and callees share it. */
const ARGS = [
  "--actor",
  `testbed=${TESTBED_WASM}`,
  "--actor",
  `vault=${TESTBED_WASM}`,
  "--access",
  "vault=internal",
  "--executors",
  "1",
];

/** `/call?<target>`: the target percent-encoded once more, as the testbed decodes it. */
const call = (target: string) => `call?${encodeURIComponent(target)}`;

for (const abi of ["auto", "jco"]) {
  Deno.test(`actors.call on one node (--abi ${abi}): the callee runs and answers, sees its caller, and a client's x-wasmkeep-caller is dropped`, async () => {
    await withNode([...ARGS, "--abi", abi], async (node) => {
      // a calls b (same executor: a's event waits while b's runs).
      let answer = await request(`${node.url}/actor/testbed/a/${call("testbed/b/insert?from-a")}`, {
        method: "POST",
      });
      assert.deepEqual([answer.status, answer.body], [200, "1"]);
      answer = await request(`${node.url}/actor/testbed/b/rows`);
      assert.deepEqual([answer.status, answer.body], [200, "1"]);
      // The method and body travel with the call.
      answer = await request(`${node.url}/actor/testbed/a/${call("testbed/b/echo?q=1")}`, {
        method: "PUT",
        body: "payload",
      });
      assert.deepEqual([answer.status, answer.body], [200, "PUT\n/echo\nq=1\npayload"]);
      // The callee sees who called it, and the chain is empty for a first call.
      answer = await request(`${node.url}/actor/testbed/a/${call("testbed/b/caller")}`);
      assert.deepEqual([answer.status, answer.body], [200, "default/testbed/a\n-"]);
      // Two deep: c sees b as its caller and a waiting behind it.
      answer = await request(
        `${node.url}/actor/testbed/a/${call(`testbed/b/${call("testbed/c/caller")}`)}`,
      );
      assert.deepEqual([answer.status, answer.body], [200, "default/testbed/b\ndefault/testbed/a"]);
      // A client cannot pass for an actor.
      answer = await request(`${node.url}/actor/testbed/b/caller`, {
        headers: {
          "x-wasmkeep-caller": "default/vault/x",
          "x-wasmkeep-chain": "default/testbed/z",
        },
      });
      assert.deepEqual([answer.status, answer.body], [200, "-\n-"]);
    });
  });
}

Deno.test("actors.call on one node: an internal class answers 403 to clients, forged caller or not, and works by call", async () => {
  await withNode(ARGS, async (node) => {
    let answer = await request(`${node.url}/actor/vault/x/insert?secret`, { method: "POST" });
    assert.equal(answer.status, 403);
    assert.match(answer.body, /actor class 'vault' is internal: only actors reach it/);
    answer = await request(`${node.url}/actor/vault/x/rows`, {
      headers: { "x-wasmkeep-caller": "default/testbed/a" },
    });
    assert.equal(answer.status, 403);
    answer = await request(`${node.url}/actor/testbed/a/${call("vault/x/insert?by-call")}`, {
      method: "POST",
    });
    assert.deepEqual([answer.status, answer.body], [200, "1"]);
    answer = await request(`${node.url}/actor/testbed/a/${call("vault/x/rows")}`);
    assert.deepEqual([answer.status, answer.body], [200, "1"]);
  });
});

Deno.test("actors.call on one node: cycles are refused at once, naming the chain; unknown classes and bad names are errors", async () => {
  await withNode(ARGS, async (node) => {
    const started = performance.now();
    // a -> b -> a: b's call back into a (waiting on b) is refused.
    let answer = await request(
      `${node.url}/actor/testbed/a/${call(`testbed/b/${call("testbed/a/rows")}`)}`,
    );
    assert.equal(answer.status, 502);
    assert.match(
      answer.body,
      /^call failed: call cycle refused: default\/testbed\/a -> default\/testbed\/b -> default\/testbed\/a \(/,
    );
    // a -> a.
    answer = await request(`${node.url}/actor/testbed/a/${call("testbed/a/rows")}`);
    assert.equal(answer.status, 502);
    assert.match(answer.body, /call cycle refused: default\/testbed\/a -> default\/testbed\/a/);
    // Refused, not timed out: well under the 30 s a deadlock would take.
    assert.ok(performance.now() - started < 20_000);
    answer = await request(`${node.url}/actor/testbed/a/${call("nosuch/x")}`);
    assert.deepEqual([answer.status, answer.body], [
      502,
      "call failed: no actor class 'nosuch' on this node",
    ]);
    answer = await request(`${node.url}/actor/testbed/a/${call("testbed/..")}`);
    assert.equal(answer.status, 502);
    assert.match(answer.body, /call failed: bad actor name/);
    // The actors are still fine after all that.
    answer = await request(`${node.url}/actor/testbed/a/rows`);
    assert.deepEqual([answer.status, answer.body], [200, "0"]);
  });
});
