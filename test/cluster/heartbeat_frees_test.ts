import assert from "node:assert/strict";
import { heartbeatFrees } from "../../src/cluster/cluster_plane.ts";
import type { Heartbeat } from "../../src/cluster/heartbeat.ts";
import { leaseTiming } from "../../src/cluster/lease_timing.ts";
import type { OwnerRecord } from "../../src/cluster/ownership.ts";

const { fenceAfterMs } = leaseTiming(10_000);
const NOW = 1_800_000_000_000;
const record: OwnerRecord = {
  version: 1,
  node: "b",
  process: "p1",
  generation: 3n,
  state: "held",
  at: NOW - 60_000,
};

function heartbeat(lease: Heartbeat["lease"], at: number, process = "p1"): Heartbeat {
  return {
    format: 2,
    nodeId: "b",
    process,
    at,
    lease,
    address: "http://b:8080",
    readsSecrets: false,
    takesMoved: true,
    version: "0.1.0",
    state: "serving",
  };
}

Deno.test("a fence frees the actors only once it is fenceAfterMs old: written early (wasmkeep cluster fence), the node may still run them", () => {
  // The node's last write a second ago: its lease is valid for seconds yet.
  assert.equal(heartbeatFrees(heartbeat("fenced", NOW - 1_000), record, NOW, fenceAfterMs), false);
  assert.equal(
    heartbeatFrees(heartbeat("fenced", NOW - fenceAfterMs + 1), record, NOW, fenceAfterMs),
    false,
  );
  assert.equal(
    heartbeatFrees(heartbeat("fenced", NOW - fenceAfterMs), record, NOW, fenceAfterMs),
    true,
  );
  // A fence of a node with no heartbeat left is dated when written.
  assert.equal(heartbeatFrees(heartbeat("fenced", NOW, "-"), record, NOW, fenceAfterMs), false);
  assert.equal(
    heartbeatFrees(heartbeat("fenced", NOW, "-"), record, NOW + fenceAfterMs, fenceAfterMs),
    true,
  );
});

Deno.test("a release frees the actors at once; a live heartbeat never does", () => {
  assert.equal(heartbeatFrees(heartbeat("released", NOW), record, NOW, fenceAfterMs), true);
  assert.equal(
    heartbeatFrees(heartbeat("live", NOW - 3_600_000), record, NOW, fenceAfterMs),
    false,
  );
  assert.equal(heartbeatFrees(undefined, record, NOW, fenceAfterMs), false);
  // A release by an older process than the record's says nothing of it.
  assert.equal(
    heartbeatFrees(heartbeat("released", record.at - 1, "p0"), record, NOW, fenceAfterMs),
    false,
  );
});
