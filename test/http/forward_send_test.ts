/**
 * The forwarder's sending (src/http/forward.ts): a request and its headers
 * on a kept-alive connection, which requests are resent on a fresh one and
 * which never are, and what the caller's abort and close() end.
 */

import assert from "node:assert/strict";
import { until } from "../helpers/until.ts";
import { Forwarder } from "../../src/http/forward.ts";
import { FORWARDED_BY_HEADER } from "../../src/net/headers.ts";
import {
  countingConnect,
  delay,
  faultyConnect,
  header,
  keepAliveHandler,
  request,
  SOON,
  text,
  withForwarder,
  withRaw,
  withServe,
} from "./forward_peers.ts";

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
      await until(
        "the pool to drop the closed connection",
        () => forwarder.stats().idle === 0,
        SOON,
      );
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
      await until(
        "the pool to drop the closed connection",
        () => forwarder.stats().open === 0,
        SOON,
      );
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
      await until("the request to arrive", () => server.requests.length === 1, SOON);
      controller.abort(new Error("the client went away"));
      await assert.rejects(result, /the client went away/);
      assert.equal(forwarder.stats().open, 0);
      await until("the connection to close", () => server.closedByClient === 1, SOON);
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
    await until("the connection to close", () => server.closedByClient === 1, SOON);
    const got = await forwarder.forward(server.url, request("GET", "/"));
    assert.deepEqual(got, {
      kind: "unreachable",
      written: false,
      reason: "the forwarder is closed",
    });
    assert.equal(server.connections, 1);
  });
});
