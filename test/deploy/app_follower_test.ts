import assert from "node:assert/strict";
import { MemoryBucket } from "../../src/bucket/memory.ts";
import { TranspileFailure } from "../../src/actors/component.ts";
import { AppFollower } from "../../src/deploy/app_follower.ts";
import { ClassCatalog } from "../../src/deploy/class_catalog.ts";
import { deploy } from "../../src/deploy/deploy.ts";
import { createLogger } from "../../src/log.ts";
import { systemClock } from "../../src/time/clock.ts";
import { COUNTER_WASM } from "../../src/testing/node_process.ts";

Deno.test("a node whose transpile process failed on its app's first version says so while not ready, not that the bucket did not answer", async () => {
  const bucket = new MemoryBucket();
  const app = { tenant: "acme", app: "shop" };
  assert.equal((await deploy(bucket, app, { actors: { counter: COUNTER_WASM } })).kind, "deployed");
  const follower = new AppFollower({
    bucket,
    app,
    clock: systemClock,
    log: createLogger({ sink: () => {} }),
    catalog: new ClassCatalog({ seq: 0, classes: [] }),
    load: () => Promise.reject(new TranspileFailure("counter.wasm", "killed by SIGKILL")),
    hasAccessFlags: false,
  });
  await follower.check();
  const reason = follower.notReady() ?? "";
  assert.match(
    reason,
    /counter\.wasm: cannot be transpiled: the transpile process failed: killed by SIGKILL/,
  );
  assert.doesNotMatch(reason, /bucket did not answer/);
});
