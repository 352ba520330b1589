import assert from "node:assert/strict";
import { FakeClock } from "../bucket/fake_clock.ts";
import { pending } from "../helpers/pending.ts";
import {
  type Connect,
  Forwarder,
  type ForwarderOptions,
  type ForwardRequest,
  type ForwardResult,
} from "../../src/http/forward.ts";
import { FORWARDED_BY_HEADER } from "../../src/net/headers.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

function request(
  method: string,
  path: string,
  body = "",
  headers: [string, string][] = [],
): ForwardRequest {
  return { method, path, headers, body: encoder.encode(body) };
}

function text(result: ForwardResult): string {
  assert.equal(result.kind, "response", JSON.stringify(result));
  return decoder.decode((result as { body: Uint8Array }).body);
}

function header(result: ForwardResult, name: string): string | undefined {
  assert.equal(result.kind, "response", JSON.stringify(result));
  return (result as { headers: [string, string][] }).headers.find(([n]) => n === name)?.[1];
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

async function waitFor(condition: () => boolean, what: string, ms = 3000): Promise<void> {
  const start = Date.now();
  while (!condition()) {
    if (Date.now() - start > ms) throw new Error(`timed out waiting for ${what}`);
    await delay(5);
  }
}

function closeQuietly(conn: Deno.Conn): void {
  try {
    conn.close();
  } catch {
    // Already closed.
  }
}

interface RawRequest {
  connection: number;
  head: string;
  body: string;
}

/** One accepted connection of a {@linkcode RawServer}. */
class RawPeer {
  #buffer = new Uint8Array(0);

  constructor(readonly conn: Deno.Conn, readonly server: RawServer, readonly index: number) {}

  async #fill(): Promise<boolean> {
    const chunk = new Uint8Array(64 * 1024);
    const n = await this.conn.read(chunk);
    if (n === null) return false;
    const joined = new Uint8Array(this.#buffer.length + n);
    joined.set(this.#buffer);
    joined.set(chunk.subarray(0, n), this.#buffer.length);
    this.#buffer = joined;
    return true;
  }

  /** Reads one request (head and `content-length` body); null when the client closed. */
  async readRequest(): Promise<RawRequest | null> {
    let end: number;
    while ((end = decoder.decode(this.#buffer).indexOf("\r\n\r\n")) < 0) {
      if (!(await this.#fill())) return null;
    }
    const head = decoder.decode(this.#buffer.subarray(0, end));
    const match = /\r\ncontent-length: (\d+)/i.exec(head);
    const length = match ? Number(match[1]) : 0;
    while (this.#buffer.length < end + 4 + length) {
      if (!(await this.#fill())) return null;
    }
    const body = decoder.decode(this.#buffer.subarray(end + 4, end + 4 + length));
    this.#buffer = this.#buffer.subarray(end + 4 + length);
    const seen = { connection: this.index, head, body };
    this.server.requests.push(seen);
    return seen;
  }

  /** Waits until the client closes the connection. */
  async waitForClose(): Promise<void> {
    try {
      while (await this.#fill());
    } catch {
      // Reset or closed by the server: the same here.
    }
  }

  async send(data: string | Uint8Array): Promise<void> {
    const bytes = typeof data === "string" ? encoder.encode(data) : data;
    for (let offset = 0; offset < bytes.length;) {
      offset += await this.conn.write(bytes.subarray(offset));
    }
  }
}

/** A TCP server on loopback whose handler writes exactly the bytes a test needs. */
class RawServer {
  readonly listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  readonly requests: RawRequest[] = [];
  connections = 0;
  /** Connections whose client closed them (the handler saw the end). */
  closedByClient = 0;
  readonly #open = new Set<Deno.Conn>();
  readonly #tasks: Promise<void>[] = [];
  readonly #accepting: Promise<void>;

  constructor(handler: (peer: RawPeer) => Promise<void>) {
    this.#accepting = this.#accept(handler);
  }

  get url(): string {
    return `http://127.0.0.1:${this.listener.addr.port}`;
  }

  async #accept(handler: (peer: RawPeer) => Promise<void>): Promise<void> {
    try {
      for await (const conn of this.listener) {
        const peer = new RawPeer(conn, this, ++this.connections);
        this.#open.add(conn);
        this.#tasks.push(
          handler(peer).catch(() => {}).finally(() => {
            this.#open.delete(conn);
            closeQuietly(conn);
          }),
        );
      }
    } catch {
      // The listener closed.
    }
  }

  async close(): Promise<void> {
    this.listener.close();
    for (const conn of this.#open) closeQuietly(conn);
    await this.#accepting;
    await Promise.allSettled(this.#tasks);
  }
}

/** A handler answering every request on a connection with `conn <index>`, kept alive. */
function keepAliveHandler(
  answer = (peer: RawPeer, _seen: RawRequest) => {
    const body = `conn ${peer.index}`;
    return `HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\n\r\n${body}`;
  },
): (peer: RawPeer) => Promise<void> {
  return async (peer) => {
    while (true) {
      const seen = await peer.readRequest();
      if (!seen) {
        peer.server.closedByClient++;
        return;
      }
      await peer.send(answer(peer, seen));
    }
  };
}

/** `Deno.connect`, counted. */
function countingConnect(): { count: number; connect: Connect } {
  const counter = {
    count: 0,
    connect: (hostname: string, port: number, signal: AbortSignal) => {
      counter.count++;
      return Deno.connect({ hostname, port, signal });
    },
  };
  return counter;
}

/** A connection whose `failAt`-th write fails with a broken pipe, after `acceptFirst` bytes. */
class FaultyConn {
  writes = 0;
  constructor(
    readonly inner: Deno.Conn,
    readonly failAt: number,
    readonly acceptFirst: number,
  ) {}
  read(buffer: Uint8Array): Promise<number | null> {
    return this.inner.read(buffer);
  }
  write(bytes: Uint8Array): Promise<number> {
    this.writes++;
    if (this.writes === this.failAt && this.acceptFirst > 0) {
      return this.inner.write(bytes.subarray(0, this.acceptFirst));
    }
    if (this.writes === this.failAt + (this.acceptFirst > 0 ? 1 : 0)) {
      this.inner.close();
      return Promise.reject(new Deno.errors.BrokenPipe("Broken pipe (os error 32)"));
    }
    return this.inner.write(bytes);
  }
  close(): void {
    closeQuietly(this.inner);
  }
}

/** Connections whose first one fails at its `failAt`-th write; later ones are plain. */
function faultyConnect(failAt: number, acceptFirst = 0): { count: number; connect: Connect } {
  const counter = {
    count: 0,
    connect: async (hostname: string, port: number, signal: AbortSignal) => {
      const inner = await Deno.connect({ hostname, port, signal });
      return ++counter.count === 1
        ? new FaultyConn(inner, failAt, acceptFirst) as unknown as Deno.Conn
        : inner;
    },
  };
  return counter;
}

async function withForwarder(
  options: Partial<ForwarderOptions>,
  body: (forwarder: Forwarder) => Promise<void>,
): Promise<void> {
  const forwarder = new Forwarder({ nodeId: "node-a", ...options });
  try {
    await body(forwarder);
  } finally {
    await forwarder.close();
  }
}

async function withRaw(
  handler: (peer: RawPeer) => Promise<void>,
  body: (server: RawServer) => Promise<void>,
): Promise<void> {
  const server = new RawServer(handler);
  try {
    await body(server);
  } finally {
    await server.close();
  }
}

async function withServe(
  handler: (request: Request) => Response | Promise<Response>,
  body: (url: string) => Promise<void>,
): Promise<void> {
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, handler);
  try {
    await body(`http://127.0.0.1:${server.addr.port}`);
  } finally {
    await server.shutdown();
  }
}

Deno.test("forward: a GET and a POST with a body round-trip through Deno.serve", async () => {
  await withServe(async (req) => {
    const url = new URL(req.url);
    return new Response(`${req.method} ${url.pathname}${url.search} [${await req.text()}]`, {
      status: req.method === "POST" ? 201 : 200,
      headers: {
        "x-forwarded-by": req.headers.get(FORWARDED_BY_HEADER) ?? "",
        "x-host": req.headers.get("host") ?? "",
      },
    });
  }, async (url) => {
    await withForwarder({}, async (forwarder) => {
      const got = await forwarder.forward(url, request("GET", "/actor/counter/alice?x=1&y=2"));
      assert.equal(got.kind, "response");
      assert.equal((got as { status: number }).status, 200);
      assert.equal(text(got), "GET /actor/counter/alice?x=1&y=2 []");
      assert.equal(header(got, "x-forwarded-by"), "node-a");
      assert.equal(header(got, "x-host"), new URL(url).host);

      const body = "é".repeat(50_000); // Over the size written in one call with the head.
      const posted = await forwarder.forward(
        url,
        request("POST", "/actor/counter/alice/add", body, [["host", "public.example"]]),
      );
      assert.equal((posted as { status: number }).status, 201);
      assert.equal(text(posted), `POST /actor/counter/alice/add [${body}]`);
      assert.equal(header(posted, "x-host"), "public.example");
    });
  });
});

Deno.test("forward: sequential requests reuse one kept-alive connection", async () => {
  await withServe((req) => new Response(new URL(req.url).pathname), async (url) => {
    const counter = countingConnect();
    await withForwarder({ connect: counter.connect }, async (forwarder) => {
      for (let i = 0; i < 5; i++) {
        assert.equal(text(await forwarder.forward(url, request("GET", `/r${i}`))), `/r${i}`);
      }
      assert.equal(counter.count, 1);
      assert.deepEqual(forwarder.stats(), { open: 1, idle: 1, waiting: 0 });
    });
  });
});

Deno.test("forward: hop-by-hop headers are dropped, content-length and forwarded-by set", async () => {
  await withRaw(keepAliveHandler(), async (server) => {
    await withForwarder({}, async (forwarder) => {
      await forwarder.forward(
        server.url,
        request("PUT", "/p", "abc", [
          ["Connection", "keep-alive, X-Private"],
          ["Keep-Alive", "timeout=5"],
          ["Transfer-Encoding", "chunked"],
          ["TE", "trailers"],
          ["Trailer", "x-t"],
          ["Upgrade", "h2c"],
          ["Proxy-Authorization", "secret"],
          ["X-Private", "hop"],
          ["Content-Length", "999"],
          [FORWARDED_BY_HEADER, "someone-else"],
          ["X-Kept", "yes"],
        ]),
      );
      await forwarder.forward(server.url, request("GET", "/g"));
      const [put, get] = server.requests.map((r) => r.head.toLowerCase().split("\r\n"));
      assert.deepEqual(put, [
        "put /p http/1.1",
        `host: ${new URL(server.url).host}`,
        "x-kept: yes",
        `${FORWARDED_BY_HEADER}: node-a`,
        "content-length: 3",
      ]);
      assert.equal(server.requests[0].body, "abc");
      assert.deepEqual(get.slice(2), [`${FORWARDED_BY_HEADER}: node-a`]);
    });
  });
});

Deno.test("forward: a request or peer that cannot be sent is a TypeError, never written", async () => {
  await withForwarder({}, async (forwarder) => {
    await assert.rejects(forwarder.forward("http://127.0.0.1:1", request("GET", "x")), TypeError);
    await assert.rejects(
      forwarder.forward("http://127.0.0.1:1", request("GET", "/a b")),
      TypeError,
    );
    await assert.rejects(
      forwarder.forward("http://127.0.0.1:1", request("GET", "/", "", [["x", "a\r\nb: c"]])),
      TypeError,
    );
    await assert.rejects(forwarder.forward("https://127.0.0.1:1", request("GET", "/")), /TLS/);
    assert.equal(forwarder.stats().open, 0);
  });
});

Deno.test("forward: a kept-alive connection the peer closed is replaced; the request is seen once", async () => {
  await withRaw(async (peer) => {
    const seen = await peer.readRequest();
    if (!seen) return;
    const body = `conn ${peer.index}`;
    await peer.send(`HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
    // Returning closes the connection the client keeps in its pool.
  }, async (server) => {
    await withForwarder({}, async (forwarder) => {
      assert.equal(text(await forwarder.forward(server.url, request("GET", "/one"))), "conn 1");
      await waitFor(() => forwarder.stats().idle === 0, "the pool to drop the closed connection");
      assert.equal(forwarder.stats().open, 0);
      assert.equal(
        text(await forwarder.forward(server.url, request("POST", "/two", "x"))),
        "conn 2",
      );
      await delay(50);
      assert.equal(server.connections, 2);
      assert.deepEqual(server.requests.map((r) => [r.connection, r.head.split(" ")[1]]), [
        [1, "/one"],
        [2, "/two"],
      ]);
    });
  });
});

Deno.test("forward: after a body read past the buffer, a close while idle is still seen", async () => {
  const body = "b".repeat(100_000);
  await withRaw(async (peer) => {
    const seen = await peer.readRequest();
    if (!seen) return;
    await peer.send(
      `HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\n\r\n${body.slice(0, 10)}`,
    );
    await delay(5);
    await peer.send(body.slice(10));
    // Returning closes the connection the client keeps in its pool.
  }, async (server) => {
    await withForwarder({}, async (forwarder) => {
      assert.equal(text(await forwarder.forward(server.url, request("GET", "/one"))), body);
      await waitFor(() => forwarder.stats().open === 0, "the pool to drop the closed connection");
      assert.equal(text(await forwarder.forward(server.url, request("POST", "/two", "x"))), body);
      assert.equal(server.connections, 2);
      assert.deepEqual(server.requests.map((r) => r.head.split(" ")[1]), ["/one", "/two"]);
    });
  });
});

Deno.test("forward: a first write that fails at once on a reused connection goes on a fresh one, once", async () => {
  await withRaw(keepAliveHandler(), async (server) => {
    const faulty = faultyConnect(2);
    await withForwarder({ connect: faulty.connect }, async (forwarder) => {
      assert.equal(text(await forwarder.forward(server.url, request("GET", "/1"))), "conn 1");
      assert.equal(text(await forwarder.forward(server.url, request("POST", "/2", "b"))), "conn 2");
      assert.equal(text(await forwarder.forward(server.url, request("GET", "/3"))), "conn 2");
      assert.equal(faulty.count, 2);
      assert.deepEqual(server.requests.map((r) => r.head.split(" ")[1]), ["/1", "/2", "/3"]);
    });
  });
});

Deno.test("forward: a first write that fails on a new connection is unreachable, unwritten, not resent", async () => {
  await withRaw(keepAliveHandler(), async (server) => {
    const faulty = faultyConnect(1);
    await withForwarder({ connect: faulty.connect }, async (forwarder) => {
      const got = await forwarder.forward(server.url, request("POST", "/1", "b"));
      assert.equal(got.kind, "unreachable");
      assert.equal((got as { written: boolean }).written, false);
      assert.equal(faulty.count, 1);
      await delay(50);
      assert.equal(server.requests.length, 0);
      assert.equal(forwarder.stats().open, 0);
    });
  });
});

Deno.test("forward: a write that fails after bytes were accepted is never resent", async () => {
  await withRaw(keepAliveHandler(), async (server) => {
    const faulty = faultyConnect(2, 5);
    await withForwarder({ connect: faulty.connect }, async (forwarder) => {
      assert.equal(text(await forwarder.forward(server.url, request("GET", "/1"))), "conn 1");
      const got = await forwarder.forward(server.url, request("POST", "/2", "body"));
      assert.equal(got.kind, "unreachable");
      assert.equal((got as { written: boolean }).written, true);
      assert.equal(faulty.count, 1);
      await delay(50);
      assert.equal(server.connections, 1);
      assert.deepEqual(server.requests.map((r) => r.head.split(" ")[1]), ["/1"]);
    });
  });
});

Deno.test("forward: a peer that reads the request and closes is unreachable, written, seen once", async () => {
  await withRaw(async (peer) => {
    await peer.readRequest();
  }, async (server) => {
    await withForwarder({}, async (forwarder) => {
      const got = await forwarder.forward(server.url, request("POST", "/once", "x"));
      assert.deepEqual(got, {
        kind: "unreachable",
        written: true,
        reason: `http://127.0.0.1:${
          new URL(server.url).port
        }: the connection closed before an answer`,
        // A new connection closed without a byte of answer: over TLS, a refusal.
        unansweredNew: true,
      });
      await delay(100);
      assert.equal(server.connections, 1);
      assert.equal(server.requests.length, 1);
      assert.equal(forwarder.stats().open, 0);
    });
  });
});

Deno.test("forward: on a reused connection too, a request read then dropped is never resent", async () => {
  await withRaw(async (peer) => {
    await peer.readRequest();
    await peer.send("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
    await peer.readRequest();
  }, async (server) => {
    await withForwarder({}, async (forwarder) => {
      assert.equal(text(await forwarder.forward(server.url, request("GET", "/1"))), "ok");
      const got = await forwarder.forward(server.url, request("GET", "/2"));
      assert.equal(got.kind, "unreachable");
      assert.equal((got as { written: boolean }).written, true);
      // The peer answered on this connection before: not a handshake's refusal.
      assert.equal((got as { unansweredNew?: boolean }).unansweredNew, undefined);
      await delay(100);
      assert.equal(server.connections, 1);
      assert.deepEqual(server.requests.map((r) => r.head.split(" ")[1]), ["/1", "/2"]);
    });
  });
});

Deno.test("forward: connection refused is unreachable and unwritten", async () => {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const port = listener.addr.port;
  listener.close();
  await withForwarder({}, async (forwarder) => {
    const got = await forwarder.forward(`http://127.0.0.1:${port}`, request("POST", "/", "x"));
    assert.equal(got.kind, "unreachable");
    assert.equal((got as { written: boolean }).written, false);
    assert.match((got as { reason: string }).reason, /could not connect/);
    assert.equal(forwarder.stats().open, 0);
  });
});

Deno.test("forward: a silent peer times out 30 s after the request was written", async () => {
  const clock = new FakeClock();
  await withRaw(async (peer) => {
    await peer.readRequest();
    await peer.waitForClose();
    peer.server.closedByClient++;
  }, async (server) => {
    await withForwarder({ clock }, async (forwarder) => {
      const result = forwarder.forward(server.url, request("GET", "/silent"));
      await waitFor(() => server.requests.length === 1, "the request to arrive");
      await clock.advance(29_999);
      assert.ok(await pending(result));
      await clock.advance(1);
      assert.deepEqual(await result, { kind: "timeout" });
      assert.equal(forwarder.stats().open, 0);
      await waitFor(() => server.closedByClient === 1, "the connection to close");
      assert.equal(server.requests.length, 1);
    });
  });
});

Deno.test("forward: requests in flight together each time out 30 s after their own start", async () => {
  const clock = new FakeClock();
  await withRaw(async (peer) => {
    while (true) {
      const seen = await peer.readRequest();
      if (!seen) break;
      if (seen.head.startsWith("GET /answer")) {
        await peer.send("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
      }
    }
    peer.server.closedByClient++;
  }, async (server) => {
    await withForwarder({ clock }, async (forwarder) => {
      const arrived = (n: number) => waitFor(() => server.requests.length === n, `request ${n}`);
      // t = 0: one answered at once (the timer stays armed for its deadline), one silent.
      assert.equal(text(await forwarder.forward(server.url, request("GET", "/answer"))), "ok");
      const a = forwarder.forward(server.url, request("GET", "/a"));
      await arrived(2);
      await clock.advance(5_000);
      const controller = new AbortController();
      const b = forwarder.forward(server.url, request("GET", "/b"), { signal: controller.signal });
      await arrived(3);
      await clock.advance(5_000);
      const c = forwarder.forward(server.url, request("GET", "/c"));
      await arrived(4);
      // t = 10 s: b, in the middle of the list, is aborted.
      controller.abort(new Error("gone"));
      await assert.rejects(b, /gone/);
      await clock.advance(19_999);
      assert.ok(await pending(a));
      await clock.advance(1);
      assert.deepEqual(await a, { kind: "timeout" });
      assert.ok(await pending(c));
      await clock.advance(9_999);
      assert.ok(await pending(c));
      await clock.advance(1);
      assert.deepEqual(await c, { kind: "timeout" });
      assert.equal(server.requests.length, 4);
      // The answered request's connection went on to carry a: every one is closed.
      assert.deepEqual(forwarder.stats(), { open: 0, idle: 0, waiting: 0 });
    });
  });
});

Deno.test("forward: no connection within 5 s is unreachable and unwritten", async () => {
  const clock = new FakeClock();
  const hang: Connect = (_host, _port, signal) =>
    new Promise((_resolve, reject) => {
      signal.addEventListener("abort", () => reject(signal.reason), { once: true });
    });
  await withForwarder({ clock, connect: hang }, async (forwarder) => {
    const result = forwarder.forward("http://10.255.255.1:8080", request("GET", "/"));
    await clock.advance(4_999);
    assert.ok(await pending(result));
    await clock.advance(1);
    const got = await result;
    assert.equal(got.kind, "unreachable");
    assert.equal((got as { written: boolean }).written, false);
    assert.match((got as { reason: string }).reason, /within 5000 ms/);
    assert.equal(forwarder.stats().open, 0);
  });
});

Deno.test("forward: over the connection limit a request waits for a slot, up to the connect timeout", async () => {
  const clock = new FakeClock();
  await withRaw(async (peer) => {
    await peer.readRequest();
    await peer.waitForClose();
  }, async (silent) => {
    await withRaw(keepAliveHandler(), async (other) => {
      await withForwarder({ clock, maxOpenConnections: 1 }, async (forwarder) => {
        const first = forwarder.forward(silent.url, request("GET", "/held"));
        await waitFor(() => silent.requests.length === 1, "the first request to arrive");
        const second = forwarder.forward(other.url, request("GET", "/waits"));
        await waitFor(() => forwarder.stats().waiting === 1, "the second request to wait");
        await clock.advance(4_999);
        assert.ok(await pending(second));
        await clock.advance(1);
        const got = await second;
        assert.equal(got.kind, "unreachable");
        assert.equal((got as { written: boolean }).written, false);
        assert.match((got as { reason: string }).reason, /1 connections open, the most allowed/);
        assert.equal(other.connections, 0);
        await clock.advance(25_000);
        assert.deepEqual(await first, { kind: "timeout" });
      });
    });
  });
});

Deno.test("forward: a waiting request gets the connection the one before it frees", async () => {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => release = resolve);
  await withRaw(
    keepAliveHandler((peer, seen) => {
      const body = `${seen.head.split(" ")[1]} on conn ${peer.index}`;
      return `HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\n\r\n${body}`;
    }),
    async (server) => {
      const counter = countingConnect();
      const slow: Connect = async (host, port, signal) => {
        const conn = await counter.connect(host, port, signal);
        await gate;
        return conn;
      };
      await withForwarder({ connect: slow, maxOpenConnections: 1 }, async (forwarder) => {
        const first = forwarder.forward(server.url, request("GET", "/a"));
        const second = forwarder.forward(server.url, request("GET", "/b"));
        await waitFor(() => forwarder.stats().waiting === 1, "the second request to wait");
        release();
        assert.equal(text(await first), "/a on conn 1");
        assert.equal(text(await second), "/b on conn 1");
        assert.equal(counter.count, 1);
      });
    },
  );
});

Deno.test("forward: at the connection limit an idle connection to another peer is closed for a new one", async () => {
  await withRaw(keepAliveHandler(), async (a) => {
    await withRaw(keepAliveHandler(), async (b) => {
      await withForwarder({ maxOpenConnections: 1 }, async (forwarder) => {
        assert.equal(text(await forwarder.forward(a.url, request("GET", "/"))), "conn 1");
        assert.equal(text(await forwarder.forward(b.url, request("GET", "/"))), "conn 1");
        assert.deepEqual(forwarder.stats(), { open: 1, idle: 1, waiting: 0 });
        await waitFor(() => a.closedByClient === 1, "a's connection to close");
      });
    });
  });
});

Deno.test("forward: idle connections are bounded per peer and closed after the idle timeout", async () => {
  const clock = new FakeClock();
  let release!: () => void;
  const gate = new Promise<void>((resolve) => release = resolve);
  await withRaw(async (peer) => {
    await peer.readRequest();
    await gate;
    await peer.send("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
    await peer.waitForClose();
    peer.server.closedByClient++;
  }, async (server) => {
    await withForwarder({ clock, maxIdlePerPeer: 1 }, async (forwarder) => {
      const both = [
        forwarder.forward(server.url, request("GET", "/1")),
        forwarder.forward(server.url, request("GET", "/2")),
      ];
      await waitFor(() => server.requests.length === 2, "both requests to arrive");
      release();
      for (const result of await Promise.all(both)) assert.equal(text(result), "ok");
      assert.deepEqual(forwarder.stats(), { open: 1, idle: 1, waiting: 0 });
      await waitFor(() => server.closedByClient === 1, "the extra connection to close");
      await clock.advance(29_999);
      assert.equal(forwarder.stats().idle, 1);
      await clock.advance(1);
      assert.deepEqual(forwarder.stats(), { open: 0, idle: 0, waiting: 0 });
      await waitFor(() => server.closedByClient === 2, "the idle connection to close");
    });
  });
});

Deno.test("forward: each idle connection closes at its own idle timeout, counted from its last use", async () => {
  const clock = new FakeClock();
  let release!: () => void;
  const gate = new Promise<void>((resolve) => release = resolve);
  await withRaw(async (peer) => {
    for (let first = true;; first = false) {
      const seen = await peer.readRequest();
      if (!seen) {
        peer.server.closedByClient++;
        return;
      }
      if (first) await gate;
      const body = `conn ${peer.index}`;
      await peer.send(`HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
    }
  }, async (server) => {
    await withForwarder({ clock }, async (forwarder) => {
      const both = [
        forwarder.forward(server.url, request("GET", "/1")),
        forwarder.forward(server.url, request("GET", "/2")),
      ];
      await waitFor(() => server.requests.length === 2, "both requests to arrive");
      release();
      await Promise.all(both);
      assert.deepEqual(forwarder.stats(), { open: 2, idle: 2, waiting: 0 });
      await clock.advance(10_000);
      // The most recently used one goes again, and its idle time starts over.
      const again = text(await forwarder.forward(server.url, request("GET", "/3")));
      await clock.advance(19_999);
      assert.equal(forwarder.stats().idle, 2);
      await clock.advance(1);
      assert.deepEqual(forwarder.stats(), { open: 1, idle: 1, waiting: 0 });
      await waitFor(() => server.closedByClient === 1, "the older connection to close");
      await clock.advance(9_999);
      assert.equal(forwarder.stats().idle, 1);
      await clock.advance(1);
      assert.deepEqual(forwarder.stats(), { open: 0, idle: 0, waiting: 0 });
      await waitFor(() => server.closedByClient === 2, "the other connection to close");
      assert.equal(server.connections, 2);
      assert.equal(`conn ${server.requests[2].connection}`, again);
    });
  });
});

Deno.test("forward: peer addresses that differ past the port share one pool; a bad one fails each time", async () => {
  await withRaw(keepAliveHandler(), async (server) => {
    await withForwarder({}, async (forwarder) => {
      // More addresses than are remembered: each still parses the same.
      for (let i = 0; i < 300; i++) {
        const peer = i % 2 === 0 ? `${server.url}/?n=${i}` : new URL(`${server.url}/x${i}`);
        assert.equal(text(await forwarder.forward(peer, request("GET", "/"))), "conn 1");
      }
      assert.equal(server.connections, 1);
      for (let i = 0; i < 2; i++) {
        await assert.rejects(
          forwarder.forward("ftp://127.0.0.1:1", request("GET", "/")),
          TypeError,
        );
        await assert.rejects(forwarder.forward("not a url", request("GET", "/")), TypeError);
      }
    });
  });
});

Deno.test("forward: a chunked answer is reassembled and its connection reused", async () => {
  await withRaw(async (peer) => {
    while (await peer.readRequest()) {
      await peer.send("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\n\r\n");
      await delay(5);
      await peer.send("5;ext=1\r\nhel");
      await delay(5);
      await peer.send("lo\r\n7\r\n, world\r\n0\r\n");
      await delay(5);
      await peer.send("x-trailer: t\r\n\r\n");
    }
  }, async (server) => {
    await withForwarder({}, async (forwarder) => {
      for (let i = 0; i < 2; i++) {
        const got = await forwarder.forward(server.url, request("GET", "/"));
        assert.equal(text(got), "hello, world");
        assert.equal(header(got, "x-a"), "1");
        assert.equal(header(got, "transfer-encoding"), undefined);
      }
      assert.equal(server.connections, 1);
    });
  });
});

Deno.test("forward: answers split at every awkward place, or larger than a read, come out whole", async () => {
  const big = (size: number, seed: number) =>
    Array.from({ length: size }, (_, i) => String.fromCharCode(97 + (i * 7 + seed) % 26)).join("");
  const longHeader = big(40_000, 1); // A head over a connection's 16 KiB buffer.
  const chunk = big(70_000, 2); // A chunk over it.
  const body = big(300_000, 3); // A content-length body over it.
  const answers: Record<string, string[]> = {
    // The head's blank line split across writes, one byte at a time at the end.
    "/split": [
      "HTTP/1.1 200 OK\r",
      "\ncontent-length: 5\r\nx-a: 1\r\n",
      "\r",
      "\nhe",
      "llo",
    ],
    "/long-head": [`HTTP/1.1 200 OK\r\nx-long: ${longHeader}\r\ncontent-length: 2\r\n\r\nok`],
    "/big-chunk": [
      "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n",
      `${chunk.length.toString(16)}\r\n${chunk.slice(0, 1000)}`,
      chunk.slice(1000, 50_000),
      `${chunk.slice(50_000)}\r`,
      "\n3\r\nend\r\n0\r\n\r\n",
    ],
    "/big-body": [
      `HTTP/1.1 200 OK\r\ncontent-length: ${body.length}\r\n\r\n${body.slice(0, 10)}`,
      body.slice(10, 20_000),
      body.slice(20_000),
    ],
  };
  await withRaw(async (peer) => {
    while (true) {
      const seen = await peer.readRequest();
      if (!seen) return;
      for (const piece of answers[seen.head.split(" ")[1]]) {
        await peer.send(piece);
        await delay(5);
      }
    }
  }, async (server) => {
    await withForwarder({}, async (forwarder) => {
      for (let round = 0; round < 2; round++) {
        const split = await forwarder.forward(server.url, request("GET", "/split"));
        assert.equal(text(split), "hello");
        assert.equal(header(split, "x-a"), "1");
        const long = await forwarder.forward(server.url, request("GET", "/long-head"));
        assert.equal(text(long), "ok");
        assert.equal(header(long, "x-long"), longHeader);
        const chunked = await forwarder.forward(server.url, request("GET", "/big-chunk"));
        assert.equal(text(chunked), chunk + "end");
        const whole = await forwarder.forward(server.url, request("GET", "/big-body"));
        assert.equal(text(whole), body);
      }
      assert.equal(server.connections, 1);
      assert.deepEqual(forwarder.stats(), { open: 1, idle: 1, waiting: 0 });
    });
  });
});

Deno.test("forward: header values are Latin-1 both ways", async () => {
  await withRaw(async (peer) => {
    // The raw bytes of the request's head, and an answer header with the byte 0xe9.
    let head = new Uint8Array(0);
    while (!new TextDecoder("latin1").decode(head).includes("\r\n\r\n")) {
      const chunk = new Uint8Array(1024);
      const n = await peer.conn.read(chunk);
      if (n === null) return;
      head = new Uint8Array([...head, ...chunk.subarray(0, n)]);
    }
    const value = Array.from(head.subarray(head.indexOf(0x78 /* x */)))
      .slice(0, 9);
    await peer.send(
      new Uint8Array([
        ...encoder.encode("HTTP/1.1 200 OK\r\nx-answer: caf"),
        0xe9,
        ...encoder.encode(`\r\ncontent-length: ${value.length}\r\n\r\n`),
        ...value,
      ]),
    );
  }, async (server) => {
    await withForwarder({}, async (forwarder) => {
      const got = await forwarder.forward(
        server.url,
        request("GET", "/", "", [["x", "caf\u00e9"]]),
      );
      assert.equal(header(got, "x-answer"), "caf\u00e9");
      // "x: caf" then the single byte 0xe9, then CR LF.
      assert.deepEqual(
        Array.from((got as { body: Uint8Array }).body),
        [...encoder.encode("x: caf"), 0xe9, 13, 10],
      );
    });
  });
});

Deno.test("forward: bytes after a complete answer are an answer, and its connection is not kept", async () => {
  await withRaw(async (peer) => {
    await peer.readRequest();
    await peer.send("HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nokHTTP/1.1 200 OK\r\n");
    await peer.waitForClose();
    peer.server.closedByClient++;
  }, async (server) => {
    await withForwarder({}, async (forwarder) => {
      assert.equal(text(await forwarder.forward(server.url, request("GET", "/"))), "ok");
      assert.deepEqual(forwarder.stats(), { open: 0, idle: 0, waiting: 0 });
      await waitFor(() => server.closedByClient === 1, "the connection to close");
    });
  });
});

Deno.test("forward: a body delimited by the close, longer than several reads, comes out whole", async () => {
  const body = "z".repeat(300_000);
  await withRaw(async (peer) => {
    await peer.readRequest();
    await peer.send(`HTTP/1.0 200 OK\r\n\r\n${body.slice(0, 100)}`);
    await delay(5);
    await peer.send(body.slice(100));
  }, async (server) => {
    await withForwarder({}, async (forwarder) => {
      assert.equal(text(await forwarder.forward(server.url, request("GET", "/"))), body);
      assert.equal(forwarder.stats().open, 0);
    });
  });
});

Deno.test("forward: an answer over the body limit is refused, never truncated", async () => {
  const answers = [
    // Declared over the default 32 MiB: refused before reading it.
    `HTTP/1.1 200 OK\r\ncontent-length: ${32 * 1024 * 1024 + 1}\r\n\r\nxx`,
    // Chunked, over a limit of 1000 in its second chunk.
    `HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n258\r\n${"a".repeat(600)}\r\n258\r\n${
      "b".repeat(600)
    }\r\n0\r\n\r\n`,
    // Delimited by the close, over 1000.
    `HTTP/1.1 200 OK\r\n\r\n${"c".repeat(1500)}`,
  ];
  await withRaw(async (peer) => {
    const seen = await peer.readRequest();
    if (seen) await peer.send(answers[Number(seen.head.split(" ")[1].slice(1))]);
  }, async (server) => {
    for (const [index, maxBodyBytes] of [[0, undefined], [1, 1000], [2, 1000]]) {
      await withForwarder({ maxBodyBytes }, async (forwarder) => {
        const got = await forwarder.forward(server.url, request("GET", `/${index}`));
        assert.equal(got.kind, "unreachable", `answer ${index}`);
        assert.equal((got as { written: boolean }).written, true);
        assert.match(
          (got as { reason: string }).reason,
          new RegExp(`larger than ${maxBodyBytes ?? 32 * 1024 * 1024} bytes`),
        );
        assert.equal(forwarder.stats().open, 0);
      });
    }
  });
});

Deno.test("forward: a body of exactly the limit, and one delimited by the close, are accepted", async () => {
  await withRaw(async (peer) => {
    while (true) {
      const seen = await peer.readRequest();
      if (!seen) return;
      if (seen.head.startsWith("GET /exact")) {
        await peer.send(`HTTP/1.1 200 OK\r\ncontent-length: 1000\r\n\r\n${"e".repeat(1000)}`);
      } else {
        await peer.send(`HTTP/1.0 200 OK\r\n\r\n${"u".repeat(1000)}`);
        return;
      }
    }
  }, async (server) => {
    await withForwarder({ maxBodyBytes: 1000 }, async (forwarder) => {
      assert.equal(
        text(await forwarder.forward(server.url, request("GET", "/exact"))).length,
        1000,
      );
      assert.equal(forwarder.stats().idle, 1);
      assert.equal(
        text(await forwarder.forward(server.url, request("GET", "/until-close"))).length,
        1000,
      );
      assert.equal(forwarder.stats().open, 0);
      assert.equal(server.connections, 1);
    });
  });
});

Deno.test("forward: HEAD and 204 have no body, and the connection is reused", async () => {
  await withServe((req) => {
    const path = new URL(req.url).pathname;
    if (path === "/empty") return new Response(null, { status: 204, headers: { "x-e": "1" } });
    return new Response("hello world");
  }, async (url) => {
    const counter = countingConnect();
    await withForwarder({ connect: counter.connect }, async (forwarder) => {
      const head = await forwarder.forward(url, request("HEAD", "/"));
      assert.equal((head as { status: number }).status, 200);
      assert.equal(text(head), "");
      assert.equal(header(head, "content-length"), "11");
      const empty = await forwarder.forward(url, request("DELETE", "/empty"));
      assert.equal((empty as { status: number }).status, 204);
      assert.equal(header(empty, "x-e"), "1");
      assert.equal(text(empty), "");
      assert.equal(text(await forwarder.forward(url, request("GET", "/"))), "hello world");
      assert.equal(counter.count, 1);
    });
  });
});

Deno.test("forward: a 304 with a content-length, and an interim 100, carry no body", async () => {
  await withRaw(async (peer) => {
    await peer.readRequest();
    await peer.send('HTTP/1.1 304 Not Modified\r\ncontent-length: 10\r\netag: "x"\r\n\r\n');
    await peer.readRequest();
    await peer.send("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok");
    await peer.waitForClose();
  }, async (server) => {
    await withForwarder({}, async (forwarder) => {
      const cached = await forwarder.forward(server.url, request("GET", "/"));
      assert.equal((cached as { status: number }).status, 304);
      assert.equal(text(cached), "");
      assert.equal(header(cached, "etag"), '"x"');
      assert.equal(text(await forwarder.forward(server.url, request("POST", "/", "x"))), "ok");
      assert.equal(server.connections, 1);
    });
  });
});

Deno.test("forward: an answer with connection: close is not kept", async () => {
  await withRaw(async (peer) => {
    await peer.readRequest();
    await peer.send("HTTP/1.1 200 OK\r\nConnection: close\r\ncontent-length: 2\r\n\r\nok");
    await peer.waitForClose();
    peer.server.closedByClient++;
  }, async (server) => {
    await withForwarder({}, async (forwarder) => {
      const got = await forwarder.forward(server.url, request("GET", "/"));
      assert.equal(text(got), "ok");
      assert.equal(header(got, "connection"), undefined);
      assert.deepEqual(forwarder.stats(), { open: 0, idle: 0, waiting: 0 });
      await waitFor(() => server.closedByClient === 1, "the connection to close");
      assert.equal(text(await forwarder.forward(server.url, request("GET", "/"))), "ok");
      assert.equal(server.connections, 2);
    });
  });
});

Deno.test("forward: a malformed answer is unreachable, written", async () => {
  await withRaw(async (peer) => {
    await peer.readRequest();
    await peer.send("HTTP/1.1 2xx nope\r\n\r\n");
  }, async (server) => {
    await withForwarder({}, async (forwarder) => {
      const got = await forwarder.forward(server.url, request("GET", "/"));
      assert.equal(got.kind, "unreachable");
      assert.equal((got as { written: boolean }).written, true);
      assert.match((got as { reason: string }).reason, /not HTTP\/1\.x/);
    });
  });
});

Deno.test("forward: a malformed header line is unreachable, written, and named", async () => {
  const heads = [
    "HTTP/1.1 200 OK\r\nx-a: 1\r\nno colon here\r\ncontent-length: 0\r\n\r\n",
    "HTTP/1.1 200 OK\r\n: empty name\r\n\r\n",
    "HTTP/1.1 200 OK\r\nbad name: 1\r\n\r\n",
    "HTTP/1.1 200 OK\r\nx-ok:\t padded \t\r\nx-bad: a\x01b\r\n\r\n",
  ];
  await withRaw(async (peer) => {
    const seen = await peer.readRequest();
    if (seen) await peer.send(heads[Number(seen.head.split(" ")[1].slice(1))]);
  }, async (server) => {
    await withForwarder({}, async (forwarder) => {
      for (
        const [index, line] of ["no colon here", ": empty name", "bad name: 1", "x-bad: a\x01b"]
          .entries()
      ) {
        const got = await forwarder.forward(server.url, request("GET", `/${index}`));
        assert.equal(got.kind, "unreachable");
        assert.equal((got as { written: boolean }).written, true);
        assert.equal(
          (got as { reason: string }).reason,
          `http://127.0.0.1:${new URL(server.url).port}: the answer has a malformed header line ${
            JSON.stringify(line)
          }`,
        );
      }
    });
  });
});

Deno.test("forward: the caller's abort ends the wait and closes the connection", async () => {
  await withRaw(async (peer) => {
    await peer.readRequest();
    await peer.waitForClose();
    peer.server.closedByClient++;
  }, async (server) => {
    await withForwarder({}, async (forwarder) => {
      const controller = new AbortController();
      const result = forwarder.forward(server.url, request("GET", "/"), {
        signal: controller.signal,
      });
      await waitFor(() => server.requests.length === 1, "the request to arrive");
      controller.abort(new Error("the client went away"));
      await assert.rejects(result, /the client went away/);
      assert.equal(forwarder.stats().open, 0);
      await waitFor(() => server.closedByClient === 1, "the connection to close");
    });
  });
});

Deno.test("forward: close() closes idle connections and refuses new requests", async () => {
  await withRaw(keepAliveHandler(), async (server) => {
    const forwarder = new Forwarder({ nodeId: "node-a" });
    assert.equal(text(await forwarder.forward(server.url, request("GET", "/"))), "conn 1");
    assert.equal(forwarder.stats().idle, 1);
    await forwarder.close();
    assert.deepEqual(forwarder.stats(), { open: 0, idle: 0, waiting: 0 });
    await waitFor(() => server.closedByClient === 1, "the connection to close");
    const got = await forwarder.forward(server.url, request("GET", "/"));
    assert.deepEqual(got, {
      kind: "unreachable",
      written: false,
      reason: "the forwarder is closed",
    });
    assert.equal(server.connections, 1);
  });
});
