/**
 * Streaming between nodes (issue 17, item 2): a long request body and a
 * long answer pass through the forwarding node as they are read, over the
 * plain path (accept mode) and over mutual TLS between cluster listeners,
 * with the length declared and chunked; each arrives whole and runs once.
 * A body over the limit sent chunked through the forwarding node is 413
 * and never reaches the actor.
 */

import assert from "node:assert/strict";
import { type NodeProcess, TESTBED_WASM } from "../../../src/testing/node_process.ts";
import { scratchDir, startClusterNode, startTlsClusterNode } from "../../../src/testing/cluster.ts";

const TESTBED = ["--actor", `testbed=${TESTBED_WASM}`];
const MAX_BODY = 20 * 1024 * 1024;
const LIMIT = ["--max-body-bytes", String(MAX_BODY)];

/** A body of `size` bytes that no shift or truncation leaves equal (printable, position-dependent). */
function patterned(size: number): Uint8Array {
  const body = new Uint8Array(size);
  for (let i = 0; i < size; i++) body[i] = 33 + ((i * 7 + (i >> 12)) % 90);
  return body;
}

/** `body` as a stream of 1 MiB pieces, which fetch sends chunked (no length). */
function chunkedStream(body: Uint8Array): ReadableStream<Uint8Array> {
  let offset = 0;
  return new ReadableStream({
    pull(controller) {
      if (offset >= body.length) return controller.close();
      const end = Math.min(body.length, offset + 1024 * 1024);
      controller.enqueue(body.slice(offset, end));
      offset = end;
    },
  });
}

/** POSTs `body` to the actor's /echo through `via`; the answer's status, node and body. */
async function echo(
  via: NodeProcess,
  actor: string,
  body: Uint8Array | ReadableStream<Uint8Array>,
): Promise<{ status: number; node: string | null; bytes: Uint8Array }> {
  const response = await fetch(`${via.url}/actor/testbed/${actor}/echo`, {
    method: "POST",
    body: body as BodyInit,
    ...(body instanceof ReadableStream ? { duplex: "half" } : {}),
  } as RequestInit);
  return {
    status: response.status,
    node: response.headers.get("x-wasmkeep-node"),
    bytes: new Uint8Array(await response.arrayBuffer()),
  };
}

/** What /echo answers for a POST of `body`: method, path, empty query, then the body. */
function echoed(body: Uint8Array): Uint8Array {
  const head = new TextEncoder().encode("POST\n/echo\n\n");
  const whole = new Uint8Array(head.length + body.length);
  whole.set(head);
  whole.set(body, head.length);
  return whole;
}

function assertSameBytes(got: Uint8Array, want: Uint8Array, what: string): void {
  assert.equal(got.length, want.length, `${what}: length`);
  for (let i = 0; i < want.length; i++) {
    if (got[i] !== want[i]) assert.fail(`${what}: byte ${i} is ${got[i]}, not ${want[i]}`);
  }
}

async function rows(via: NodeProcess, actor: string): Promise<number> {
  const response = await fetch(`${via.url}/actor/testbed/${actor}/rows`);
  assert.equal(response.status, 200);
  return Number((await response.text()).trim());
}

/** The big bodies both ways through `forwarding` to `holder`, declared and chunked. */
async function bothWays(holder: NodeProcess, forwarding: NodeProcess, actor: string) {
  const small = await echo(holder, actor, new TextEncoder().encode("take it"));
  assert.equal(small.status, 200);
  const holderId = small.node;

  const body = patterned(16 * 1024 * 1024);
  const declared = await echo(forwarding, actor, body);
  assert.equal(declared.status, 200, new TextDecoder().decode(declared.bytes.subarray(0, 200)));
  assert.equal(declared.node, holderId, "run by the holder");
  assertSameBytes(declared.bytes, echoed(body), "16 MiB with its length, both ways");

  const chunked = await echo(forwarding, actor, chunkedStream(body));
  assert.equal(chunked.status, 200, new TextDecoder().decode(chunked.bytes.subarray(0, 200)));
  assert.equal(chunked.node, holderId);
  assertSameBytes(chunked.bytes, echoed(body), "16 MiB chunked, both ways");

  // Over the limit, chunked: the forwarding node cuts it; the holder never runs it.
  const over = await echo(forwarding, actor, chunkedStream(patterned(MAX_BODY + 1)));
  assert.equal(over.status, 413, new TextDecoder().decode(over.bytes));
}

/** Two nodes started by `start`, the bodies both ways from the second to the first. */
async function throughPair(
  start: typeof startClusterNode | typeof startTlsClusterNode,
): Promise<void> {
  const dir = await scratchDir("wk-stream-");
  const bucketUrl = `file://${dir}/bucket`;
  const [a, b] = await Promise.all([
    start("a", dir, bucketUrl, TESTBED, { extra: LIMIT }),
    start("b", dir, bucketUrl, TESTBED, { extra: LIMIT }),
  ]);
  try {
    await bothWays(a, b, "big");
    // The path between them kept working: a small forwarded request after it.
    assert.equal(await rows(b, "big"), 0);
  } finally {
    await Promise.all([a.stop(), b.stop()]);
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test(
  "streaming: 16 MiB bodies both ways through a forwarding node, plain, with and without a length",
  () => throughPair(startClusterNode),
);

Deno.test(
  "streaming: 16 MiB bodies both ways through a forwarding node over mutual TLS",
  () => throughPair(startTlsClusterNode),
);
