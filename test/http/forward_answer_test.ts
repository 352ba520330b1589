/**
 * The forwarder's reading of answers (src/http/forward.ts): chunked, split
 * anywhere, Latin-1 headers, the body limit, answers without a body, and
 * malformed answers.
 */

import assert from "node:assert/strict";
import { until } from "../helpers/until.ts";
import {
  countingConnect,
  delay,
  encoder,
  header,
  request,
  SOON,
  text,
  withForwarder,
  withRaw,
  withServe,
} from "./forward_peers.ts";

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
      await until("the connection to close", () => server.closedByClient === 1, SOON);
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
      await until("the connection to close", () => server.closedByClient === 1, SOON);
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
