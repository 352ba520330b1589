/**
 * The forwarder's connections (src/http/forward.ts): the answer timeout,
 * the connect timeout, the connection limit and its waiting requests, idle
 * connections and their bounds, on a fake clock.
 */

import assert from "node:assert/strict";
import { FakeClock } from "../bucket/fake_clock.ts";
import { pending } from "../helpers/pending.ts";
import { until } from "../helpers/until.ts";
import type { Connect } from "../../src/http/forward.ts";
import {
  countingConnect,
  keepAliveHandler,
  request,
  SOON,
  text,
  withForwarder,
  withRaw,
} from "./forward_peers.ts";

Deno.test("forward: a silent peer times out 30 s after the request was written", async () => {
  const clock = new FakeClock();
  await withRaw(async (peer) => {
    await peer.readRequest();
    await peer.waitForClose();
    peer.server.closedByClient++;
  }, async (server) => {
    await withForwarder({ clock }, async (forwarder) => {
      const result = forwarder.forward(server.url, request("GET", "/silent"));
      await until("the request to arrive", () => server.requests.length === 1, SOON);
      await clock.advance(29_999);
      assert.ok(await pending(result));
      await clock.advance(1);
      assert.deepEqual(await result, { kind: "timeout" });
      assert.equal(forwarder.stats().open, 0);
      await until("the connection to close", () => server.closedByClient === 1, SOON);
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
      const arrived = (n: number) =>
        until(`request ${n}`, () => server.requests.length === n, SOON);
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
        await until("the first request to arrive", () => silent.requests.length === 1, SOON);
        const second = forwarder.forward(other.url, request("GET", "/waits"));
        await until("the second request to wait", () => forwarder.stats().waiting === 1, SOON);
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
        await until("the second request to wait", () => forwarder.stats().waiting === 1, SOON);
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
        await until("a's connection to close", () => a.closedByClient === 1, SOON);
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
      await until("both requests to arrive", () => server.requests.length === 2, SOON);
      release();
      for (const result of await Promise.all(both)) assert.equal(text(result), "ok");
      assert.deepEqual(forwarder.stats(), { open: 1, idle: 1, waiting: 0 });
      await until("the extra connection to close", () => server.closedByClient === 1, SOON);
      await clock.advance(29_999);
      assert.equal(forwarder.stats().idle, 1);
      await clock.advance(1);
      assert.deepEqual(forwarder.stats(), { open: 0, idle: 0, waiting: 0 });
      await until("the idle connection to close", () => server.closedByClient === 2, SOON);
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
      await until("both requests to arrive", () => server.requests.length === 2, SOON);
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
      await until("the older connection to close", () => server.closedByClient === 1, SOON);
      await clock.advance(9_999);
      assert.equal(forwarder.stats().idle, 1);
      await clock.advance(1);
      assert.deepEqual(forwarder.stats(), { open: 0, idle: 0, waiting: 0 });
      await until("the other connection to close", () => server.closedByClient === 2, SOON);
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
