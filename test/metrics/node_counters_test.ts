import assert from "node:assert/strict";
import { MetricsRegistry } from "../../src/metrics/registry.ts";
import {
  EVENT_STATUS_CLASSES,
  eventStatusClass,
  NodeCounters,
} from "../../src/metrics/node_counters.ts";
import { WAIT_OUTCOMES } from "../../src/cluster/failover_wait.ts";
import { REFUSAL_REASONS } from "../../src/http/cluster_listener.ts";

Deno.test("eventStatusClass: the class of what the client is answered; a status no response carries is a 5xx (its 502)", () => {
  const cases: [number, string][] = [
    [101, "1xx"],
    [200, "2xx"],
    [304, "3xx"],
    [404, "4xx"],
    [599, "5xx"],
    [100, "5xx"],
    [199, "5xx"],
    [600, "5xx"],
    [0, "5xx"],
    [65535, "5xx"],
  ];
  for (const [status, statusClass] of cases) {
    assert.equal(eventStatusClass(status), statusClass, String(status));
    assert.ok((EVENT_STATUS_CLASSES as readonly string[]).includes(eventStatusClass(status)));
  }
});

Deno.test("NodeCounters: every series at 0 before its first count; a cluster's only in cluster mode, the listener's once it started", () => {
  const standalone = new MetricsRegistry();
  new NodeCounters(standalone, ["a"], { cluster: false });
  assert.equal(standalone.value("wasmkeep_executor_restarts_total"), 0);
  for (const status of EVENT_STATUS_CLASSES) {
    assert.equal(standalone.value("wasmkeep_events_total", { class: "a", status }), 0);
  }
  assert.doesNotMatch(standalone.render(), /failover_waits|refused_connections/);

  const metrics = new MetricsRegistry();
  const counters = new NodeCounters(metrics, ["a"], { cluster: true });
  for (const outcome of WAIT_OUTCOMES) {
    assert.equal(metrics.value("wasmkeep_failover_waits_total", { outcome }), 0, outcome);
  }
  assert.doesNotMatch(metrics.render(), /refused_connections/);
  counters.refusedConnection("untrusted certificate");
  counters.listenerStarted();
  for (const reason of REFUSAL_REASONS) {
    assert.equal(
      metrics.value("wasmkeep_cluster_refused_connections_total", { reason }),
      reason === "untrusted certificate" ? 1 : 0,
      reason,
    );
  }
  counters.event("a", 503);
  counters.event("a", 700);
  counters.failoverWait("timeout");
  counters.executorReplaced();
  counters.replication("wasmkeep_history_collected_total", 3);
  assert.equal(metrics.value("wasmkeep_events_total", { class: "a", status: "5xx" }), 2);
  assert.equal(metrics.value("wasmkeep_failover_waits_total", { outcome: "timeout" }), 1);
  assert.equal(metrics.value("wasmkeep_executor_restarts_total"), 1);
  assert.equal(metrics.value("wasmkeep_history_collected_total"), 3);
});
