import assert from "node:assert/strict";
import { ActorHost } from "../../src/actors/actor_host.ts";
import type { ExecutorPool } from "../../src/actors/executor_pool.ts";
import { createLogger } from "../../src/log.ts";
import { systemClock } from "../../src/time/clock.ts";

Deno.test("an event the pool cannot run is answered 500 and leaves no count behind", async () => {
  const failing = {
    executorOf: () => 0,
    run: () => Promise.reject(new Error("no executor")),
    drop: () => {},
  } as unknown as ExecutorPool;
  let generation = 0n;
  const holds = {
    take: () => Promise.resolve({ generation: ++generation }),
    takeFailure: () => ({ kind: "failed" as const, status: 503, message: "not taken" }),
    release: () => Promise.resolve(),
    stillHolds: () => Promise.resolve(true),
  };
  const host = new ActorHost(
    failing,
    holds,
    { maxQueuedEvents: 1, maxResidentActors: 10, idleMs: 60_000 },
    systemClock,
    createLogger({ sink: () => {} }),
  );
  const key = { tenant: "default", class: "c", name: "n" };
  const request = { method: "GET", path: "/", query: "", headers: [], body: new Uint8Array() };
  for (let i = 0; i < 4; i++) {
    const outcome = await host.dispatch(key, request);
    assert.equal(outcome.kind === "failed" && outcome.status, 500, `event ${i}`);
  }
  assert.equal(host.inFlight, 0);
  assert.equal(await host.drain(100), true);
});

Deno.test("a hand-over refuses new events, lets the queued ones finish, then drops and releases, in that order", async () => {
  const steps: string[] = [];
  const answers: (() => void)[] = [];
  const pool = {
    executorOf: () => 0,
    run: () =>
      new Promise((resolve) => {
        steps.push("run");
        answers.push(() => {
          steps.push("answered");
          resolve({
            kind: "response",
            response: { status: 200, headers: [], body: new Uint8Array() },
          });
        });
      }),
    drop: () => {
      steps.push("drop");
      return Promise.resolve(true);
    },
  } as unknown as ExecutorPool;
  const holds = {
    take: () => Promise.resolve({ generation: 1n }),
    takeFailure: () => ({ kind: "failed" as const, status: 503, message: "not taken" }),
    release: () => {
      steps.push("release");
      return Promise.resolve();
    },
    stillHolds: () => Promise.resolve(true),
  };
  const host = new ActorHost(
    pool,
    holds,
    { maxQueuedEvents: 4, maxResidentActors: 10, idleMs: 60_000 },
    systemClock,
    createLogger({ sink: () => {} }),
  );
  const key = { tenant: "default", class: "c", name: "n" };
  const request = { method: "GET", path: "/", query: "", headers: [], body: new Uint8Array() };
  const first = host.dispatch(key, request);
  while (!host.holds(key)) await new Promise((r) => setTimeout(r, 1));
  const queued = host.dispatch(key, request);
  assert.equal(await host.handOver({ ...key, name: "other" }), false, "not held: nothing done");
  const handing = host.handOver(key);
  const refused = await host.dispatch(key, request);
  assert.equal(refused.kind === "failed" && refused.status, 503);
  assert.equal(await host.handOver(key), false, "already handed over");
  assert.equal(steps.includes("drop"), false, "nothing dropped while events are under way");
  for (const answer of answers.splice(0)) answer();
  assert.equal((await first).kind, "response");
  assert.equal((await queued).kind, "response");
  assert.equal(await handing, true);
  assert.deepEqual(steps.slice(-2), ["drop", "release"]);
  assert.equal(steps.filter((s) => s === "answered").length, 2);
  assert.equal(host.holds(key), false);
  assert.equal(host.residentCount, 0);
  await host.drain(100);
});
