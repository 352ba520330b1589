/**
 * The HTTP/1.1 server of the cluster port and the simulator
 * (src/net/h1/server.ts), over real TCP on loopback, its answers read by
 * the forwarder's own answer parser: framing both ways, the refusals and
 * their connections, the bounds, the idle wait, upgrades and the signal.
 */

import assert from "node:assert/strict";
import { readAnswer } from "../../../src/net/h1/answer.ts";
import { Connection } from "../../../src/net/h1/connection.ts";
import { DeadlineQueue } from "../../../src/net/deadlines.ts";
import { type H1ServerOptions, serveHttp1 } from "../../../src/net/h1/server.ts";
import { systemClock } from "../../../src/time/clock.ts";
import { readExactly, tcpPair, writeAll } from "../../../src/testing/loopback.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();
const MAX_BODY = 64 * 1024;

/** A server on one end of a loopback pair; the client end and a reader of its answers. */
async function serve(options: Partial<H1ServerOptions> & { idleTimeoutMs?: number } = {}) {
  const [server, client] = await tcpPair();
  const served = serveHttp1(server, {
    handler: (request) => Promise.resolve(new Response(`${request.method} ${request.url}`)),
    url: (host, target) => `http://${host ?? "none"}${target}`,
    maxHeadBytes: 1024,
    maxBodyBytes: MAX_BODY,
    ...options,
    idle: new DeadlineQueue(systemClock, options.idleTimeoutMs ?? 10_000, () => false),
  });
  const answers = new Connection("", client, () => {});
  const send = (text: string | Uint8Array) =>
    writeAll(client, typeof text === "string" ? encoder.encode(text) : text);
  const answer = async (method = "GET") => {
    const { status, headers, body } = await readAnswer(answers, method, 1 << 26);
    return { status, headers: new Headers(headers), text: decoder.decode(body) };
  };
  /** Whether the server closed the connection (it reads the end next). */
  const ended = async () => {
    try {
      return !await answers.fill();
    } catch {
      return true;
    }
  };
  const close = async () => {
    answers.close();
    await served;
  };
  return { client, send, answer, ended, close, served };
}

Deno.test("h1 server: requests one after another on a kept-alive connection, pipelined ones in order", async () => {
  const t = await serve();
  await t.send("GET /a HTTP/1.1\r\nhost: x\r\n\r\nGET /b HTTP/1.1\r\nhost: y\r\n\r\n");
  assert.equal((await t.answer()).text, "GET http://x/a");
  assert.equal((await t.answer()).text, "GET http://y/b");
  await t.send("POST /c HTTP/1.1\r\ncontent-length: 0\r\n\r\n");
  const third = await t.answer();
  assert.equal(third.status, 200);
  assert.equal(third.text, "POST http://none/c");
  assert.equal(third.headers.get("content-length"), String(third.text.length));
  await t.close();
});

Deno.test("h1 server: a request body streams to the handler, by length and chunked", async () => {
  const t = await serve({
    handler: async (request) => new Response(`got ${(await request.text()).length}`),
  });
  const body = "x".repeat(40_000);
  await t.send(`POST /a HTTP/1.1\r\ncontent-length: ${body.length}\r\n\r\n${body}`);
  assert.equal((await t.answer()).text, "got 40000");
  await t.send(
    "POST /a HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n",
  );
  assert.equal((await t.answer()).text, "got 5");
  await t.close();
});

Deno.test("h1 server: an answer in several pieces goes chunked, empty pieces left out", async () => {
  const pieces = ["ab", "", "cde", ""];
  const t = await serve({
    handler: () =>
      Promise.resolve(
        new Response(
          new ReadableStream({
            start(controller) {
              for (const piece of pieces) controller.enqueue(encoder.encode(piece));
              controller.close();
            },
          }),
        ),
      ),
  });
  await t.send("GET / HTTP/1.1\r\n\r\n");
  const answer = await t.answer();
  assert.equal(answer.headers.get("transfer-encoding"), null, "the parser removes hop-by-hop");
  assert.equal(answer.text, "abcde");
  // And the connection is in step for the next one.
  await t.send("GET /next HTTP/1.1\r\n\r\n");
  assert.equal((await t.answer()).text, "abcde");
  await t.close();
});

Deno.test("h1 server: HEAD states the length it leaves out; 204 has no body", async () => {
  let status = 200;
  const t = await serve({
    handler: () => Promise.resolve(new Response(status === 204 ? null : "hello", { status })),
  });
  await t.send("HEAD / HTTP/1.1\r\n\r\n");
  const head = await t.answer("HEAD");
  assert.equal(head.headers.get("content-length"), "5");
  assert.equal(head.text, "");
  status = 204;
  await t.send("GET / HTTP/1.1\r\n\r\n");
  const empty = await t.answer();
  assert.equal(empty.status, 204);
  assert.equal(empty.headers.get("content-length"), null);
  await t.close();
});

Deno.test("h1 server: what cannot be framed is answered 400 in one line and the connection closed", async () => {
  const cases: [string, string][] = [
    ["GET / HTTP/2.0\r\n\r\n", "the request line is not HTTP/1.x"],
    ["GET / HTTP/1.1\r\nbad header\r\n\r\n", "a request header is not valid"],
    [
      "POST / HTTP/1.1\r\ncontent-length: 3\r\ntransfer-encoding: chunked\r\n\r\n",
      "a request cannot have both content-length and transfer-encoding",
    ],
    [
      "POST / HTTP/1.1\r\ntransfer-encoding: gzip\r\n\r\n",
      "the request's transfer-encoding is not chunked alone",
    ],
    [
      "POST / HTTP/1.1\r\ncontent-length: 3, 4\r\n\r\n",
      "the request's content-length is not valid",
    ],
    ["GET / HTTP/1.1\r\ncontent-length: 3\r\n\r\nabc", "a GET request cannot have a body"],
  ];
  for (const [request, line] of cases) {
    let ran = false;
    const t = await serve({
      handler: () => {
        ran = true;
        return Promise.resolve(new Response("ran"));
      },
    });
    await t.send(request);
    const answer = await t.answer();
    assert.equal(answer.status, 400, request);
    assert.equal(answer.text, line + "\n");
    assert.equal(
      answer.headers.get("connection"),
      null,
      "a hop-by-hop header, removed by the parser",
    );
    assert.equal(await t.ended(), true, `closed after: ${request}`);
    assert.equal(ran, false);
    await t.close();
  }
});

Deno.test("h1 server: a target that is not a path is 400, and the connection serves on", async () => {
  const t = await serve();
  await t.send("GET http://elsewhere/ HTTP/1.1\r\n\r\n");
  const answer = await t.answer();
  assert.equal(answer.status, 400);
  assert.equal(answer.text, "the request target must be a path\n");
  await t.send("GET /ok HTTP/1.1\r\n\r\n");
  assert.equal((await t.answer()).text, "GET http://none/ok");
  await t.close();
});

Deno.test("h1 server: a head past the limit is 431; a declared body past it 413, read before the close", async () => {
  const big = await serve();
  await big.send(`GET / HTTP/1.1\r\nx: ${"a".repeat(2_000)}\r\n\r\n`);
  assert.equal((await big.answer()).status, 431);
  assert.equal(await big.ended(), true);
  await big.close();

  const body = await serve();
  const length = MAX_BODY + 1;
  await body.send(`POST / HTTP/1.1\r\ncontent-length: ${length}\r\n\r\n`);
  const sending = body.send(new Uint8Array(length)).catch(() => {});
  const answer = await body.answer();
  assert.equal(answer.status, 413);
  assert.equal(answer.text, `the request body is over ${MAX_BODY} bytes\n`);
  await sending;
  body.client.closeWrite();
  assert.equal(await body.ended(), true);
  await body.close();
});

Deno.test("h1 server: a chunked body past the limit fails the handler's read and is answered 413", async () => {
  let failure = "";
  const t = await serve({
    handler: async (request) => {
      try {
        await request.arrayBuffer();
      } catch (error) {
        failure = (error as Error).message;
      }
      return new Response("read");
    },
  });
  const chunk = (MAX_BODY / 2 + 1).toString(16);
  await t.send(`POST / HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n`);
  const piece = new Uint8Array(MAX_BODY / 2 + 1);
  const sending = (async () => {
    for (let i = 0; i < 2; i++) {
      await t.send(`${chunk}\r\n`);
      await t.send(piece);
      await t.send("\r\n");
    }
  })().catch(() => {});
  const answer = await t.answer();
  assert.equal(answer.status, 413);
  assert.match(failure, new RegExp(`over ${MAX_BODY} bytes`));
  await sending;
  await t.close();
});

Deno.test("h1 server: a body the handler leaves unread is read past, and the next request is served", async () => {
  const t = await serve({ handler: () => Promise.resolve(new Response("ignored it")) });
  const body = "y".repeat(60_000);
  await t.send(`PUT /a HTTP/1.1\r\ncontent-length: ${body.length}\r\n\r\n`);
  const sending = t.send(body);
  assert.equal((await t.answer()).text, "ignored it");
  await sending;
  await t.send("GET /b HTTP/1.1\r\n\r\n");
  assert.equal((await t.answer()).text, "ignored it");
  await t.close();
});

Deno.test("h1 server: HTTP/1.0 and connection: close end the connection after the answer", async () => {
  for (const request of ["GET / HTTP/1.0\r\n\r\n", "GET / HTTP/1.1\r\nconnection: close\r\n\r\n"]) {
    const t = await serve();
    await t.send(request);
    assert.equal((await t.answer()).status, 200);
    assert.equal(await t.ended(), true, request);
    await t.close();
  }
});

Deno.test("h1 server: expect 100-continue gets its interim answer before the body is sent", async () => {
  const t = await serve({
    handler: async (request) => new Response(await request.text()),
  });
  await t.send("POST / HTTP/1.1\r\ncontent-length: 4\r\nexpect: 100-continue\r\n\r\n");
  const interim = decoder.decode(await readExactly(t.client, 25));
  assert.equal(interim, "HTTP/1.1 100 Continue\r\n\r\n");
  await t.send("data");
  assert.equal((await t.answer()).text, "data");
  await t.close();
});

Deno.test("h1 server: a peer that stops sending inside a head is closed after the idle wait", async () => {
  const t = await serve({ idleTimeoutMs: 150 });
  await t.send("GET / HTTP/1.1\r\nhost: x\r\n");
  const started = performance.now();
  assert.equal(await t.ended(), true);
  const waited = performance.now() - started;
  assert.ok(waited >= 100, `closed after ${waited} ms`);
  await t.close();
});

Deno.test("h1 server: the signal aborts when the peer goes away while the handler works", async () => {
  const aborted = Promise.withResolvers<string>();
  const t = await serve({
    // A kept request: answered only when its caller goes away.
    handler: (request) =>
      new Promise((resolve) => {
        request.signal.addEventListener("abort", () => {
          aborted.resolve(String(request.signal.reason));
          resolve(new Response("too late"));
        });
      }),
  });
  await t.send("GET /kept HTTP/1.1\r\n\r\n");
  await new Promise((resolve) => setTimeout(resolve, 50));
  t.client.close();
  assert.match(await aborted.promise, /the peer closed the connection/);
  await t.served;
});

Deno.test("h1 server: admit() false closes the connection unanswered", async () => {
  let admitted = true;
  const t = await serve({ admit: () => admitted });
  await t.send("GET /a HTTP/1.1\r\n\r\n");
  assert.equal((await t.answer()).status, 200);
  admitted = false;
  await t.send("GET /b HTTP/1.1\r\n\r\n");
  assert.equal(await t.ended(), true);
  await t.close();
});

Deno.test("h1 server: an accepted upgrade writes 101 and hands over the connection with the bytes after the head", async () => {
  const joined = Promise.withResolvers<{ leftover: string }>();
  const t = await serve({
    upgrade: (request) => {
      assert.equal(request.headers.get("upgrade"), "echo");
      return Promise.resolve({
        kind: "accept",
        headers: [["x-switched", "yes"]],
        join: (conn, leftover) => {
          joined.resolve({ leftover: decoder.decode(leftover) });
          void (async () => {
            const buffer = new Uint8Array(64);
            for (let n; (n = await conn.read(buffer)) !== null;) {
              await writeAll(conn, buffer.subarray(0, n));
            }
          })().catch(() => {});
        },
      });
    },
  });
  await t.send("GET /socket HTTP/1.1\r\nconnection: upgrade\r\nupgrade: echo\r\n\r\nearly");
  const head = "HTTP/1.1 101 Switching Protocols\r\nconnection: upgrade\r\nupgrade: echo\r\n" +
    "x-switched: yes\r\n\r\n";
  assert.equal(decoder.decode(await readExactly(t.client, head.length)), head);
  assert.equal((await joined.promise).leftover, "early");
  await t.send("ping");
  assert.equal(decoder.decode(await readExactly(t.client, 4)), "ping");
  t.client.close();
  await t.served;
});

Deno.test("h1 server: without an upgrade option an upgrade is 501, and a refused one gets its answer", async () => {
  const none = await serve();
  await none.send("GET / HTTP/1.1\r\nconnection: upgrade\r\nupgrade: x\r\n\r\n");
  assert.equal((await none.answer()).status, 501);
  assert.equal(await none.ended(), true);
  await none.close();

  const refused = await serve({
    upgrade: () =>
      Promise.resolve({ kind: "refuse", response: new Response("no\n", { status: 404 }) }),
  });
  await refused.send("GET / HTTP/1.1\r\nconnection: upgrade\r\nupgrade: x\r\n\r\n");
  const answer = await refused.answer();
  assert.equal(answer.status, 404);
  assert.equal(answer.text, "no\n");
  assert.equal(await refused.ended(), true);
  await refused.close();
});

Deno.test("h1 server: a handler that throws is answered 500 and told, and the connection serves on", async () => {
  const told: string[] = [];
  let fail = true;
  const t = await serve({
    handler: () => fail ? Promise.reject(new Error("boom")) : Promise.resolve(new Response("ok")),
    onHandlerError: (error, request) => told.push(`${(error as Error).message} ${request.url}`),
  });
  await t.send("GET /x HTTP/1.1\r\n\r\n");
  const answer = await t.answer();
  assert.equal(answer.status, 500);
  assert.equal(answer.text, "the node failed to answer this request; see its log\n");
  assert.deepEqual(told, ["boom http://none/x"]);
  fail = false;
  await t.send("GET /y HTTP/1.1\r\n\r\n");
  assert.equal((await t.answer()).text, "ok");
  await t.close();
});
