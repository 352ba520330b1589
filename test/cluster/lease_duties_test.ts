import assert from "node:assert/strict";
import {
  DUTY_RESTART_MS,
  LeaseDuties,
  type LeaseDuty,
} from "../../src/cluster/duties/scheduler.ts";
import type { LeaseListener } from "../../src/cluster/node_lease.ts";
import { createLogger } from "../../src/log.ts";
import { FakeClock } from "../bucket/fake_clock.ts";

/** A lease whose validity the test sets, telling its followers as NodeLease does. */
class TestLease {
  #valid = false;
  readonly #listeners: LeaseListener[] = [];
  valid(): boolean {
    return this.#valid;
  }
  subscribe(listener: LeaseListener): () => void {
    this.#listeners.push(listener);
    return () => this.#listeners.splice(this.#listeners.indexOf(listener), 1);
  }
  set(valid: boolean): void {
    this.#valid = valid;
    for (const listener of this.#listeners) listener.changed?.(valid, valid ? "landed" : "expired");
  }
}

/** A duty that records its runs and runs until aborted (or fails once, when told to). */
function recordingDuty(name: string, failFirst = false) {
  const runs: { started: number; ended?: number; reason?: string }[] = [];
  let failures = failFirst ? 1 : 0;
  const duty: LeaseDuty = {
    name,
    run: (signal) => {
      const run: { started: number; ended?: number; reason?: string } = { started: runs.length };
      runs.push(run);
      if (failures > 0) {
        failures--;
        return Promise.reject(new Error("broke"));
      }
      return new Promise((resolve) =>
        signal.addEventListener("abort", () => {
          run.reason = String(signal.reason?.message);
          resolve();
        }, { once: true })
      );
    },
  };
  return { duty, runs };
}

Deno.test("lease duties run while the lease is valid: started when it becomes valid, aborted when it lapses, started again", async () => {
  const clock = new FakeClock();
  const lease = new TestLease();
  const duties = new LeaseDuties({ clock, log: createLogger({ level: "error" }) });
  const fence = recordingDuty("fence peers");
  const sweep = recordingDuty("alarm sweep");
  duties.add(fence.duty);
  duties.add(sweep.duty);
  duties.follow(lease);
  assert.deepEqual(duties.running(), [], "nothing runs before the lease is valid");
  lease.set(true);
  assert.deepEqual(duties.running(), ["fence peers", "alarm sweep"]);
  lease.set(false);
  await clock.advance(0);
  assert.deepEqual(duties.running(), []);
  assert.equal(fence.runs[0].reason, "the node lease is not valid");
  lease.set(true);
  assert.equal(fence.runs.length, 2, "started again with the lease");
  await duties.stop();
  assert.deepEqual(duties.running(), []);
  lease.set(true);
  assert.equal(fence.runs.length, 2, "a stopped scheduler starts nothing");
});

Deno.test("lease duties: one that fails by itself is started again after a pause, while the lease stays valid", async () => {
  const clock = new FakeClock();
  const lease = new TestLease();
  const lines: string[] = [];
  const duties = new LeaseDuties({ clock, log: createLogger({ sink: (l) => lines.push(l) }) });
  const flaky = recordingDuty("flaky", true);
  duties.add(flaky.duty);
  lease.set(true);
  duties.follow(lease);
  await clock.advance(0);
  assert.equal(flaky.runs.length, 1);
  assert.ok(
    lines.some((l) => l.includes("a lease duty failed") && l.includes("flaky")),
    lines.join("\n"),
  );
  await clock.advance(DUTY_RESTART_MS - 1);
  assert.equal(flaky.runs.length, 1, "not at once: it would spin");
  await clock.advance(1);
  assert.equal(flaky.runs.length, 2);
  await duties.stop();
});
