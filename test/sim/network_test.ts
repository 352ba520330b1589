/**
 * The simulator's network between nodes (sim/network.ts) and its HTTP
 * server (sim/http_server.ts): what a partition, a pause and a crash do to
 * connections, and the real forwarder speaking to the real handler over it.
 */

import assert from "node:assert/strict";
import { type LinkState, SimNetwork } from "../../sim/network.ts";
import { serveConnection } from "../../sim/http_server.ts";
import { type Owner, type ScheduledEvent, Scheduler } from "../../sim/scheduler.ts";
import type { ByteConn } from "../../src/http/forward.ts";
import { Forwarder } from "../../src/http/forward.ts";
import type { Clock, Timer } from "../../src/time/clock.ts";
import { pending } from "../helpers/pending.ts";
import { seededRandom } from "../../src/bucket/random.ts";

class Proc implements Owner {
  dead = false;
  paused = false;
  readonly deferred: ScheduledEvent[] = [];
}

/** A clock on the scheduler's time line, its timers events of `owner`. */
function clockOf(sched: Scheduler, owner: Owner): Clock {
  return {
    now: () => sched.now,
    monotonic: () => sched.now,
    sleep: (ms) => new Promise((resolve) => sched.after(ms, resolve, owner)),
    setTimer: (ms, callback): Timer => {
      const event = sched.after(ms, callback, owner);
      return { cancel: () => sched.cancel(event) };
    },
  };
}

function world(link: (from: string, to: string) => LinkState = () => ({ state: "up" })) {
  const sched = new Scheduler(0);
  const net = new SimNetwork({ sched, latencyMs: () => 10, link });
  const client = new Proc();
  const server = new Proc();
  const accepted: ByteConn[] = [];
  net.listen("b.sim:80", { owner: server, machine: "b" }, (conn) => accepted.push(conn));
  const connect = net.connector({ owner: client, machine: "a" });
  /** A connection from a to b, once its handshake (two 10 ms delays) is over. */
  const open = async () => {
    const opened = connect("b.sim", 80, new AbortController().signal);
    await sched.runUntil(sched.now + 20);
    return await opened;
  };
  return { sched, net, client, server, accepted, connect, open };
}

const bytes = (text: string) => new TextEncoder().encode(text);

async function readText(conn: ByteConn): Promise<string> {
  const buf = new Uint8Array(64);
  const n = await conn.read(buf);
  return n === null ? "<eof>" : new TextDecoder().decode(buf.subarray(0, n));
}

Deno.test("sim network: bytes arrive in order after the delay; a close is an end of stream", async () => {
  const { sched, accepted, open } = world();
  const conn = await open();
  assert.equal(accepted.length, 1);
  await conn.write(bytes("one "));
  await conn.write(bytes("two"));
  const read = readText(accepted[0]);
  await sched.runUntil(25);
  assert.ok(await pending(read), "nothing arrives before the delay");
  await sched.runUntil(31);
  assert.equal(await read, "one ");
  assert.equal(await readText(accepted[0]), "two");
  conn.close();
  const end = readText(accepted[0]);
  await sched.runUntil(50);
  assert.equal(await end, "<eof>");
});

Deno.test("sim network: nobody listening, or a refusing partition, refuses the connection", async () => {
  const refusing = world((from) => from === "a" ? { state: "refuse" } : { state: "up" });
  const refused = refusing.connect("b.sim", 80, new AbortController().signal);
  refused.catch(() => {});
  await refusing.sched.runUntil(100);
  await assert.rejects(refused, Deno.errors.ConnectionRefused);

  const empty = world();
  const nowhere = empty.connect("c.sim", 80, new AbortController().signal);
  nowhere.catch(() => {});
  await empty.sched.runUntil(100);
  await assert.rejects(nowhere, Deno.errors.ConnectionRefused);
});

Deno.test("sim network: a silent partition hangs a connect until its signal gives up", async () => {
  const { sched, connect } = world(() => ({ state: "silent", until: 60_000 }));
  const giveUp = new AbortController();
  sched.after(5_000, () => giveUp.abort(new Error("connect timeout")));
  const opened = connect("b.sim", 80, giveUp.signal);
  opened.catch(() => {});
  await sched.runUntil(4_999);
  await sched.runUntil(5_000);
  await assert.rejects(opened, /connect timeout/);
});

Deno.test("sim network: bytes sent into a silent partition arrive once it ends", async () => {
  let cut: LinkState = { state: "up" };
  const { sched, accepted, open } = world(() => cut);
  const conn = await open();
  cut = { state: "silent", until: 5_000 };
  await conn.write(bytes("late"));
  const read = readText(accepted[0]);
  await sched.runUntil(5_009);
  assert.ok(await pending(read), "nothing arrives before the partition ends");
  await sched.runUntil(5_010);
  assert.equal(await read, "late");
});

Deno.test("sim network: a paused peer reads on resume; a crashed one resets its connections", async () => {
  const { sched, net, server, accepted, connect, open } = world();
  const conn = await open();
  server.paused = true;
  await conn.write(bytes("held"));
  await sched.runUntil(1_000);
  const read = readText(accepted[0]);
  server.paused = false;
  sched.resume(server);
  await sched.runUntil(1_001);
  assert.equal(await read, "held");

  const answer = conn.read(new Uint8Array(8));
  answer.catch(() => {});
  server.dead = true;
  net.kill(server);
  await sched.runUntil(1_100);
  await assert.rejects(answer, Deno.errors.ConnectionReset);
  // And the listener is gone with it.
  const again = connect("b.sim", 80, new AbortController().signal);
  again.catch(() => {});
  await sched.runUntil(1_200);
  await assert.rejects(again, Deno.errors.ConnectionRefused);
});

Deno.test("sim network: the real forwarder reaches a handler through the simulated HTTP server", async () => {
  const sched = new Scheduler(0);
  const net = new SimNetwork({ sched, latencyMs: () => 3, link: () => ({ state: "up" }) });
  const a = new Proc();
  const b = new Proc();
  const seen: string[] = [];
  net.listen(
    "b.sim:8080",
    { owner: b, machine: "b" },
    (conn) =>
      void serveConnection(
        conn,
        async (request) => {
          seen.push(`${request.method} ${new URL(request.url).pathname} ${await request.text()}`);
          return new Response("pong", { status: 201, headers: { "x-answer": "yes" } });
        },
        "b.sim:8080",
        clockOf(sched, b),
        seededRandom(1),
      ),
  );
  const forwarder = new Forwarder({
    nodeId: "a",
    clock: clockOf(sched, a),
    connect: net.connector({ owner: a, machine: "a" }),
  });
  const request = { method: "POST", path: "/actor/c/n/x", headers: [], body: bytes("ping") };
  const first = forwarder.forward("http://b.sim:8080", request);
  await sched.runUntil(100);
  const answer = await first;
  assert.equal(answer.kind, "response");
  if (answer.kind !== "response") return;
  assert.equal(answer.status, 201);
  assert.equal(new TextDecoder().decode(answer.body), "pong");
  assert.ok(answer.headers.some(([name, value]) => name === "x-answer" && value === "yes"));
  // A second request goes over the kept-alive connection.
  const second = forwarder.forward("http://b.sim:8080", request);
  await sched.runUntil(200);
  assert.equal((await second).kind, "response");
  assert.deepEqual(seen, ["POST /actor/c/n/x ping", "POST /actor/c/n/x ping"]);
  assert.equal(forwarder.stats().open, 1);

  // A peer frozen past the answer timeout: 504 after 30 s, not resent.
  b.paused = true;
  const frozen = forwarder.forward("http://b.sim:8080", request);
  await sched.runUntil(30_200);
  assert.deepEqual(await frozen, { kind: "timeout" });
  assert.equal(seen.length, 2);
  const closed = forwarder.close();
  await sched.runUntil(30_300);
  await closed;
});
