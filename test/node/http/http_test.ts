import assert from "node:assert/strict";
import {
  COUNTER_WASM,
  startNode,
  TESTBED_WASM,
  withNode,
} from "../../../src/testing/node_process.ts";

async function oneLine(response: Response): Promise<string> {
  const body = await response.text();
  assert.match(body, /^[^\n]+\n$/, `a one-line message, got ${JSON.stringify(body)}`);
  return body.trim();
}

Deno.test("bad requests get their status and a one-line message", async () => {
  await withNode([
    "--actor",
    `counter=${COUNTER_WASM}`,
    "--node-id",
    "edge",
    "--max-body-bytes",
    "16",
  ], async (node) => {
    const get = (path: string, init?: RequestInit) => fetch(`${node.url}${path}`, init);
    const health = await get("/_wasmkeep/health");
    assert.equal(health.status, 200);
    assert.equal(await oneLine(health), "ok");
    const ready = await get("/_wasmkeep/ready");
    assert.equal(ready.status, 200);
    assert.equal(await oneLine(ready), "ready");

    // fetch's URL parsing already turns /actor/counter/%2E%2E into /actor/,
    // so a bare ".." never reaches an actor: the path names no class, a bad
    // request (item 7 of issue 28: it was a 404 "no actor class ''").
    const dotted = await get("/actor/counter/%2E%2E");
    assert.equal(dotted.status, 400);
    assert.match(await oneLine(dotted), /^bad actor class: the path names no class/);

    const unknown = await get("/actor/nosuch/a");
    assert.equal(unknown.status, 404);
    assert.equal(unknown.headers.get("x-wasmkeep-node"), "edge");
    assert.equal(await oneLine(unknown), "no actor class 'nosuch' on this node");

    for (
      const [path, reason] of [
        ["/actor/counter/a%2E%2Eb", /must not contain '\.\.'/],
        ["/actor/counter/a%01b", /control characters/],
        ["/actor/counter/a%C2%85b", /control characters/],
        ["/actor/counter/", /the name is empty/],
        [`/actor/counter/${"x".repeat(257)}`, /longer than 256 bytes/],
        ["/actor/counter/a%2Fb", /must not contain '\/'/],
        ["/actor/counter/%E0%A4%A", /percent-encoding/],
      ] as const
    ) {
      const response = await get(path);
      assert.equal(response.status, 400, path);
      assert.match(await oneLine(response), reason);
    }

    const big = await get("/actor/counter/a", { method: "POST", body: "x".repeat(17) });
    assert.equal(big.status, 413);
    assert.equal(await oneLine(big), "the request body is larger than 16 bytes");
    const fits = await get("/actor/counter/a", { method: "POST", body: "x".repeat(16) });
    assert.equal(fits.status, 200);
    await fits.body?.cancel();

    const chunked = await get("/actor/counter/a", {
      method: "POST",
      body: new ReadableStream({
        start(controller) {
          for (let i = 0; i < 4; i++) controller.enqueue(new TextEncoder().encode("xxxxxx"));
          controller.close();
        },
      }),
    });
    assert.equal(chunked.status, 413, "a body without a length is counted as it streams");
    await chunked.body?.cancel();

    const elsewhere = await get("/somewhere");
    assert.equal(elsewhere.status, 404);
    await elsewhere.body?.cancel();

    const method = await get("/actor/counter/a", { method: "DELETE" });
    assert.equal(method.status, 405, "the actor's own status is passed through");
    await method.body?.cancel();
  });
});

Deno.test("under an open-file limit of 1,024 a node serves actors, with fewer requests at once", async () => {
  const dir = await Deno.makeTempDir();
  const node = await startNode(["--actor", `testbed=${TESTBED_WASM}`, "--data-dir", dir], {}, {
    openFileLimit: 1024,
  });
  try {
    const response = await fetch(`${node.url}/actor/testbed/a/rows`);
    assert.equal(response.status, 200, await response.text());
    assert.match(
      node.logs(),
      /--max-connections lowered to fit the open-file limit.*max_connections=512/,
    );
  } finally {
    await node.stop();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("--max-connections bounds a standalone node's requests at once", async () => {
  await withNode([
    "--actor",
    `testbed=${TESTBED_WASM}`,
    "--max-connections",
    "1",
    "--event-timeout-secs",
    "2",
  ], async (node) => {
    const loop = fetch(`${node.url}/actor/testbed/looper/loop`);
    await new Promise((r) => setTimeout(r, 300));
    const second = await fetch(`${node.url}/actor/testbed/other/rows`);
    assert.equal(second.status, 503);
    assert.match(await oneLine(second), /serves 1 requests at once \(--max-connections\)/);
    assert.equal((await loop).status, 504);
    await (await loop).body?.cancel();
    assert.equal((await fetch(`${node.url}/actor/testbed/other/rows`)).status, 200);
  });
});

Deno.test("a request whose body is still arriving holds its place among --max-connections", async () => {
  await withNode(["--actor", `testbed=${TESTBED_WASM}`, "--max-connections", "1"], async (node) => {
    const { hostname, port } = new URL(node.url);
    const slow = await Deno.connect({ hostname, port: Number(port) });
    try {
      // Headers and one byte of a 100-byte body; the rest never comes.
      await slow.write(
        new TextEncoder().encode(
          `POST /actor/testbed/slow/insert?x HTTP/1.1\r\nhost: ${hostname}\r\ncontent-length: 100\r\n\r\nx`,
        ),
      );
      await new Promise((r) => setTimeout(r, 300));
      const other = await fetch(`${node.url}/actor/testbed/other/rows`);
      assert.equal(other.status, 503);
      assert.match(await oneLine(other), /serves 1 requests at once/);
    } finally {
      slow.close();
    }
    // Its place is given back once that client is gone.
    await new Promise((r) => setTimeout(r, 300));
    assert.equal((await fetch(`${node.url}/actor/testbed/other/rows`)).status, 200);
  });
});
