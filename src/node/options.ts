/**
 * What a node is started with: its options, their defaults, and the error a
 * start that cannot go on raises.
 *
 * @module
 */

import type { LogLevel } from "../log.ts";
import type { AccessRule } from "../deploy/access_rule.ts";
import type { AppName } from "../deploy/app_name.ts";
import type { ActorClassOption } from "../deploy/served_classes.ts";

/** Everything a node is started with; defaults in {@linkcode NODE_DEFAULTS}. */
export interface NodeOptions {
  nodeId: string;
  /** Host name and port of the client listener; port 0 picks a free one. */
  hostname: string;
  port: number;
  dataDir: string;
  /** The classes (`--actor`); with `app`, none: they come from its deploys. */
  actors: ActorClassOption[];
  /**
   * The app the node follows (`--app TENANT/APP`): its classes, rules and
   * configuration come from its deployed versions, its actors are keyed by
   * its tenant.
   */
  app?: AppName;
  /**
   * With `app`: rules from `--access`, used until the app deploys its own
   * (ADR 0013), and refused at start once it did.
   */
  accessFlags?: Record<string, AccessRule>;
  /** Values every class reads (`--env FILE`); they win over the configuration by name. */
  env?: Record<string, string>;
  /** `s3://BUCKET[/PREFIX]` or `file://PATH`; default `file://<dataDir>/bucket`. */
  bucketUrl?: string;
  eventTimeoutMs: number;
  maxQueuedEvents: number;
  maxResidentActors: number;
  idleMs: number;
  /** An actor's database unused this long is closed; the actor may stay resident. */
  databaseIdleMs: number;
  maxBodyBytes: number;
  /** Largest WebSocket message either way (`--max-socket-message-bytes`); default 1 MiB. */
  maxSocketMessageBytes?: number;
  /** The ceiling of a failed on-alarm's retry backoff (`--alarm-retry-max-secs`); default 5 minutes. */
  alarmRetryMaxMs?: number;
  /** Client requests at once (`--max-connections`), before the open-file limit lowers it; default 10,000. */
  maxConnections?: number;
  /** Executor processes; default one per core. */
  executors: number;
  /** How long a clean stop waits for events under way. */
  stopGraceMs: number;
  /**
   * `auto`: the direct bindings for components that fit them, jco's glue for
   * the others; `jco`: jco's glue for every component.
   */
  abi: "auto" | "jco";
  logLevel: LogLevel;
  /** How long old actor history stays in the bucket (`--history-retention-secs`). */
  historyRetentionMs: number;
  /**
   * Cluster mode, for a bucket other nodes may share (`--bucket`): node
   * leases, the node id check, membership and forwarding. `undefined` for a
   * standalone node on its embedded bucket.
   */
  cluster?: ClusterOptions;
}

/** A node's settings in a cluster. */
export interface ClusterOptions {
  /** The URL peers forward requests to; default `http://<listen address>`. */
  advertise?: string;
  /** Whether plain HTTP between nodes is used (`--cluster-plaintext`). */
  plaintext: "accept" | "refuse";
  /** The cluster listener (`--cluster-listen`, `--cluster-advertise`): mutual TLS between nodes. */
  listener?: { hostname: string; port: number; advertise: string };
  /** How long a GET/HEAD for a dead or stopping node's actor is kept; 0 turns it off. */
  failoverWaitMs: number;
  /** The node lease ttl; every lease timing derives from it. */
  leaseTtlMs: number;
}

/** The defaults of the optional settings. */
export const NODE_DEFAULTS = {
  eventTimeoutMs: 30_000,
  maxQueuedEvents: 128,
  maxResidentActors: 10_000,
  idleMs: 60_000,
  databaseIdleMs: 5_000,
  maxBodyBytes: 1024 * 1024,
  stopGraceMs: 10_000,
  abi: "auto" as "auto" | "jco",
  logLevel: "info" as LogLevel,
  historyRetentionMs: 3_600_000,
  maxConnections: 10_000,
  leaseTtlMs: 10_000,
} as const;

/** Raised when the node cannot start; the message says why. */
export class NodeStartError extends Error {
  /** `cause`: what stopped the start, when it was an error of its own (a `NodeIdInUse`). */
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = "NodeStartError";
  }
}
