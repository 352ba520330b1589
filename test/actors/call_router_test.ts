import assert from "node:assert/strict";
import { callPathProblem, createCallHandler } from "../../src/actors/call_router.ts";
import type { ActorRequest } from "../../src/actors/protocol.ts";
import { systemClock } from "../../src/time/clock.ts";

const caller = { tenant: "default", class: "shop", name: "s1" };
const target = { tenant: "default", class: "vault", name: "main" };

/** A call handler whose routes record the events they are given and answer 200. */
function recordingHandler() {
  const routed: ActorRequest[] = [];
  const onCall = createCallHandler({
    hasClass: () => true,
    route: (_target, request) => {
      routed.push(request);
      return Promise.resolve({
        kind: "response",
        response: { status: 200, headers: [], body: new Uint8Array() },
      });
    },
  }, systemClock);
  return { onCall, routed };
}

function call(request: Partial<ActorRequest>) {
  return {
    caller,
    chain: [],
    target,
    request: {
      method: "GET",
      path: "/",
      query: "",
      headers: [],
      body: new Uint8Array(),
      ...request,
    },
  };
}

Deno.test("actors.call: the callee gets header names in lower case and only the node's caller header", async () => {
  const { onCall, routed } = recordingHandler();
  const answer = await onCall(call({
    headers: [
      ["X-WasmKeep-Caller", "default/admin/root"],
      ["X-WASMKEEP-CHAIN", "default/admin/root"],
      ["Content-Type", "text/plain"],
    ],
  }));
  assert.equal(answer.ok, true);
  assert.deepEqual(routed[0].headers, [
    ["content-type", "text/plain"],
    ["x-wasmkeep-caller", "default/shop/s1"],
  ]);
});

Deno.test("actors.call: a path that would step out of the callee's, or end it, is refused unsent", async () => {
  const { onCall, routed } = recordingHandler();
  for (
    const path of [
      "/../../vault/other",
      "/a/%2e%2E/b",
      "/./x",
      "..",
      "/a?b=1",
      "/a#b",
      "/..\\x",
    ]
  ) {
    const answer = await onCall(call({ path }));
    assert.equal(answer.ok, false, path);
    assert.match(!answer.ok ? answer.error : "", /^bad path: /, path);
  }
  assert.equal(routed.length, 0);
  for (const path of ["/items/7", "/a.b/..c/...", "/", "", "items"]) {
    assert.equal(callPathProblem(path.startsWith("/") ? path : `/${path}`), undefined, path);
    assert.equal((await onCall(call({ path }))).ok, true, path);
  }
  assert.deepEqual(routed.map((r) => r.path), ["/items/7", "/a.b/..c/...", "/", "/", "/items"]);
});
