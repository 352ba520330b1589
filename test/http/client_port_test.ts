/**
 * The client port's table of routes, served by Deno.serve on loopback and
 * asked with raw HTTP/1.1 (a fetch would resolve a path's dot segments
 * before sending it).
 */

import assert from "node:assert/strict";
import { createPortHandler } from "../../src/http/client_handler.ts";
import type { PortContext } from "../../src/http/port_context.ts";
import { CLIENT_ROUTES, CLUSTER_ROUTES } from "../../src/http/routes/tables.ts";
import type { Route } from "../../src/http/routes/route.ts";
import { textResponse } from "../../src/http/answers.ts";
import { handshakeProblem } from "../../src/websockets/handshake.ts";

/** A node serving the class `counter`, whose events answer the path they ran with. */
function context(ran: string[]): PortContext {
  return {
    nodeId: "node-a",
    tenant: "default",
    maxBodyBytes: 1024,
    hasClass: (name) => name === "counter",
    notReadyReason: () => undefined,
    handshakeProblem,
    dispatch: (key, request) => {
      ran.push(`${key.name} ${request.path}`);
      return Promise.resolve({
        kind: "response",
        response: { status: 200, headers: [], body: new TextEncoder().encode("ran\n") },
      });
    },
    renderMetrics: () => "wasmkeep_up 1\n",
  };
}

/** Serves `routes` under `context` for `body`, then stops. */
async function serving(
  routes: readonly Route[],
  ctx: PortContext,
  body: (port: number) => Promise<void>,
): Promise<void> {
  const server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    createPortHandler(routes, ctx),
  );
  try {
    await body(server.addr.port);
  } finally {
    await server.shutdown();
  }
}

/** A GET of `target` exactly as written: its status, node header and first body line. */
async function rawGet(
  port: number,
  target: string,
): Promise<{ status: number; node: string; line: string }> {
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  await conn.write(
    new TextEncoder().encode(`GET ${target} HTTP/1.1\r\nhost: a\r\nconnection: close\r\n\r\n`),
  );
  const text = await new Response(conn.readable).text();
  const [head, body] = text.split("\r\n\r\n");
  const status = Number(head.split(" ")[1]);
  const node = /^x-wasmkeep-node: (.*)$/im.exec(head)?.[1] ?? "";
  return { status, node, line: body.split("\n")[0] };
}

Deno.test("the client port routes health, ready, metrics and actors, each answer naming the node", async () => {
  const ran: string[] = [];
  await serving(CLIENT_ROUTES, context(ran), async (port) => {
    assert.deepEqual(await rawGet(port, "/_wasmkeep/health"), {
      status: 200,
      node: "node-a",
      line: "ok",
    });
    assert.deepEqual(await rawGet(port, "/_wasmkeep/ready"), {
      status: 200,
      node: "node-a",
      line: "ready",
    });
    assert.equal((await rawGet(port, "/_wasmkeep/metrics")).line, "wasmkeep_up 1");
    assert.deepEqual(await rawGet(port, "/actor/counter/alice/x"), {
      status: 200,
      node: "node-a",
      line: "ran",
    });
    assert.deepEqual(await rawGet(port, "/elsewhere"), {
      status: 404,
      node: "node-a",
      line: "not found",
    });
  });
  assert.deepEqual(ran, ["alice /x"]);
});

Deno.test("the cluster port's table serves no metrics", async () => {
  await serving(CLUSTER_ROUTES, context([]), async (port) => {
    assert.equal((await rawGet(port, "/_wasmkeep/metrics")).status, 404);
    assert.equal((await rawGet(port, "/_wasmkeep/health")).status, 200);
  });
});

Deno.test("a route is one module and one line in a table", async () => {
  const admin: Route = {
    matches: ({ url }) => url.pathname === "/_admin",
    answer: () => textResponse(200, "admin"),
  };
  await serving([admin, ...CLIENT_ROUTES], context([]), async (port) => {
    assert.deepEqual(await rawGet(port, "/_admin"), { status: 200, node: "node-a", line: "admin" });
  });
});

Deno.test("a '.' or '..' for an actor's class or name is a bad name (400 with the reason), not a missing class", async () => {
  const ran: string[] = [];
  const badName = "bad actor name: the name must not be '.' or '..'";
  const badClass = "bad actor class: the class must not be '.' or '..'";
  await serving(CLIENT_ROUTES, context(ran), async (port) => {
    for (
      const [target, line] of [
        ["/actor/counter/..", badName],
        ["/actor/counter/.", badName],
        ["/actor/counter/%2e%2e", badName],
        ["/actor/counter/%2E%2e/x", badName],
        ["/actor/counter/./x", badName],
        ["/actor/../x", badClass],
        ["/actor/%2e%2e/counter/x", badClass],
        ["/actor/./counter/x", badClass],
        // The URL parser takes a backslash for a slash in http: URLs.
        ["/actor/counter\\..", badName],
        ["/actor/counter\\%2e%2e", badName],
        ["/actor/..\\x", badClass],
        ["/actor\\..\\counter\\x", badClass],
        // As other bad names get it.
        ["/actor/counter/a..b", "bad actor name: the name must not contain '..'"],
      ]
    ) {
      assert.deepEqual(await rawGet(port, target), { status: 400, node: "node-a", line }, target);
    }
    // A path climbing back inside an actor's path is resolved as before.
    assert.equal((await rawGet(port, "/actor/counter/alice/a/../b")).status, 200);
  });
  assert.deepEqual(ran, ["alice /b"]);
});

Deno.test("an empty class, or one no node could have (control characters, too long), is a bad class (400), not a missing one", async () => {
  const rule = "bad actor class: a class name is lower-case letters, digits, '-' and '_', " +
    "starting with a letter, at most 63 characters";
  await serving(CLIENT_ROUTES, context([]), async (port) => {
    const empty = "bad actor class: the path names no class (/actor/<class>/<name>)";
    for (const target of ["/actor//x", "/actor/"]) {
      assert.deepEqual(await rawGet(port, target), { status: 400, node: "node-a", line: empty });
    }
    for (const target of ["/actor/%00/x", "/actor/a%01b/x", `/actor/${"a".repeat(300)}/x`]) {
      assert.deepEqual(
        await rawGet(port, target),
        { status: 400, node: "node-a", line: rule },
        target,
      );
    }
    // A class of a valid shape that this node lacks stays a 404.
    assert.deepEqual(await rawGet(port, "/actor/nosuch/x"), {
      status: 404,
      node: "node-a",
      line: "no actor class 'nosuch' on this node",
    });
    assert.equal((await rawGet(port, "/actor/Counter/x")).status, 404);
  });
});
