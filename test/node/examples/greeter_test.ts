/**
 * The example greeter (examples/greeter) through real node processes: with
 * `--config greeter=FILE` it answers the file's GREETING and its own name;
 * without a config it answers 500 and says what is missing.
 */

import assert from "node:assert/strict";
import { GREETER_WASM, withNode } from "../../../src/testing/node_process.ts";

const GREETER = ["--actor", `greeter=${GREETER_WASM}`];

Deno.test("examples/greeter: GET answers the configured GREETING, a comma, a space and the actor's name", async () => {
  const dir = await Deno.makeTempDir({ prefix: "wk-greeter-" });
  try {
    const env = `${dir}/greeting.env`;
    await Deno.writeTextFile(env, "GREETING=hello\n");
    await withNode([...GREETER, "--config", `greeter=${env}`], async (node) => {
      const ann = await fetch(`${node.url}/actor/greeter/ann`);
      assert.equal(ann.status, 200);
      assert.match(ann.headers.get("content-type") ?? "", /^text\/plain/);
      assert.equal(await ann.text(), "hello, ann");

      const bob = await fetch(`${node.url}/actor/greeter/bob`);
      assert.deepEqual([bob.status, await bob.text()], [200, "hello, bob"]);

      const head = await fetch(`${node.url}/actor/greeter/ann`, { method: "HEAD" });
      assert.deepEqual([head.status, await head.text()], [200, ""]);

      const post = await fetch(`${node.url}/actor/greeter/ann`, { method: "POST" });
      assert.equal(post.status, 405);
      assert.equal(post.headers.get("allow"), "GET, HEAD");
      await post.body?.cancel();
    });
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("examples/greeter: without a GREETING it answers 500 GREETING is not set", async () => {
  await withNode(GREETER, async (node) => {
    const ann = await fetch(`${node.url}/actor/greeter/ann`);
    assert.equal(ann.status, 500);
    assert.equal(await ann.text(), "GREETING is not set");
  });
});
