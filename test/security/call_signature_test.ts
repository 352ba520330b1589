import assert from "node:assert/strict";
import { FakeClock } from "../bucket/fake_clock.ts";
import { seededRandom } from "../../src/bucket/random.ts";
import { systemClock, systemRandom } from "../../src/time/clock.ts";
import {
  CALL_HEADERS,
  CALL_NODE_HEADER,
  CALL_NONCE_HEADER,
  CALL_TIME_HEADER,
  CALL_VALIDITY_MS,
  CALLER_HEADER,
  callPath,
  type CallToSign,
  CHAIN_HEADER,
  MAX_CALL_CHAIN,
  NONCE_CLOCK_MARGIN_MS,
  SIGNATURE_HEADER,
  signCall,
  stripCallHeaders,
  type VerifiedCall,
  verifyCall,
} from "../../src/security/call_signature.ts";
import { ClusterSecret, ClusterSecretUnusable } from "../../src/security/cluster_secret.ts";
import { NonceCache } from "../../src/security/nonce_cache.ts";

const BAD = "bad, expired or misaddressed signature (";
const utf8 = new TextEncoder();

function secretFrom(seed: number): ClusterSecret {
  return ClusterSecret.fromBytes(seededRandom(seed).fill(new Uint8Array(32)));
}

const CALL: CallToSign = {
  targetNode: "b",
  method: "POST",
  path: "/actor/room/lobby/messages?since=4&limit=10",
  body: utf8.encode('{"text":"hello"}'),
  caller: "acme/user/alice",
  chain: ["acme/hub/main", "acme/room/annex"],
};

/** A node `b` with its clock and nonces, a caller `a` with its own clock, one secret. */
function setup(options: { callerAheadMs?: number } = {}) {
  const clock = new FakeClock();
  const callerClock = new FakeClock(clock.now() + (options.callerAheadMs ?? 0));
  const secret = secretFrom(1);
  const nonces = new NonceCache({ clock });
  const random = seededRandom(2);
  const sign = (call: CallToSign = CALL) => signCall(secret, call, { clock: callerClock, random });
  /** What node `b` makes of a call that arrives with `headers`, and as `arrived` says. */
  const verify = (
    headers: [string, string][],
    arrived: Partial<Omit<CallToSign, "caller" | "chain">> & { thisNode?: string } = {},
  ): VerifiedCall =>
    verifyCall(secret, {
      thisNode: arrived.thisNode ?? "b",
      method: arrived.method ?? CALL.method,
      path: arrived.path ?? CALL.path,
      body: arrived.body ?? CALL.body,
      headers: new Headers(headers),
    }, { clock, nonces });
  return { clock, callerClock, secret, nonces, sign, verify };
}

function replaced(headers: [string, string][], name: string, value: string | null) {
  const out = headers.filter(([n]) => n !== name);
  if (value !== null) out.push([name, value]);
  return out;
}

function assertBad(result: VerifiedCall, what: RegExp) {
  assert.equal(result.ok, false, "refused");
  if (result.ok) return;
  assert.equal(result.kind, "bad");
  assert.ok(result.reason.startsWith(BAD), result.reason);
  assert.match(result.reason, what);
}

Deno.test("signCall/verifyCall: a signed call is accepted with its caller and chain", () => {
  const { sign, verify, nonces } = setup();
  const headers = sign();
  assert.deepEqual(headers.map(([name]) => name).sort(), [...CALL_HEADERS].sort());
  const result = verify(headers);
  assert.deepEqual(result, {
    ok: true,
    caller: "acme/user/alice",
    chain: ["acme/hub/main", "acme/room/annex"],
  });
  assert.equal(nonces.size, 1);
});

Deno.test("signCall/verifyCall: actors whose names need encoding, and no chain", () => {
  const { sign, verify } = setup();
  const call = {
    ...CALL,
    caller: "acme/user/Zoë, the 100% ☃/",
    chain: ["acme/room/a,b", "acme/room/x y"],
  };
  // A "/" would make three parts ambiguous: such a caller cannot be signed.
  assert.throws(() => sign(call), TypeError);
  call.caller = "acme/user/Zoë, the 100% ☃";
  const headers = sign(call);
  const caller = headers.find(([n]) => n === CALLER_HEADER)![1];
  assert.equal(caller, "acme/user/Zo%C3%AB%2C%20the%20100%25%20%E2%98%83");
  assert.deepEqual(verify(headers), { ok: true, caller: call.caller, chain: call.chain });
  const alone = sign({ ...CALL, chain: [] });
  assert.equal(alone.some(([n]) => n === CHAIN_HEADER), false);
  assert.deepEqual(verify(alone), { ok: true, caller: CALL.caller, chain: [] });
});

Deno.test("verifyCall: each signed field changed on the way is refused", () => {
  const { sign, verify, clock } = setup();
  const noMatch = /does not match/;
  const h = () => sign();
  assertBad(verify(h(), { thisNode: "c" }), /meant for node "b", and this is node "c"/);
  assertBad(verify(replaced(h(), CALL_NODE_HEADER, "c"), { thisNode: "c" }), noMatch);
  assertBad(verify(h(), { method: "PUT" }), noMatch);
  assertBad(verify(h(), { path: "/actor/room/other/messages?since=4&limit=10" }), noMatch);
  assertBad(verify(h(), { path: "/actor/room/lobby/messages?since=5&limit=10" }), noMatch);
  assertBad(verify(h(), { path: "/actor/room/lobby/messages" }), noMatch);
  assertBad(verify(h(), { body: utf8.encode('{"text":"hellO"}') }), noMatch);
  assertBad(verify(h(), { body: new Uint8Array(0) }), noMatch);
  assertBad(verify(replaced(h(), CALLER_HEADER, "acme/user/mallory")), noMatch);
  assertBad(verify(replaced(h(), CHAIN_HEADER, "acme/room/annex,acme/hub/main")), noMatch);
  assertBad(verify(replaced(h(), CHAIN_HEADER, "acme/hub/main")), noMatch);
  assertBad(verify(replaced(h(), CHAIN_HEADER, null)), noMatch);
  const time = Number(h().find(([n]) => n === CALL_TIME_HEADER)![1]);
  assertBad(verify(replaced(h(), CALL_TIME_HEADER, String(time + 1))), noMatch);
  assertBad(verify(replaced(h(), CALL_NONCE_HEADER, "0".repeat(32))), noMatch);
  // A signature made with another cluster's secret.
  assertBad(verify(signCall(secretFrom(2), CALL, { clock, random: systemRandom })), noMatch);
  // And the unchanged call still passes.
  assert.equal(verify(h()).ok, true);
});

Deno.test("verifyCall: fields cannot trade characters across their boundaries", () => {
  // Without a length before each field, node "bP" + method "OST" and node "b" + method
  // "POST" would sign the same input.
  const { sign, verify } = setup();
  const headers = sign({ ...CALL, targetNode: "bP", method: "OST" });
  assert.equal(verify(headers, { thisNode: "bP", method: "OST" }).ok, true);
  const moved = replaced(sign({ ...CALL, targetNode: "bP", method: "OST" }), CALL_NODE_HEADER, "b");
  assertBad(verify(moved, { thisNode: "b", method: "POST" }), /does not match/);
});

Deno.test("verifyCall: a call is accepted once; a replay is refused", () => {
  const { sign, verify, nonces } = setup();
  const headers = sign();
  assert.equal(verify(headers).ok, true);
  assertBad(verify(headers), /nonce was already used: a replayed call/);
  assert.equal(nonces.stats().seen, 1);
  // Each send has its own nonce, so the same call sent again is accepted.
  const again = sign();
  assert.notEqual(
    again.find(([n]) => n === CALL_NONCE_HEADER)![1],
    headers.find(([n]) => n === CALL_NONCE_HEADER)![1],
  );
  assert.equal(verify(again).ok, true);
});

Deno.test("verifyCall: a call that fails its signature leaves nothing in the nonce cache", () => {
  const { sign, verify, nonces } = setup();
  for (let i = 0; i < 10; i++) {
    const forged = replaced(sign(), CALL_NONCE_HEADER, i.toString(16).padStart(32, "0"));
    assert.equal(verify(forged).ok, false);
  }
  assert.equal(nonces.size, 0);
});

Deno.test("verifyCall: a call older than a minute on this node's clock is refused", async () => {
  const { sign, verify, clock } = setup();
  const atLimit = sign();
  const late = sign();
  await clock.advance(CALL_VALIDITY_MS);
  assert.equal(verify(atLimit).ok, true);
  await clock.advance(1);
  assertBad(verify(late), /expired: signed 60001 ms before this node's clock/);
});

Deno.test("verifyCall: a call dated more than a minute ahead is refused", () => {
  const ahead = setup({ callerAheadMs: CALL_VALIDITY_MS + 1 });
  assertBad(ahead.verify(ahead.sign()), /dated 60001 ms after this node's clock/);
  const atLimit = setup({ callerAheadMs: CALL_VALIDITY_MS });
  assert.equal(atLimit.verify(atLimit.sign()).ok, true);
});

Deno.test("verifyCall: a replay is refused for as long as its call time is valid", async () => {
  // A caller a minute ahead: its nonce must be kept two minutes, not one.
  const { sign, verify, clock, nonces } = setup({ callerAheadMs: CALL_VALIDITY_MS });
  const headers = sign();
  assert.equal(verify(headers).ok, true);
  await clock.advance(2 * CALL_VALIDITY_MS);
  assertBad(verify(headers), /replayed call/);
  await clock.advance(1);
  assertBad(verify(headers), /expired/);
  // Kept through the margin, against this node's clock stepping back, then forgotten.
  await clock.advance(NONCE_CLOCK_MARGIN_MS - 1);
  assert.equal(nonces.size, 1);
  await clock.advance(1);
  assert.equal(nonces.size, 0);
});

Deno.test("verifyCall: malformed or missing headers are refused, saying which", () => {
  const { sign, verify } = setup();
  const cases: [string, string | null, RegExp][] = [
    [SIGNATURE_HEADER, null, /no x-wasmkeep-signature header/],
    [SIGNATURE_HEADER, "v1=" + "a".repeat(63), /not v1= and 64 lowercase hex digits/],
    [SIGNATURE_HEADER, "v1=" + "A".repeat(64), /not v1= and 64 lowercase hex digits/],
    [CALL_NODE_HEADER, null, /no x-wasmkeep-call-node header/],
    [CALL_TIME_HEADER, null, /no x-wasmkeep-call-time header/],
    [CALL_TIME_HEADER, "soon", /x-wasmkeep-call-time is not ms since the epoch/],
    [CALL_TIME_HEADER, "1.7e12", /x-wasmkeep-call-time is not ms since the epoch/],
    [CALL_NONCE_HEADER, null, /no x-wasmkeep-call-nonce header/],
    [CALL_NONCE_HEADER, "abc", /x-wasmkeep-call-nonce is not 32 lowercase hex digits/],
    [CALLER_HEADER, null, /no x-wasmkeep-caller header/],
    [CALLER_HEADER, "acme/user", /x-wasmkeep-caller is not one tenant\/class\/name/],
    [CALLER_HEADER, "acme/user/a,acme/user/b", /x-wasmkeep-caller is not one/],
    [CALLER_HEADER, "acme/user/%E0%A4%A", /x-wasmkeep-caller is not one/],
    [CALLER_HEADER, "acme/user/a%2Fb", /x-wasmkeep-caller is not one/],
    [CHAIN_HEADER, "acme/hub/main,,acme/room/annex", /x-wasmkeep-chain is not a list/],
    [
      CHAIN_HEADER,
      Array(MAX_CALL_CHAIN + 1).fill("acme/hub/main").join(","),
      /x-wasmkeep-chain lists more than 32 actors/,
    ],
  ];
  for (const [name, value, what] of cases) {
    assertBad(verify(replaced(sign(), name, value)), what);
  }
});

Deno.test("verifyCall: a signature of another version is taken for an older node's", () => {
  const { sign, verify } = setup();
  const mac = sign().find(([n]) => n === SIGNATURE_HEADER)![1].slice(3);
  for (const signature of [`v0=${mac}`, `v2=${mac}`, mac, `sha256=${mac}`]) {
    const headers = replaced(sign(), SIGNATURE_HEADER, signature);
    assertBad(verify(headers), /not a v1 signature: a node of an older version\?\)$/);
    // Said first, whatever else such a node sends differently.
    assertBad(
      verify(replaced(headers, CALL_NONCE_HEADER, null)),
      /a node of an older version\?\)$/,
    );
  }
});

Deno.test("a malformed cluster secret refuses to sign and to verify, with its reason", () => {
  const broken = ClusterSecret.parse(utf8.encode("wasmkeep-cluster-secret 1\nnot hex\n"));
  assert.throws(
    () => signCall(broken, CALL, { clock: systemClock, random: systemRandom }),
    ClusterSecretUnusable,
  );
  const { sign } = setup();
  const clock = new FakeClock();
  const result = verifyCall(broken, {
    thisNode: "b",
    method: CALL.method,
    path: CALL.path,
    body: CALL.body,
    headers: new Headers(sign()),
  }, { clock, nonces: new NonceCache({ clock }) });
  assert.deepEqual(result, { ok: false, kind: "no-secret", reason: broken.problem });
  assert.match(broken.problem!, /cluster\/secret/);
});

Deno.test("verifyCall: a node whose nonce cache is full refuses calls as busy", () => {
  const clock = new FakeClock();
  const secret = secretFrom(1);
  const nonces = new NonceCache({ clock, maxEntries: 2 });
  const verify = (headers: [string, string][]) =>
    verifyCall(secret, { thisNode: "b", ...CALL, headers: new Headers(headers) }, {
      clock,
      nonces,
    });
  const sign = () => signCall(secret, CALL, { clock, random: systemRandom });
  assert.equal(verify(sign()).ok, true);
  assert.equal(verify(sign()).ok, true);
  const result = verify(sign());
  assert.equal(result.ok, false);
  assert.equal(!result.ok && result.kind, "busy");
  assert.match(!result.ok ? result.reason : "", /remembers as many nonces/);
  assert.equal(nonces.stats().full, 1);
});

Deno.test("signCall: refuses what cannot be signed unambiguously", () => {
  const { sign } = setup();
  assert.throws(() => sign({ ...CALL, caller: "alice" }), /not an actor \(tenant\/class\/name\)/);
  assert.throws(() => sign({ ...CALL, chain: ["acme//x"] }), TypeError);
  assert.throws(() => sign({ ...CALL, path: "/actor/room/ünicode" }), /printable ASCII/);
  assert.throws(() => sign({ ...CALL, path: "actor/room/a" }), /must start with "\/"/);
  assert.throws(() => sign({ ...CALL, targetNode: "" }), /printable ASCII/);
  assert.throws(
    () => sign({ ...CALL, chain: Array(MAX_CALL_CHAIN + 1).fill("acme/hub/main") }),
    RangeError,
  );
  const deepest = sign({ ...CALL, chain: Array(MAX_CALL_CHAIN).fill("acme/hub/main") });
  assert.equal(setup().verify(deepest).ok, true);
});

Deno.test("signCall: methods are signed as fetch sends them", () => {
  const { sign, verify } = setup();
  assert.equal(verify(sign({ ...CALL, method: "post" }), { method: "POST" }).ok, true);
  assert.equal(verify(sign({ ...CALL, method: "patch" }), { method: "patch" }).ok, true);
  assertBad(verify(sign({ ...CALL, method: "patch" }), { method: "PATCH" }), /does not match/);
});

Deno.test("stripCallHeaders removes every call header and nothing else", () => {
  const { sign } = setup();
  const headers = new Headers(sign());
  headers.set("content-type", "application/json");
  headers.set("x-wasmkeep-forwarded-by", "a");
  stripCallHeaders(headers);
  assert.deepEqual([...headers.keys()].sort(), ["content-type", "x-wasmkeep-forwarded-by"]);
});

Deno.test("a signed call over real HTTP: path, query, body and actors arrive verifiable", async () => {
  const secret = secretFrom(7);
  const nonces = new NonceCache({ clock: systemClock });
  const results: VerifiedCall[] = [];
  await using server = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    async (request) => {
      const result = verifyCall(secret, {
        thisNode: "b",
        method: request.method,
        path: callPath(request.url),
        body: new Uint8Array(await request.arrayBuffer()),
        headers: request.headers,
      }, { clock: systemClock, nonces });
      results.push(result);
      return new Response(null, { status: result.ok ? 204 : 403 });
    },
  );
  const url = new URL(
    `http://127.0.0.1:${server.addr.port}/actor/room/Zoë's room/x?q=a b&r=%2F`,
  );
  const body = crypto.getRandomValues(new Uint8Array(65536));
  const call = {
    targetNode: "b",
    method: "put",
    path: callPath(url),
    body,
    caller: "acme/user/Zoë, 100%",
    chain: ["acme/hub/a,b"],
  };
  const headers = signCall(secret, call, { clock: systemClock, random: systemRandom });
  const send = () => fetch(url, { method: "put", body, headers });
  const first = await send();
  assert.equal(first.status, 204);
  const replay = await send();
  assert.equal(replay.status, 403);
  assert.deepEqual(results[0], { ok: true, caller: call.caller, chain: call.chain });
  assertBad(results[1], /replayed call/);
});

Deno.test("verifyCall: a call dated before the node's process started is refused, as a process that is gone may have accepted it", async () => {
  const { sign, verify, clock } = setup();
  const signed = sign();
  assert.equal(verify(signed).ok, true);
  // The node restarts 20 s later, well within the call's minute, with an empty cache.
  await clock.advance(20_000);
  const restarted = new NonceCache({ clock });
  const replay = () =>
    verifyCall(secretFrom(1), {
      thisNode: "b",
      method: CALL.method,
      path: CALL.path,
      body: CALL.body,
      headers: new Headers(signed),
    }, { clock, nonces: restarted });
  assertBad(replay(), /dated before this node's process started, 20000 ms earlier/);
  assert.equal(restarted.size, 0);
});
