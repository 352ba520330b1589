import assert from "node:assert/strict";
import type { Socket } from "node:net";
import tls from "node:tls";
import { AssertionError } from "../../src/assert.ts";
import { ClusterListener } from "../../src/http/cluster_listener.ts";
import {
  type ByteConn,
  NoPeerPin,
  PeerPinMismatch,
  tlsConnector,
} from "../../src/http/tls_connect.ts";
import { createNodeIdentity, type NodeIdentity } from "../../src/security/node_identity.ts";
import {
  exchange,
  forgedKeyPem,
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
const CLIENT = await createNodeIdentity({ nodeId: "client", hosts: ["127.0.0.1"] });
const OTHER = await createNodeIdentity({ nodeId: "other", hosts: ["127.0.0.1"] });

const signal = () => AbortSignal.timeout(5_000);

/** A bare mutual-TLS server as SERVER that counts what each connection received. */
async function rawServer(
  onSecure: (socket: tls.TLSSocket) => void = () => {},
): Promise<
  { port: number; connections: number; closed: number; received: number; close(): Promise<void> }
> {
  const sockets = new Set<Socket>();
  const state = {
    port: 0,
    connections: 0,
    closed: 0,
    received: 0,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of sockets) socket.destroy();
        server.close(() => resolve());
      }),
  };
  const server = tls.createServer({
    key: SERVER.keyPem,
    cert: SERVER.chainPem,
    requestCert: true,
    rejectUnauthorized: false,
    minVersion: "TLSv1.3",
  });
  server.on("secureConnection", (socket: tls.TLSSocket) => {
    state.connections++;
    sockets.add(socket);
    socket.on("data", (chunk: Uint8Array) => state.received += chunk.length);
    socket.on("error", () => {});
    socket.on("close", () => state.closed++);
    onSecure(socket);
  });
  server.on("tlsClientError", (_error: Error, socket: tls.TLSSocket) => socket.destroy());
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  state.port = (server.address() as { port: number }).port;
  return state;
}

/** A ClusterListener as SERVER trusting `trusted`, answering with the request's path. */
function listener(trusted: NodeIdentity[], maxBodyBytes = 1024): Promise<ClusterListener> {
  const fingerprints = new Set(trusted.map((identity) => identity.fingerprint));
  return ClusterListener.start({
    hostname: "127.0.0.1",
    port: 0,
    identity: SERVER,
    trust: (fingerprint) => fingerprints.has(fingerprint),
    handler: async (request) => {
      const body = new Uint8Array(await request.arrayBuffer());
      const size = new URL(request.url).searchParams.get("size");
      if (size) return new Response(pattern(Number(size)));
      return new Response(`${request.method} ${new URL(request.url).pathname} ${body.length}`);
    },
    maxConnections: 16,
    maxBodyBytes,
    log: recordingLogger().log,
  });
}

function pattern(length: number, seed = 0): Uint8Array<ArrayBuffer> {
  const bytes = new Uint8Array(length);
  for (let i = 0; i < length; i++) bytes[i] = (i * 31 + seed + (i >> 12)) & 0xff;
  return bytes;
}

Deno.test("requests and answers over one kept-alive connection to a cluster listener", async () => {
  const server = await listener([CLIENT]);
  const pins: [string, number][] = [];
  const connect = tlsConnector({
    identity: CLIENT,
    pinFor: (host, port) => {
      pins.push([host, port]);
      return SERVER.fingerprint;
    },
  });
  const conn = await connect("127.0.0.1", server.address.port, signal());
  try {
    assert.deepEqual(pins, [["127.0.0.1", server.address.port]]);
    for (let i = 0; i < 10; i++) {
      const answer = await exchange(conn, "POST", `/actor/c/n/${i}`, "x".repeat(i * 10));
      assert.equal(answer.text, `POST /actor/c/n/${i} ${i * 10}`);
    }
    assert.equal(server.stats().open, 1);
  } finally {
    conn.close();
    await server.close();
  }
});

Deno.test("no pin: NoPeerPin, and nothing is written", async () => {
  const server = await rawServer();
  try {
    const connect = tlsConnector({ identity: CLIENT, pinFor: () => undefined });
    const error = await assert.rejects(
      () => connect("127.0.0.1", server.port, signal()),
      (error: unknown) => error instanceof NoPeerPin && error.port === server.port,
    );
    void error;
    await until(
      "the server to see the close",
      () => server.connections === 1 && server.closed === 1,
      SOON,
    );
    assert.equal(server.received, 0);
  } finally {
    await server.close();
  }
});

Deno.test("another certificate than the pin: PeerPinMismatch, and nothing is written", async () => {
  const server = await rawServer();
  try {
    const connect = tlsConnector({ identity: CLIENT, pinFor: () => OTHER.fingerprint });
    let caught: unknown;
    await connect("127.0.0.1", server.port, signal()).catch((error) => caught = error);
    assert.ok(caught instanceof PeerPinMismatch, String(caught));
    assert.equal(caught.expected, OTHER.fingerprint);
    assert.equal(caught.actual, SERVER.fingerprint);
    assert.match(caught.message, /presented certificate .* not .* that its heartbeat publishes/);
    await until(
      "the server to see the close",
      () => server.connections === 1 && server.closed === 1,
      SOON,
    );
    assert.equal(server.received, 0);

    // The pin is compared without regard to case.
    const lower = tlsConnector({
      identity: CLIENT,
      pinFor: () => SERVER.fingerprint.toLowerCase(),
    });
    (await lower("127.0.0.1", server.port, signal())).close();
  } finally {
    await server.close();
  }
});

/** Runs `openssl s_server` as SERVER's certificate with `key`; its port and a stop. */
async function opensslServer(key: string) {
  const files = await tempFiles({ "chain.pem": SERVER.chainPem, "key.pem": key });
  const child = new Deno.Command("openssl", {
    args: [
      "s_server",
      "-accept",
      "127.0.0.1:0",
      "-tls1_3",
      "-cert",
      files["chain.pem"],
      "-key",
      files["key.pem"],
    ],
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const reader = child.stdout.getReader();
  let printed = "";
  const decoder = new TextDecoder();
  const port = await within(
    (async () => {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) throw new Error(`openssl s_server ended: ${printed}`);
        printed += decoder.decode(value);
        const match = printed.match(/ACCEPT 127\.0\.0\.1:(\d+)/);
        if (match) return Number(match[1]);
      }
    })(),
    "openssl s_server to listen",
  );
  const drained = (async () => {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      printed += decoder.decode(value);
    }
  })();
  return {
    port,
    printed: () => printed,
    async stop() {
      child.kill();
      await child.stdin.close().catch(() => {});
      await drained;
      await child.status;
      await child.stderr.cancel();
      await Deno.remove(files.dir, { recursive: true });
    },
  };
}

Deno.test("a server with the pinned certificate but not its key is refused", async () => {
  const connect = tlsConnector({ identity: CLIENT, pinFor: () => SERVER.fingerprint });
  // With the real key the connection opens: the forgery below fails for the key alone.
  const genuine = await opensslServer(SERVER.keyPem);
  try {
    const conn = await connect("127.0.0.1", genuine.port, signal());
    await writeAll(conn, new TextEncoder().encode("hello genuine\n"));
    await until(
      "openssl to print what it read",
      () => genuine.printed().includes("hello genuine"),
      SOON,
    );
    conn.close();
  } finally {
    await genuine.stop();
  }

  const forged = await opensslServer(forgedKeyPem(SERVER));
  try {
    await assert.rejects(() => connect("127.0.0.1", forged.port, signal()));
  } finally {
    await forged.stop();
  }
});

Deno.test("aborting the signal gives up the connect", async () => {
  // A TCP server that accepts and never answers the handshake.
  const tcp = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const accepted: Deno.Conn[] = [];
  const accepting = (async () => {
    for await (const conn of tcp) accepted.push(conn);
  })();
  try {
    const connect = tlsConnector({ identity: CLIENT, pinFor: () => SERVER.fingerprint });
    const controller = new AbortController();
    const pending = connect("127.0.0.1", tcp.addr.port, controller.signal);
    await until("the TCP connection", () => accepted.length === 1, SOON);
    controller.abort(new Error("gave up"));
    await assert.rejects(() => within(pending, "the aborted connect"), /gave up/);
    // The socket is closed: the server reads its end.
    assert.equal(
      await within(
        accepted[0].read(new Uint8Array(1 << 16)).then(async (n) => {
          // A client hello may have been sent before the abort; the end follows it.
          return n === null ? null : await accepted[0].read(new Uint8Array(1 << 16));
        }),
        "the server's read",
      ),
      null,
    );

    const already = new AbortController();
    already.abort(new Error("before"));
    await assert.rejects(() => connect("127.0.0.1", tcp.addr.port, already.signal), /before/);
  } finally {
    for (const conn of accepted) conn.close();
    tcp.close();
    await accepting;
  }
});

Deno.test("a closed port rejects the connect", async () => {
  const tcp = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const { port } = tcp.addr;
  tcp.close();
  const connect = tlsConnector({ identity: CLIENT, pinFor: () => SERVER.fingerprint });
  await assert.rejects(
    () => within(connect("127.0.0.1", port, signal()), "the connect"),
    /ECONNREFUSED|refused/i,
  );
});

Deno.test("a listener that refuses us: the read sees the end or an error, never hangs", async () => {
  const server = await listener([]);
  try {
    const connect = tlsConnector({ identity: CLIENT, pinFor: () => SERVER.fingerprint });
    let opened = 0;
    for (const writeFirst of [false, true, false, true]) {
      let conn: ByteConn;
      try {
        conn = await connect("127.0.0.1", server.address.port, signal());
      } catch {
        continue; // The refusal can also arrive before the connect settles.
      }
      opened++;
      if (writeFirst) await writeAll(conn, requestBytes("GET", "/x")).catch(() => {});
      const ending = await readToEnd(conn);
      assert.equal(ending.bytes.length, 0, ending.end);
      // Writing to it now fails rather than vanishing.
      await assert.rejects(() => writeAll(conn, requestBytes("GET", "/y")));
      conn.close();
    }
    // TLS 1.3: the client's handshake ends before the server judges its certificate.
    assert.ok(opened > 0, "some connects opened before the refusal");
    await until("the refusals", () => server.stats().refusedHandshakes === 4, SOON);
  } finally {
    await server.close();
  }
});

Deno.test("a peer that closes right after the handshake shows as the end", async () => {
  const server = await rawServer((socket) => socket.end());
  try {
    const connect = tlsConnector({ identity: CLIENT, pinFor: () => SERVER.fingerprint });
    const conn = await connect("127.0.0.1", server.port, signal());
    assert.equal(await within(conn.read(new Uint8Array(64)), "the read"), null);
    assert.equal(await conn.read(new Uint8Array(64)), null, "and stays at the end");
    await assert.rejects(() => conn.write(new Uint8Array([1])), /closed/);
    conn.close();
  } finally {
    await server.close();
  }
});

Deno.test("reads keep the bytes they could not take for the next read", async () => {
  const server = await listener([CLIENT]);
  const connect = tlsConnector({ identity: CLIENT, pinFor: () => SERVER.fingerprint });
  const conn = await connect("127.0.0.1", server.address.port, signal());
  try {
    for (const chunk of [1, 7, 1000]) {
      await writeAll(conn, requestBytes("GET", "/any?size=30000"));
      const answer = await readAnswer(conn, "GET", chunk);
      assert.deepEqual(answer.body, pattern(30_000));
    }
    assert.equal(await conn.read(new Uint8Array(0)), 0);
  } finally {
    conn.close();
    await server.close();
  }
});

Deno.test("64 MiB written and read at once come back whole and in order", async () => {
  // An echo server: it writes back what it reads.
  const server = await rawServer((socket) => socket.pipe(socket));
  const connect = tlsConnector({ identity: CLIENT, pinFor: () => SERVER.fingerprint });
  const conn = await connect("127.0.0.1", server.port, signal());
  try {
    const total = 64 * 1024 * 1024;
    const data = pattern(total, 7);
    let accepted = 0;
    const writing = (async () => {
      // Writes of every size, the copy of each taken before it resolves:
      // scribbling over the source afterwards must not change what is sent.
      for (let offset = 0, size = 1; offset < total; size = (size * 7) % (1 << 20) + 1) {
        const piece = data.slice(offset, Math.min(total, offset + size));
        const n = await conn.write(piece);
        piece.fill(0);
        offset += n;
        accepted += n;
      }
    })();
    const back = new Uint8Array(total);
    let received = 0;
    const p = new Uint8Array(100_000);
    while (received < total) {
      const n = await within(conn.read(p.subarray(0, 1 + (received % 100_000))), "the echo");
      assert.notEqual(n, null);
      back.set(p.subarray(0, n!), received);
      received += n!;
    }
    await writing;
    assert.equal(accepted, total);
    assert.ok(back.every((byte, i) => byte === data[i]), "every byte came back in order");
  } finally {
    conn.close();
    await server.close();
  }
});

Deno.test("close() ends a pending read; reads and writes after it reject", async () => {
  const server = await rawServer();
  const connect = tlsConnector({ identity: CLIENT, pinFor: () => SERVER.fingerprint });
  const conn = await connect("127.0.0.1", server.port, signal());
  try {
    const pending = conn.read(new Uint8Array(10));
    // One read at a time: a second is a bug of the caller's.
    await assert.rejects(() => conn.read(new Uint8Array(10)), (error) => {
      assert.ok(error instanceof AssertionError);
      assert.match(error.message, /already pending/);
      return true;
    });
    conn.close();
    await assert.rejects(() => within(pending, "the pending read"), /closed/);
    await assert.rejects(() => conn.read(new Uint8Array(10)), /closed/);
    await assert.rejects(() => conn.write(new Uint8Array(10)), /closed/);
    conn.close(); // twice is harmless
    await until("the server to see the close", () => server.closed === 1, SOON);
  } finally {
    await server.close();
  }
});
