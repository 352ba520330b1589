/**
 * An actors.call or a relayed WebSocket upgrade a peer refused at the TLS
 * handshake (the connection ended before a byte of answer) is sent once
 * more after this node's next heartbeat landed and two periods passed;
 * refused again, the call fails with "refused this node's certificate" and
 * the upgrade with a 503 to retry. Anything else is never sent again.
 */

import assert from "node:assert/strict";
import { MemoryBucket } from "../../src/bucket/memory.ts";
import { ClusterPlane } from "../../src/cluster/cluster_plane.ts";
import { encodeHeartbeat } from "../../src/cluster/heartbeat.ts";
import { leaseTiming } from "../../src/cluster/lease_timing.ts";
import { OwnershipRecords } from "../../src/cluster/ownership.ts";
import type { ByteConn } from "../../src/http/forward.ts";
import { createLogger } from "../../src/log.ts";
import { systemClock } from "../../src/time/clock.ts";
import { acceptKeyOf } from "../../src/net/websocket_accept.ts";

const TTL_MS = 3000;
const timing = leaseTiming(TTL_MS);

/** What a fake peer answers a request (`undefined`: it ends the connection, a refused handshake). */
type FakeAnswer = string | ((request: string) => Promise<string>) | undefined;

/** A connection the peer ends at once (a refused handshake), or one that answers `answer`. */
function fakeConn(answer: FakeAnswer, written: string[]): ByteConn {
  let sent = false;
  let pending: Uint8Array | undefined;
  let answering: Promise<void> = Promise.resolve();
  return {
    write(p) {
      const request = new TextDecoder().decode(p);
      written.push(request);
      sent = true;
      if (typeof answer === "string") pending = new TextEncoder().encode(answer);
      else if (answer) {
        answering = answer(request).then((text) => void (pending = new TextEncoder().encode(text)));
      }
      return Promise.resolve(p.length);
    },
    async read(p) {
      await answering;
      if (!pending || !sent) return null;
      const n = Math.min(p.length, pending.length);
      p.set(pending.subarray(0, n));
      pending = pending.subarray(n);
      if (pending.length === 0) pending = undefined;
      return n;
    },
    close() {},
  };
}

async function planeWith(answers: FakeAnswer[], written: string[]) {
  const bucket = new MemoryBucket();
  const log = createLogger({ level: "error" });
  // The peer b, live, with a cluster listener.
  await bucket.put(
    "nodes/b",
    encodeHeartbeat({
      format: 2,
      nodeId: "b",
      process: "b-1",
      at: systemClock.now(),
      lease: "live",
      address: "http://127.0.0.1:1",
      clusterAddress: "https://127.0.0.1:2",
      fingerprint: "AA:BB",
      readsSecrets: false,
      takesMoved: false,
      version: "0.1.0",
      state: "serving",
    }),
  );
  let connects = 0;
  const plane = new ClusterPlane({
    bucket,
    clock: systemClock,
    log,
    nodeId: "a",
    processToken: "a-1",
    timing,
    version: "0.1.0",
    ownership: new OwnershipRecords({
      bucket,
      clock: systemClock,
      nodeId: "a",
      processToken: "a-1",
      log,
    }),
    plaintext: "refuse",
    tls: {
      clusterAddress: "https://127.0.0.1:4",
      fingerprint: "CC:DD",
      connect: () => () => Promise.resolve(fakeConn(answers[connects++], written)),
    },
    signCall: () => [["x-wasmkeep-signature", "v1=00"]],
  });
  await plane.start("http://127.0.0.1:3");
  return { plane, connects: () => connects };
}

const request = { method: "GET", path: "/rows", query: "", headers: [], body: new Uint8Array() };
const actor = { tenant: "default", class: "testbed", name: "x" };
const caller = { caller: "default/testbed/y", chain: [] };

Deno.test("call refusal: a call refused at the handshake is sent once more, after this node's next heartbeat and two periods", async () => {
  const written: string[] = [];
  const { plane, connects } = await planeWith([
    undefined,
    "HTTP/1.1 200 OK\r\ncontent-length: 2\r\nx-wasmkeep-node: b\r\n\r\n42",
  ], written);
  try {
    const started = performance.now();
    const outcome = await plane.peers.forwardCall(
      "https://127.0.0.1:2",
      "b",
      actor,
      request,
      caller,
    );
    const waited = performance.now() - started;
    assert.equal(outcome.kind, "response");
    assert.equal(
      new TextDecoder().decode((outcome as { response: { body: Uint8Array } }).response.body),
      "42",
    );
    assert.equal(connects(), 2);
    assert.equal(written.length, 2, "sent twice, each on a new connection");
    // At least two periods after a heartbeat that landed after the refusal,
    // and at most the spec's bound of four periods (12 s with the defaults).
    assert.ok(waited >= 2 * timing.periodMs, `waited ${waited} ms`);
    assert.ok(waited <= 4 * timing.periodMs + 500, `waited ${waited} ms`);
  } finally {
    await plane.stop();
  }
});

Deno.test("call refusal: refused twice, the call fails with 'refused this node's certificate'", async () => {
  const written: string[] = [];
  const { plane, connects } = await planeWith([undefined, undefined, "never sent"], written);
  try {
    const outcome = await plane.peers.forwardCall(
      "https://127.0.0.1:2",
      "b",
      actor,
      request,
      caller,
    );
    assert.deepEqual(outcome, { kind: "not-run", error: "node b refused this node's certificate" });
    assert.equal(connects(), 2, "sent once more, not a third time");
  } finally {
    await plane.stop();
  }
});

Deno.test("call refusal: a call whose connection failed after an answer began is never sent again", async () => {
  const written: string[] = [];
  const { plane, connects } = await planeWith(["HTTP/1.1 200 OK\r\ncontent-le"], written);
  try {
    const outcome = await plane.peers.forwardCall(
      "https://127.0.0.1:2",
      "b",
      actor,
      request,
      caller,
    );
    assert.equal(outcome.kind, "not-run");
    assert.match((outcome as { error: string }).error, /did not answer; retry/);
    assert.equal(connects(), 1);
  } finally {
    await plane.stop();
  }
});

/** The owner's 101 to the upgrade it was sent, accepting its key. */
function switching(request: string): Promise<string> {
  const key = request.match(/^sec-websocket-key: *(.+)\r$/im)![1].trim();
  return Promise.resolve(
    "HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: websocket\r\n" +
      `sec-websocket-accept: ${acceptKeyOf(key)}\r\n\r\n`,
  );
}

Deno.test("upgrade refusal: a relayed upgrade refused at the handshake is sent once more after this node's next heartbeat and two periods, the client waiting, and switches", async () => {
  const written: string[] = [];
  const { plane, connects } = await planeWith([undefined, switching], written);
  try {
    const started = performance.now();
    const up = await plane.peers.upgrade("https://127.0.0.1:2", "b", actor, request);
    const waited = performance.now() - started;
    assert.equal(up.kind, "switched");
    (up as { conn: ByteConn }).conn.close();
    assert.equal(connects(), 2);
    assert.ok(written.every((w) => /^GET \/actor\/testbed\/x\/rows HTTP\/1.1/.test(w)));
    assert.ok(waited >= 2 * timing.periodMs, `waited ${waited} ms`);
    assert.ok(waited <= 4 * timing.periodMs + 500, `waited ${waited} ms`);
  } finally {
    await plane.stop();
  }
});

Deno.test("upgrade refusal: refused twice, the relayed upgrade is a 503 to retry, not sent a third time", async () => {
  const written: string[] = [];
  const { plane, connects } = await planeWith([undefined, undefined, switching], written);
  try {
    const up = await plane.peers.upgrade("https://127.0.0.1:2", "b", actor, request);
    assert.deepEqual(up, {
      kind: "failed",
      status: 503,
      message: "node b refused this node's certificate; retry",
    });
    assert.equal(connects(), 2);
  } finally {
    await plane.stop();
  }
});

Deno.test("upgrade refusal: an upgrade whose connection failed after its answer began is a 503 at once, never sent again", async () => {
  const written: string[] = [];
  const { plane, connects } = await planeWith(["HTTP/1.1 101 Swi"], written);
  try {
    const up = await plane.peers.upgrade("https://127.0.0.1:2", "b", actor, request);
    assert.equal(up.kind, "failed");
    assert.equal((up as { status: number }).status, 503);
    assert.equal(connects(), 1);
  } finally {
    await plane.stop();
  }
});
