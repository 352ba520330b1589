/**
 * A plain upgrade relayed between two nodes' transports (issue 17, item 2),
 * over real mutual TLS: a client connection on the relaying side, the
 * relaying node's Forwarder asking the owner's ClusterListener for an
 * upgrade, the owner accepting it (an echo stands for what issue 18 puts
 * there: an actor's WebSocket), and the byte pipe (src/net/relay.ts)
 * joining the client to the switched connection. Bytes echo both ways; an
 * upgrade refused comes back as an answer; and once the owner stops
 * trusting the relaying node (its heartbeat fenced, then the listener's
 * revoke at the next listing), the relay is cut within 500 ms.
 */

import assert from "node:assert/strict";
import { ClusterListener, type UpgradeAnswer } from "../../src/http/cluster_listener.ts";
import { Forwarder } from "../../src/http/forward.ts";
import { type ByteConn, tlsConnector } from "../../src/http/tls_connect.ts";
import { relay, type RelayEnd } from "../../src/net/relay.ts";
import { createNodeIdentity } from "../../src/security/node_identity.ts";
import { createLogger } from "../../src/log.ts";
import { readExactly, tcpPair, writeAll } from "../../src/testing/loopback.ts";

const OWNER = await createNodeIdentity({ nodeId: "owner", hosts: ["127.0.0.1"] });
const RELAYING = await createNodeIdentity({ nodeId: "relaying", hosts: ["127.0.0.1"] });

/** Echoes `conn` back to itself until it ends; `first` goes out first. */
async function echo(conn: ByteConn, first: Uint8Array): Promise<void> {
  const buffer = new Uint8Array(16 * 1024);
  try {
    if (first.length > 0) await conn.write(first);
    for (let n; (n = await conn.read(buffer)) !== null;) {
      for (let offset = 0; offset < n;) offset += await conn.write(buffer.subarray(offset, n));
    }
  } catch {
    // Cut.
  }
  conn.close();
}

async function setup() {
  const trusted = new Set([RELAYING.fingerprint]);
  const upgrades: { path: string; protocol: string | null }[] = [];
  const listener = await ClusterListener.start({
    hostname: "127.0.0.1",
    port: 0,
    identity: OWNER,
    trust: (fingerprint) => trusted.has(fingerprint),
    handler: () => Promise.resolve(new Response("not an upgrade")),
    upgrade: (request): Promise<UpgradeAnswer> => {
      const path = new URL(request.url).pathname;
      upgrades.push({ path, protocol: request.headers.get("upgrade") });
      if (path.endsWith("/refused")) {
        return Promise.resolve({
          kind: "refuse",
          response: new Response("no such room\n", { status: 404 }),
        });
      }
      return Promise.resolve({
        kind: "accept",
        headers: [["x-test", "accepted"]],
        join: (conn, leftover) =>
          void echo(conn, new TextEncoder().encode("hello;")).then(
            () => assert.equal(leftover.length, 0),
          ),
      });
    },
    maxConnections: 16,
    maxBodyBytes: 1024,
    log: createLogger({ level: "error" }),
  });
  const forwarder = new Forwarder({
    nodeId: "relaying",
    connect: tlsConnector({ identity: RELAYING, pinFor: () => OWNER.fingerprint }),
  });
  const url = `https://127.0.0.1:${listener.address.port}`;
  return {
    trusted,
    upgrades,
    listener,
    forwarder,
    url,
    /** Asks the owner for an upgrade to the test's protocol at `path`. */
    upgrade: (path: string, headers: [string, string][] = []) =>
      forwarder.upgrade(url, { path, headers, protocol: "wasmkeep-test" }),
    cleanup: async () => {
      await forwarder.close();
      await listener.close();
    },
  };
}

Deno.test("upgrade relay: bytes echo both ways through the relaying node's pipe to the owner, over mutual TLS", async () => {
  const t = await setup();
  try {
    const up = await t.upgrade("/actor/room/lobby", [["x-client", "1"]]);
    assert.equal(up.kind, "switched", JSON.stringify(up));
    if (up.kind !== "switched") return;
    assert.deepEqual(t.upgrades, [{ path: "/actor/room/lobby", protocol: "wasmkeep-test" }]);
    assert.equal(up.headers.find(([name]) => name === "x-test")?.[1], "accepted");
    assert.equal(t.forwarder.stats().open, 1, "the switched connection counts until closed");
    assert.equal(t.forwarder.stats().idle, 0, "and never goes back to the pool");

    const [clientSide, client] = await tcpPair();
    const ended = relay(clientSide, up.conn, { fromB: up.leftover });
    assert.equal(new TextDecoder().decode(await readExactly(client, 6)), "hello;");
    const payload = new Uint8Array(256 * 1024).map((_, i) => (i * 13) % 251);
    const [, back] = await Promise.all([
      writeAll(client, payload),
      readExactly(client, payload.length),
    ]);
    assert.deepEqual(back, payload, "256 KiB there and back through TLS");

    client.close();
    const end: RelayEnd = await ended;
    assert.equal(end.reason, "a-closed");
    assert.equal(t.forwarder.stats().open, 0, "closing the relay freed the slot");
  } finally {
    await t.cleanup();
  }
});

Deno.test("upgrade relay: an upgrade the owner refuses comes back as its answer, the connection closed", async () => {
  const t = await setup();
  try {
    const up = await t.upgrade("/actor/room/refused");
    assert.equal(up.kind, "response");
    if (up.kind !== "response") return;
    assert.equal(up.status, 404);
    assert.equal(new TextDecoder().decode(up.body), "no such room\n");
    assert.equal(t.forwarder.stats().idle, 0, "a connection that asked for an upgrade is not kept");
  } finally {
    await t.cleanup();
  }
});

Deno.test("upgrade relay: once the owner stops trusting the relaying node, the relay is cut within 500 ms", async () => {
  const t = await setup();
  try {
    const up = await t.upgrade("/actor/room/lobby");
    assert.equal(up.kind, "switched");
    if (up.kind !== "switched") return;
    const [clientSide, client] = await tcpPair();
    const ended = relay(clientSide, up.conn, { fromB: up.leftover });
    assert.equal(new TextDecoder().decode(await readExactly(client, 6)), "hello;");

    // The relaying node's heartbeat is fenced: at the owner's next listing,
    // trust is asked again and its connections, the upgraded one included, closed.
    t.trusted.delete(RELAYING.fingerprint);
    const cutAt = performance.now();
    assert.equal(t.listener.revoke(), 1);
    const end = await ended;
    const ms = performance.now() - cutAt;
    assert.ok(end.reason === "b-closed" || end.reason === "b-failed", end.reason);
    const buffer = new Uint8Array(16);
    let read: number | null = 0;
    try {
      read = await client.read(buffer);
    } catch {
      read = null;
    }
    assert.equal(read, null, "the client's connection ended too");
    assert.ok(ms < 500, `cut ${ms.toFixed(0)} ms after the revoke`);
    client.close();
  } finally {
    await t.cleanup();
  }
});
