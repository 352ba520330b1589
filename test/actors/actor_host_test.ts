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
