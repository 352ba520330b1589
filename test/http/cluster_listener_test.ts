import assert from "node:assert/strict";
import net from "node:net";
import tls from "node:tls";
import { FakeClock } from "../bucket/fake_clock.ts";
import {
  ClusterListener,
  type ClusterListenerOptions,
  type ClusterPeer,
  type RefusalReason,
} from "../../src/http/cluster_listener.ts";
import { type ByteConn, tlsConnector } from "../../src/http/tls_connect.ts";
import { createNodeIdentity, type NodeIdentity } from "../../src/security/node_identity.ts";
import {
  exchange,
  forgedKeyPem,
  header,
  readAnswer,
  readToEnd,
  recordingLogger,
  requestBytes,
  SOON,
  tempFiles,
  within,
  writeAll,
} from "./tls_test_helpers.ts";
import { until } from "../helpers/until.ts";

const SERVER = await createNodeIdentity({ nodeId: "server", hosts: ["127.0.0.1"] });
const ALICE = await createNodeIdentity({ nodeId: "alice", hosts: ["127.0.0.1"] });
const BOB = await createNodeIdentity({ nodeId: "bob", hosts: ["127.0.0.1"] });
const MALLORY = await createNodeIdentity({ nodeId: "mallory", hosts: ["127.0.0.1"] });

const encoder = new TextEncoder();

interface Call {
  request: Request;
  body: string;
  peer: ClusterPeer;
}

/** A listener trusting ALICE and BOB, with an echoing handler that records its calls. */
async function setup(overrides: Partial<ClusterListenerOptions> = {}) {
  const trusted = new Set([ALICE.fingerprint, BOB.fingerprint]);
  const calls: Call[] = [];
  const refused: [string | undefined, RefusalReason][] = [];
  const { log, lines } = recordingLogger();
  let trustCalls = 0;
  const listener = await ClusterListener.start({
    hostname: "127.0.0.1",
    port: 0,
    identity: SERVER,
    trust: (fingerprint) => {
      trustCalls++;
      return trusted.has(fingerprint);
    },
    handler: async (request, peer) => {
      const body = await request.text();
      calls.push({ request, body, peer });
      return new Response(`${request.method} ${new URL(request.url).pathname} ${body}`);
    },
    maxConnections: 16,
    maxBodyBytes: 1024,
    log,
    onRefused: (fingerprint, reason) => refused.push([fingerprint, reason]),
    ...overrides,
  });
  const { port } = listener.address;
  const conns: ByteConn[] = [];
  const connectAs = async (identity: NodeIdentity) => {
    const connect = tlsConnector({ identity, pinFor: () => SERVER.fingerprint });
    const conn = await connect("127.0.0.1", port, AbortSignal.timeout(5_000));
    conns.push(conn);
    return conn;
  };
  const cleanup = async () => {
    for (const conn of conns) conn.close();
    await listener.close();
  };
  return {
    listener,
    port,
    trusted,
    calls,
    refused,
    lines,
    connectAs,
    cleanup,
    trustCalls: () => trustCalls,
  };
}

/**
 * Connects as `identity` and writes a request the moment the handshake ends
 * on this side; what came back before the connection ended. A refusal may
 * also show as a failed connect or write: both mean the peer read nothing.
 */
async function tryRequest(
  port: number,
  identity: NodeIdentity,
): Promise<{ bytes: Uint8Array; how: string }> {
  const connect = tlsConnector({ identity, pinFor: () => SERVER.fingerprint });
  let conn: ByteConn;
  try {
    conn = await connect("127.0.0.1", port, AbortSignal.timeout(5_000));
  } catch (error) {
    return { bytes: new Uint8Array(0), how: `connect: ${error}` };
  }
  try {
    await writeAll(conn, requestBytes("POST", "/actor/c/n", "secret"));
  } catch (error) {
    conn.close();
    return { bytes: new Uint8Array(0), how: `write: ${error}` };
  }
  const ending = await readToEnd(conn);
  conn.close();
  return { bytes: ending.bytes, how: `read: ${ending.end}` };
}

Deno.test("a trusted peer's request and its answer, over mutual TLS", async () => {
  const t = await setup({
    handler: async (request, peer) => {
      t.calls.push({ request, body: await request.text(), peer });
      const headers = new Headers({ "x-one": "1" });
      headers.append("set-cookie", "a=1");
      headers.append("set-cookie", "b=2");
      return new Response("made", { status: 201, statusText: "Made", headers });
    },
  });
  try {
    const conn = await t.connectAs(ALICE);
    const answer = await exchange(conn, "POST", "/actor/c/n/x?y=1", "hello", [["x-test", "yes"]]);
    assert.equal(answer.status, 201);
    assert.equal(answer.text, "made");
    assert.equal(header(answer, "x-one"), "1");
    assert.equal(header(answer, "content-length"), "4");
    assert.deepEqual(
      answer.headers.filter(([name]) => name === "set-cookie").map(([, value]) => value),
      ["a=1", "b=2"],
    );

    assert.equal(t.calls.length, 1);
    const [{ request, body, peer }] = t.calls;
    assert.equal(request.method, "POST");
    assert.equal(request.url, "https://peer.test/actor/c/n/x?y=1");
    assert.equal(request.headers.get("x-test"), "yes");
    assert.equal(body, "hello");
    assert.equal(peer.fingerprint, ALICE.fingerprint);
    assert.deepEqual(
      { ...t.listener.stats() },
      {
        open: 1,
        trusted: 1,
        refusedHandshakes: 0,
        refusedOverCap: 0,
        refusedHandshakesPerAddress: 0,
        failedHandshakes: 0,
        revoked: 0,
      },
    );
  } finally {
    await t.cleanup();
  }
});

Deno.test("several requests over one kept-alive connection, HEAD and 204 included", async () => {
  const t = await setup({
    handler: (request) => {
      const path = new URL(request.url).pathname;
      if (path === "/empty") return Promise.resolve(new Response(null, { status: 204 }));
      return Promise.resolve(new Response(`answer to ${request.method} ${path}`));
    },
  });
  try {
    const conn = await t.connectAs(BOB);
    for (let i = 0; i < 5; i++) {
      const answer = await exchange(conn, "GET", `/n/${i}`);
      assert.equal(answer.text, `answer to GET /n/${i}`);
    }
    const head = await exchange(conn, "HEAD", "/n/head");
    assert.equal(head.status, 200);
    assert.equal(head.body.length, 0);
    assert.equal(header(head, "content-length"), String("answer to HEAD /n/head".length));
    const empty = await exchange(conn, "DELETE", "/empty");
    assert.equal(empty.status, 204);
    assert.equal((await exchange(conn, "GET", "/last")).text, "answer to GET /last");
    assert.equal(t.listener.stats().open, 1, "all over one connection");
  } finally {
    await t.cleanup();
  }
});

Deno.test("an untrusted peer's request never reaches the handler, and it sees the end", async () => {
  const t = await setup();
  try {
    for (let i = 0; i < 5; i++) {
      const { bytes, how } = await tryRequest(t.port, MALLORY);
      assert.equal(bytes.length, 0, `nothing came back (${how})`);
    }
    await until("five refusals", () => t.listener.stats().refusedHandshakes === 5, SOON);
    assert.equal(t.calls.length, 0, "the handler never saw a request");
    assert.deepEqual(t.refused, new Array(5).fill([MALLORY.fingerprint, "untrusted certificate"]));
    assert.equal(t.listener.stats().trusted, 0);
    await until("the refused connections closed", () => t.listener.stats().open === 0, SOON);
    // A trusted peer on the same listener is served.
    assert.equal((await exchange(await t.connectAs(ALICE), "GET", "/ok")).text, "GET /ok ");
  } finally {
    await t.cleanup();
  }
});

Deno.test("refusals are logged at most once a minute per fingerprint", async () => {
  const clock = new FakeClock();
  const t = await setup({ clock });
  try {
    const refusals = () =>
      t.lines.filter((line) =>
        line.includes("refused a cluster connection") && line.includes(MALLORY.fingerprint)
      );
    for (let i = 0; i < 3; i++) await tryRequest(t.port, MALLORY);
    await until("three refusals", () => t.listener.stats().refusedHandshakes === 3, SOON);
    assert.equal(refusals().length, 1);
    assert.match(refusals()[0], /reason="untrusted certificate"/);
    await clock.advance(59_000);
    await tryRequest(t.port, MALLORY);
    await until("a fourth refusal", () => t.listener.stats().refusedHandshakes === 4, SOON);
    assert.equal(refusals().length, 1, "still within the minute");
    await clock.advance(1_000);
    await tryRequest(t.port, MALLORY);
    await until("a fifth refusal", () => t.listener.stats().refusedHandshakes === 5, SOON);
    assert.equal(refusals().length, 2, "a minute later it is logged again");
    assert.equal(t.refused.length, 5, "onRefused hears of every one");
  } finally {
    await t.cleanup();
  }
});

Deno.test("a TLS client without a certificate gets nothing", async () => {
  const t = await setup();
  try {
    const received: Uint8Array[] = [];
    let secure = false;
    await within(
      new Promise<void>((resolve) => {
        const socket = tls.connect({
          host: "127.0.0.1",
          port: t.port,
          rejectUnauthorized: false,
          minVersion: "TLSv1.3",
        }, () => {
          secure = true;
          socket.write(requestBytes("GET", "/actor/c/n"));
        });
        socket.on("data", (chunk: Uint8Array) => received.push(chunk));
        socket.on("error", () => {});
        socket.on("close", () => resolve());
      }),
      "the connection to close",
    );
    assert.equal(received.length, 0);
    assert.ok(secure, "the handshake ended on the client's side first (TLS 1.3)");
    await until("the refusal", () => t.listener.stats().refusedHandshakes === 1, SOON);
    assert.deepEqual(t.refused, [[undefined, "no client certificate"]]);
    assert.equal(t.calls.length, 0);
  } finally {
    await t.cleanup();
  }
});

Deno.test("a plain TCP client gets nothing", async () => {
  const t = await setup();
  try {
    const conn = await Deno.connect({ hostname: "127.0.0.1", port: t.port });
    await conn.write(requestBytes("GET", "/actor/c/n"));
    const { bytes } = await readToEnd(conn);
    conn.close();
    assert.doesNotMatch(new TextDecoder().decode(bytes), /HTTP/);
    await until("the failed handshake", () => t.listener.stats().failedHandshakes === 1, SOON);
    assert.equal(t.calls.length, 0);
    assert.equal(t.listener.stats().refusedHandshakes, 0);
  } finally {
    await t.cleanup();
  }
});

/** Runs `openssl s_client` with `cert` and `key`, sending one request; what it printed. */
async function opensslClient(port: number, cert: string, key: string): Promise<string> {
  const files = await tempFiles({ "cert.pem": cert, "key.pem": key });
  try {
    const child = new Deno.Command("openssl", {
      args: [
        "s_client",
        "-connect",
        `127.0.0.1:${port}`,
        "-tls1_3",
        "-cert",
        files["cert.pem"],
        "-key",
        files["key.pem"],
        "-quiet",
        "-ign_eof",
      ],
      stdin: "piped",
      stdout: "piped",
      stderr: "piped",
    }).spawn();
    const writer = child.stdin.getWriter();
    await writer.write(requestBytes("GET", "/actor/c/n", "", [["connection", "close"]]));
    await writer.close();
    const killer = setTimeout(() => child.kill(), 5_000);
    const out = await child.output();
    clearTimeout(killer);
    const decoder = new TextDecoder();
    return decoder.decode(out.stdout) + decoder.decode(out.stderr);
  } finally {
    await Deno.remove(files.dir, { recursive: true });
  }
}

Deno.test("a client with a trusted certificate but not its key fails the handshake", async () => {
  const t = await setup();
  try {
    // With the real key, openssl is served: the forgery below fails for the key alone.
    const genuine = await opensslClient(t.port, ALICE.chainPem, ALICE.keyPem);
    assert.match(genuine, /HTTP\/1.1 200 OK/);
    assert.equal(t.calls.length, 1);

    const forged = await opensslClient(t.port, ALICE.chainPem, forgedKeyPem(ALICE));
    assert.doesNotMatch(forged, /HTTP\/1.1/);
    await until("the failed handshake", () => t.listener.stats().failedHandshakes === 1, SOON);
    assert.equal(t.calls.length, 1, "no request from the forger");
    assert.equal(t.refused.length, 0, "it never got past the handshake");
  } finally {
    await t.cleanup();
  }
});

Deno.test("revoke() closes the connections of a peer no longer trusted and keeps the others", async () => {
  const t = await setup();
  try {
    const alice1 = await t.connectAs(ALICE);
    const alice2 = await t.connectAs(ALICE);
    const bob = await t.connectAs(BOB);
    for (const conn of [alice1, alice2, bob]) {
      assert.equal((await exchange(conn, "GET", "/x")).status, 200);
    }
    assert.equal(t.listener.stats().trusted, 3);

    assert.equal(t.listener.revoke(), 0, "all still trusted");
    t.trusted.delete(ALICE.fingerprint);
    const before = t.trustCalls();
    assert.equal(t.listener.revoke(), 2);
    assert.equal(t.trustCalls() - before, 2, "trust is asked once per peer, not per connection");

    for (const conn of [alice1, alice2]) assert.equal((await readToEnd(conn)).bytes.length, 0);
    assert.equal((await exchange(bob, "GET", "/still")).text, "GET /still ");
    await until("alice's connections closed", () => t.listener.stats().open === 1, SOON);
    const stats = t.listener.stats();
    assert.equal(stats.trusted, 1);
    assert.equal(stats.revoked, 2);
    assert.deepEqual(t.refused, [
      [ALICE.fingerprint, "no longer trusted"],
      [ALICE.fingerprint, "no longer trusted"],
    ]);
    assert.equal(t.listener.revoke(), 0, "nothing left to close");
    // Trusted again (a new heartbeat naming the same key): it may connect again.
    t.trusted.add(ALICE.fingerprint);
    assert.equal((await exchange(await t.connectAs(ALICE), "GET", "/back")).status, 200);
  } finally {
    await t.cleanup();
  }
});

Deno.test("a request after trust ended is not served, even before revoke()", async () => {
  const t = await setup();
  try {
    const alice = await t.connectAs(ALICE);
    const bob = await t.connectAs(BOB);
    assert.equal((await exchange(alice, "GET", "/first")).status, 200);
    assert.equal((await exchange(bob, "GET", "/first")).status, 200);
    t.trusted.delete(ALICE.fingerprint);
    await writeAll(alice, requestBytes("POST", "/second", "late"));
    assert.equal((await readToEnd(alice)).bytes.length, 0);
    assert.deepEqual(t.calls.map((call) => call.body), ["", ""]);
    assert.equal((await exchange(bob, "GET", "/second")).status, 200);
  } finally {
    await t.cleanup();
  }
});

Deno.test("past maxConnections a new connection is closed at once; a freed slot is used again", async () => {
  const t = await setup({ maxConnections: 2 });
  try {
    const first = await t.connectAs(ALICE);
    const second = await t.connectAs(BOB);
    assert.equal((await exchange(first, "GET", "/1")).status, 200);
    assert.equal((await exchange(second, "GET", "/2")).status, 200);

    const { bytes } = await tryRequest(t.port, ALICE);
    assert.equal(bytes.length, 0);
    await until("the refusal over the cap", () => t.listener.stats().refusedOverCap === 1, SOON);
    assert.deepEqual(t.refused, [[undefined, "over the connection cap"]]);
    assert.equal(t.listener.stats().failedHandshakes, 0, "counted once, as over the cap");
    assert.equal(t.calls.length, 2);

    first.close();
    await until("the first connection to close", () => t.listener.stats().open === 1, SOON);
    const third = await t.connectAs(ALICE);
    assert.equal((await exchange(third, "GET", "/3")).status, 200);
    assert.equal((await exchange(second, "GET", "/2/again")).status, 200);
  } finally {
    await t.cleanup();
  }
});

Deno.test("a body over maxBodyBytes is answered 413 in one line", async () => {
  const t = await setup();
  try {
    const conn = await t.connectAs(ALICE);
    const full = await exchange(conn, "POST", "/full", "x".repeat(1024));
    assert.equal(full.status, 200, "exactly the limit is served");
    assert.equal(t.calls.at(-1)?.body.length, 1024);

    const over = await exchange(conn, "POST", "/over", "x".repeat(1025));
    assert.equal(over.status, 413);
    assert.equal(over.text, "the request body is over 1024 bytes\n");
    assert.equal(header(over, "connection"), "close");
    assert.equal((await readToEnd(conn)).bytes.length, 0, "then the connection ends");

    // Chunked, with no declared length: counted as it arrives.
    const chunked = await t.connectAs(ALICE);
    const chunk = "y".repeat(600);
    await writeAll(
      chunked,
      encoder.encode(
        "POST /chunked HTTP/1.1\r\nhost: peer.test\r\ntransfer-encoding: chunked\r\n\r\n" +
          `258\r\n${chunk}\r\n258\r\n${chunk}\r\n0\r\n\r\n`,
      ),
    );
    const answer = await readAnswer(chunked, "POST");
    assert.equal(answer.status, 413);

    // A body far over the limit, sent whole: the 413 still arrives (no reset).
    const big = await t.connectAs(BOB);
    await writeAll(big, requestBytes("PUT", "/big", new Uint8Array(1024 * 1024)));
    assert.equal((await readAnswer(big, "PUT")).status, 413);
    assert.equal(t.calls.length, 1, "only the body within the limit reached the handler");
  } finally {
    await t.cleanup();
  }
});

Deno.test("a handler that throws is answered 500 in one line, and the connection serves on", async () => {
  const t = await setup({
    handler: (request) => {
      if (new URL(request.url).pathname === "/boom") throw new Error("kaput");
      return Promise.resolve(new Response("fine"));
    },
  });
  try {
    const conn = await t.connectAs(ALICE);
    const failed = await exchange(conn, "GET", "/boom");
    assert.equal(failed.status, 500);
    assert.equal(failed.text, "the node failed to answer this request; see its log\n");
    assert.ok(
      t.lines.some((line) => line.includes("the cluster handler failed") && line.includes("kaput")),
    );
    assert.equal((await exchange(conn, "GET", "/after")).text, "fine");
  } finally {
    await t.cleanup();
  }
});

Deno.test("the request's signal aborts when the peer closes the connection", async () => {
  let aborted: () => void;
  const abortSeen = new Promise<void>((resolve) => aborted = resolve);
  const t = await setup({
    handler: (request) =>
      new Promise((resolve) => {
        request.signal.addEventListener("abort", () => {
          aborted();
          resolve(new Response("too late"));
        });
      }),
  });
  try {
    const conn = await t.connectAs(ALICE);
    await writeAll(conn, requestBytes("GET", "/wait"));
    await until("the connection", () => t.listener.stats().trusted === 1, SOON);
    // Give the request time to reach the handler before leaving.
    await new Promise((resolve) => setTimeout(resolve, 50));
    conn.close();
    await within(abortSeen, "the request's signal to abort");
  } finally {
    await t.cleanup();
  }
});

Deno.test("a malformed host header cannot move into the path", async () => {
  const t = await setup({
    handler: (request) => Promise.resolve(new Response(request.url)),
  });
  try {
    const conn = await t.connectAs(ALICE);
    for (
      const [host, url] of [
        ["evil/zz", "https://cluster/actor/c/n"],
        ["a@b", "https://cluster/actor/c/n"],
        ["10.0.0.11:7443", "https://10.0.0.11:7443/actor/c/n"],
        ["[::1]:7443", "https://[::1]:7443/actor/c/n"],
      ]
    ) {
      await writeAll(conn, encoder.encode(`GET /actor/c/n HTTP/1.1\r\nhost: ${host}\r\n\r\n`));
      assert.equal((await readAnswer(conn)).text, url, host);
    }
  } finally {
    await t.cleanup();
  }
});

Deno.test("an upgrade is refused in one line, not left unanswered", async () => {
  const t = await setup();
  try {
    const conn = await t.connectAs(ALICE);
    await writeAll(
      conn,
      requestBytes("GET", "/actor/room/r", "", [["connection", "upgrade"], [
        "upgrade",
        "websocket",
      ]]),
    );
    const ending = await readToEnd(conn);
    assert.match(
      new TextDecoder().decode(ending.bytes),
      /^HTTP\/1.1 501 .*\r\n\r\nupgrades are not served on the cluster port\n$/s,
    );
    assert.equal(t.calls.length, 0);
  } finally {
    await t.cleanup();
  }
});

Deno.test("a trust function that throws refuses, and says so", async () => {
  const t = await setup({
    trust: () => {
      throw new Error("no view of the heartbeats");
    },
  });
  try {
    const { bytes } = await tryRequest(t.port, ALICE);
    assert.equal(bytes.length, 0);
    await until("the refusal", () => t.listener.stats().refusedHandshakes === 1, SOON);
    assert.equal(t.calls.length, 0);
    assert.ok(t.lines.some((line) => line.includes("no view of the heartbeats")));
  } finally {
    await t.cleanup();
  }
});

Deno.test("close() closes every connection, those in a handshake too, and resolves", async () => {
  const t = await setup();
  const tcp = await Deno.connect({ hostname: "127.0.0.1", port: t.port });
  try {
    const alice = await t.connectAs(ALICE);
    assert.equal((await exchange(alice, "GET", "/x")).status, 200);
    await until("both connections", () => t.listener.stats().open === 2, SOON);
    await within(t.listener.close(), "close()");
    assert.equal((await readToEnd(alice)).bytes.length, 0);
    assert.equal(
      await within(tcp.read(new Uint8Array(16)).catch(() => null), "the TCP read"),
      null,
    );
    assert.equal(t.listener.stats().open, 0);
    await assert.rejects(() => Deno.connect({ hostname: "127.0.0.1", port: t.port }));
  } finally {
    tcp.close();
    await t.cleanup();
  }
});

Deno.test("Deno.connectTls reaches the listener with its CA and a client certificate", async () => {
  const t = await setup();
  try {
    const conn = await Deno.connectTls({
      hostname: "127.0.0.1",
      port: t.port,
      caCerts: [SERVER.caPem],
      cert: ALICE.chainPem,
      key: ALICE.keyPem,
    });
    try {
      const answer = await exchange(conn, "GET", "/deno");
      assert.equal(answer.text, "GET /deno ");
      assert.equal(t.calls[0].peer.fingerprint, ALICE.fingerprint);
    } finally {
      conn.close();
    }
    // Another node's CA does not verify this listener.
    await assert.rejects(() =>
      Deno.connectTls({
        hostname: "127.0.0.1",
        port: t.port,
        caCerts: [ALICE.caPem],
        cert: ALICE.chainPem,
        key: ALICE.keyPem,
      }).then((conn) => conn.handshake().finally(() => conn.close()))
    );
  } finally {
    await t.cleanup();
  }
});

Deno.test("start() refuses bad limits and an address in use", async () => {
  const { log } = recordingLogger();
  const base: ClusterListenerOptions = {
    hostname: "127.0.0.1",
    port: 0,
    identity: SERVER,
    trust: () => true,
    handler: () => Promise.resolve(new Response("")),
    maxConnections: 1,
    maxBodyBytes: 0,
    log,
  };
  await assert.rejects(
    () => ClusterListener.start({ ...base, maxConnections: 0 }),
    /maxConnections/,
  );
  await assert.rejects(() => ClusterListener.start({ ...base, maxBodyBytes: -1 }), /maxBodyBytes/);
  const first = await ClusterListener.start(base);
  try {
    await assert.rejects(
      () => ClusterListener.start({ ...base, port: first.address.port }),
      /EADDRINUSE|in use/i,
    );
  } finally {
    await first.close();
  }
});

/** A TCP connection from `localAddress` that never starts a handshake. */
function silentConnection(port: number, localAddress: string): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ host: "127.0.0.1", port, localAddress }, () => resolve(socket));
    socket.once("error", reject);
  });
}

Deno.test("connections that never handshake take at most their address's share: peers elsewhere are served, and a finished handshake frees its place", async () => {
  const t = await setup({ maxConnections: 16, maxHandshakesPerAddress: 4 });
  const silent: net.Socket[] = [];
  try {
    for (let i = 0; i < 4; i++) silent.push(await silentConnection(t.port, "127.0.0.2"));
    await until("the silent connections", () => t.listener.stats().open === 4, SOON);
    const fifth = await silentConnection(t.port, "127.0.0.2");
    silent.push(fifth);
    await until(
      "the fifth refused at once",
      () => t.listener.stats().refusedHandshakesPerAddress === 1,
      SOON,
    );
    assert.deepEqual(t.refused, [[undefined, "too many handshakes from one address"]]);

    // Another address: five trusted connections, one more than the share,
    // since each handshake that ended gave its place back.
    const peers = [];
    for (let i = 0; i < 5; i++) peers.push(await t.connectAs(i % 2 ? BOB : ALICE));
    for (const [i, conn] of peers.entries()) {
      assert.equal((await exchange(conn, "GET", `/${i}`)).status, 200);
    }
    assert.equal(t.listener.stats().trusted, 5);

    // The silent ones gone, their address may connect again.
    for (const socket of silent) socket.destroy();
    await until("the silent connections to close", () => t.listener.stats().open === 5, SOON);
    silent.push(await silentConnection(t.port, "127.0.0.2"));
    await until("a new connection from that address", () => t.listener.stats().open === 6, SOON);
    assert.equal(t.listener.stats().refusedHandshakesPerAddress, 1);
  } finally {
    for (const socket of silent) socket.destroy();
    await t.cleanup();
  }
});
