/**
 * The node's counters: their names, help and every value of their labels.
 * Each series is exported at 0 from the node's start (those of the cluster
 * from its start in cluster mode, those of the cluster listener from the
 * listener's), not only at its first increment: a series that is missing
 * until then cannot be told from a node that does not count it, and a rate
 * over it misses its first increments. The label values are the lists the
 * counting code takes its values from, so that none can be counted without
 * being listed.
 *
 * @module
 */

import type { BucketArea, BucketOp } from "../bucket/counted.ts";
import type { MetricsRegistry } from "./registry.ts";
import { WAIT_OUTCOMES, type WaitOutcome } from "../cluster/failover_wait.ts";
import { REFUSAL_REASONS, type RefusalReason } from "../http/cluster_listener.ts";

/**
 * The counters the executors count (replication's, and the alarms set),
 * named in their messages, with their help.
 *
 * @example
 * ```ts
 * import { REPLICATION_COUNTERS } from "./node_counters.ts";
 * console.log(Object.keys(REPLICATION_COUNTERS).length); // 5
 * ```
 */
export const REPLICATION_COUNTERS: Readonly<Record<string, string>> = {
  wasmkeep_snapshot_upload_failures_total:
    "Periodic snapshot uploads not acknowledged (they cost no write).",
  wasmkeep_restore_failures_total:
    "Restores of an actor from the bucket that failed (bucket unavailable or history unusable).",
  wasmkeep_history_collected_total: "Objects of old actor history deleted from the bucket.",
  wasmkeep_history_collect_failures_total: "Deletes of old actor history that failed.",
  wasmkeep_alarms_set_total:
    "Alarms set or moved by an event that committed (one write to the alarm index each).",
};

/** Every value of the `by` label of `wasmkeep_alarms_fired_total`. */
export const ALARM_FIRED_BY = ["owner", "sweep"] as const;

/** The node's own counters, with their help. */
export const NODE_COUNTERS = {
  bucketRequests: {
    name: "wasmkeep_bucket_requests_total",
    help:
      "Requests to the bucket by the node and its executors, by operation and the part of the layout (first key segment).",
  },
  events: {
    name: "wasmkeep_events_total",
    help: "Actor events, by class and HTTP status class.",
  },
  executorRestarts: {
    name: "wasmkeep_executor_restarts_total",
    help: "Executor processes replaced (an event past its limit, or a crash).",
  },
  failoverWaits: {
    name: "wasmkeep_failover_waits_total",
    help: "Requests kept until their actor's takeover, by how the wait ended.",
  },
  refusedConnections: {
    name: "wasmkeep_cluster_refused_connections_total",
    help:
      "Connections to the cluster listener closed: no certificate, one no live heartbeat names, trust withdrawn, over the cap, or too many handshakes from one address.",
  },
  socketMessages: {
    name: "wasmkeep_websocket_messages_total",
    help:
      "WebSocket messages of this node's actors: in from their clients (each an event), out from the actors to their clients.",
  },
  socketCloses: {
    name: "wasmkeep_websocket_closes_total",
    help:
      "WebSockets of this node's actors closed, by code (the client's, the actor's or the node's own; application codes 3000-4999 as 'application').",
  },
  relayedSockets: {
    name: "wasmkeep_websocket_relays_total",
    help: "WebSockets this node relayed to the node that holds their actor.",
  },
  alarmsFired: {
    name: "wasmkeep_alarms_fired_total",
    help:
      "Alarms whose on-alarm ran and succeeded here, by what armed them (the owner's timer, or a sweep that found them overdue).",
  },
  alarmsRetried: {
    name: "wasmkeep_alarms_retried_total",
    help:
      "Firings of an alarm that failed here (an error, a trap, an event that could not run) and are retried.",
  },
} as const;

/**
 * Every value of the `code` label of `wasmkeep_websocket_closes_total`: the
 * codes of RFC 6455 a socket closes with here, `application` for 3000-4999,
 * and `other`.
 *
 * @example
 * ```ts
 * import { SOCKET_CLOSE_CODES } from "./node_counters.ts";
 * console.log(SOCKET_CLOSE_CODES.includes("1012")); // true
 * ```
 */
export const SOCKET_CLOSE_CODES = [
  "1000",
  "1001",
  "1002",
  "1005",
  "1006",
  "1007",
  "1008",
  "1009",
  "1011",
  "1012",
  "1013",
  "application",
  "other",
] as const;

/** The `code` label of a socket closed with `code`. */
function closeCodeLabel(code: number): (typeof SOCKET_CLOSE_CODES)[number] {
  if (code >= 3000 && code <= 4999) return "application";
  const label = String(code) as (typeof SOCKET_CLOSE_CODES)[number];
  return SOCKET_CLOSE_CODES.includes(label) ? label : "other";
}

/**
 * Every value of the `status` label of `wasmkeep_events_total`.
 *
 * @example
 * ```ts
 * import { EVENT_STATUS_CLASSES } from "./node_counters.ts";
 * console.log(EVENT_STATUS_CLASSES.join(" ")); // 1xx 2xx 3xx 4xx 5xx
 * ```
 */
export const EVENT_STATUS_CLASSES = ["1xx", "2xx", "3xx", "4xx", "5xx"] as const;

/** One of {@linkcode EVENT_STATUS_CLASSES}. */
export type EventStatusClass = (typeof EVENT_STATUS_CLASSES)[number];

/**
 * The status class of what the client is answered for an event's `status`:
 * an actor's status that no HTTP response can carry (the `Response`
 * constructor takes 101 and 200 to 599) is answered 502, so it is a `5xx`.
 *
 * @example
 * ```ts
 * import { eventStatusClass } from "./node_counters.ts";
 * console.log(eventStatusClass(404), eventStatusClass(600)); // 4xx 5xx
 * ```
 */
export function eventStatusClass(status: number): EventStatusClass {
  if (status !== 101 && !(status >= 200 && status <= 599)) return "5xx";
  return EVENT_STATUS_CLASSES[Math.floor(status / 100) - 1];
}

/**
 * Counts on a node's registry, every series registered at 0 first.
 *
 * @example
 * ```ts
 * import { MetricsRegistry } from "./registry.ts";
 * import { NodeCounters } from "./node_counters.ts";
 * const metrics = new MetricsRegistry();
 * const counters = new NodeCounters(metrics, ["counter"], { cluster: true });
 * console.log(metrics.value("wasmkeep_failover_waits_total", { outcome: "timeout" })); // 0
 * counters.event("counter", 200);
 * console.log(metrics.value("wasmkeep_events_total", { class: "counter", status: "2xx" })); // 1
 * ```
 */
export class NodeCounters {
  readonly #metrics: MetricsRegistry;
  /** One bound counter per class and status class. */
  readonly #events = new Map<string, (by?: number) => void>();
  readonly #bucket = new Map<string, (by?: number) => void>();

  /**
   * Registers at 0 the replication counters, the executor restarts, the
   * events of each of `classes` and status class, and, on a cluster node,
   * the failover waits of each outcome.
   */
  constructor(metrics: MetricsRegistry, classes: Iterable<string>, options: { cluster: boolean }) {
    this.#metrics = metrics;
    for (const [name, help] of Object.entries(REPLICATION_COUNTERS)) {
      metrics.counter(name, help, {}, 0);
    }
    const { executorRestarts, failoverWaits, socketMessages, socketCloses } = NODE_COUNTERS;
    metrics.counter(executorRestarts.name, executorRestarts.help, {}, 0);
    for (const direction of ["in", "out"]) {
      metrics.counter(socketMessages.name, socketMessages.help, { direction }, 0);
    }
    for (const code of SOCKET_CLOSE_CODES) {
      metrics.counter(socketCloses.name, socketCloses.help, { code }, 0);
    }
    const { alarmsFired, alarmsRetried } = NODE_COUNTERS;
    for (const by of ALARM_FIRED_BY) metrics.counter(alarmsFired.name, alarmsFired.help, { by }, 0);
    metrics.counter(alarmsRetried.name, alarmsRetried.help, {}, 0);
    for (const className of classes) {
      for (const status of EVENT_STATUS_CLASSES) this.#eventCounter(className, status);
    }
    if (options.cluster) {
      const { relayedSockets } = NODE_COUNTERS;
      metrics.counter(relayedSockets.name, relayedSockets.help, {}, 0);
      for (const outcome of WAIT_OUTCOMES) {
        metrics.counter(failoverWaits.name, failoverWaits.help, { outcome }, 0);
      }
    }
  }

  /** The cluster listener started: its refusals of each reason are registered at 0. */
  listenerStarted(): void {
    const { name, help } = NODE_COUNTERS.refusedConnections;
    for (const reason of REFUSAL_REASONS) this.#metrics.counter(name, help, { reason }, 0);
  }

  /** An event of `className` was answered `status`. */
  event(className: string, status: number): void {
    this.#eventCounter(className, eventStatusClass(status))();
  }

  /** Bucket requests, by `op area` (bucket/counted.ts), of the node or one of its executors. */
  bucketRequests(counts: Record<string, number>): void {
    const { name, help } = NODE_COUNTERS.bucketRequests;
    for (const [id, by] of Object.entries(counts)) {
      const [op, area] = id.split(" ");
      this.#metrics.counter(name, help, { op, area }, by);
    }
  }

  /** One bucket request of the node's own. */
  bucketRequest(op: BucketOp, area: BucketArea): void {
    const id = `${op} ${area}`;
    let increment = this.#bucket.get(id);
    if (!increment) {
      const { name, help } = NODE_COUNTERS.bucketRequests;
      increment = this.#metrics.boundCounter(name, help, { op, area });
      this.#bucket.set(id, increment);
    }
    increment();
  }

  /** An executor process was replaced. */
  executorReplaced(): void {
    const { name, help } = NODE_COUNTERS.executorRestarts;
    this.#metrics.counter(name, help);
  }

  /** A kept request ended with `outcome`. */
  failoverWait(outcome: WaitOutcome): void {
    const { name, help } = NODE_COUNTERS.failoverWaits;
    this.#metrics.counter(name, help, { outcome });
  }

  /** The cluster listener closed a connection for `reason`. */
  refusedConnection(reason: RefusalReason): void {
    const { name, help } = NODE_COUNTERS.refusedConnections;
    this.#metrics.counter(name, help, { reason });
  }

  /** A WebSocket message went `in` to an actor from its client, or `out` to its client. */
  socketMessage(direction: "in" | "out"): void {
    const { name, help } = NODE_COUNTERS.socketMessages;
    this.#metrics.counter(name, help, { direction });
  }

  /** A WebSocket of an actor here closed with `code`. */
  socketClosed(code: number): void {
    const { name, help } = NODE_COUNTERS.socketCloses;
    this.#metrics.counter(name, help, { code: closeCodeLabel(code) });
  }

  /** An alarm armed `by` the owner's timer or a sweep fired (its on-alarm succeeded). */
  alarmFired(by: (typeof ALARM_FIRED_BY)[number]): void {
    const { name, help } = NODE_COUNTERS.alarmsFired;
    this.#metrics.counter(name, help, { by });
  }

  /** An alarm's firing failed and is retried. */
  alarmRetried(): void {
    const { name, help } = NODE_COUNTERS.alarmsRetried;
    this.#metrics.counter(name, help);
  }

  /** A WebSocket was relayed to the node holding its actor. */
  socketRelayed(): void {
    const { name, help } = NODE_COUNTERS.relayedSockets;
    this.#metrics.counter(name, help);
  }

  /** An executor counted `by` on replication counter `name`. */
  replication(name: string, by: number): void {
    this.#metrics.counter(name, REPLICATION_COUNTERS[name] ?? name, {}, by);
  }

  #eventCounter(className: string, status: EventStatusClass): (by?: number) => void {
    const id = `${className} ${status}`;
    let increment = this.#events.get(id);
    if (!increment) {
      const { name, help } = NODE_COUNTERS.events;
      increment = this.#metrics.boundCounter(name, help, { class: className, status });
      this.#events.set(id, increment);
    }
    return increment;
  }
}
