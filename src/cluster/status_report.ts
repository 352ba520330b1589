/**
 * The cluster's status as the package gives it ({@linkcode clusterStatus})
 * and `wasmkeep cluster status --json` prints it: snake_case fields, `null`
 * for what a heartbeat does not say, no `undefined` anywhere.
 *
 * Apart from the reading (`status.ts`) because this is a public format, kept
 * as it is for those who parse it, while the reading's own shape may change.
 *
 * @module
 */

import type { Bucket } from "../bucket/bucket.ts";
import { openBucket, type OpenBucketOptions } from "../bucket/open.ts";
import type { LeaseState, ServingState } from "./heartbeat.ts";
import { type ClusterStatus, readClusterStatus, reportedState } from "./status.ts";

/** A node as {@linkcode ClusterStatusReport} lists it: `null` for what its heartbeat does not say. */
export interface ClusterStatusReportNode {
  /** The node id, from its key `nodes/<id>`. */
  id: string;
  /** A live lease written within `live_within_ms`, on this machine's clock. */
  live: boolean;
  /** The lease as the heartbeat says; `null` when it cannot be read (see `problem`). */
  lease: LeaseState | null;
  /** Present for a fenced lease: the node (or `cli`) that fenced it. */
  fenced_by?: string | null;
  /** This machine's clock minus the lease's last live write; negative when dated ahead. */
  age_ms: number | null;
  /** Present when the lease is dated ahead of this machine's clock: by how much. */
  ahead_ms?: number;
  /** The lease's last live write, ms since the epoch on the node's clock. */
  at_ms: number | null;
  /**
   * Whether the node takes actors (serving, draining, drained, stuck);
   * `null` from a node that predates draining (its heartbeat's line 11 is
   * not `take`, or it is from before node leases).
   */
  state: ServingState | null;
  /** The WasmKeep version the node runs. */
  version: string | null;
  /** `tenant/app` the node serves. */
  app: string | null;
  /** The URL other nodes forward client requests to. */
  address: string | null;
  /** `https://HOST:PORT` of its cluster listener. */
  cluster_address: string | null;
  /** `pinned` with a TLS fingerprint and a cluster address, `plain` without. */
  tls: "pinned" | "plain" | null;
  /** 2 with node leases, 1 from before them. */
  format: 1 | 2 | null;
  /** Present when the object cannot be read as a heartbeat: why. */
  problem?: string;
}

/** An app as {@linkcode ClusterStatusReport} lists it, from `apps/<tenant>/<app>/current`. */
export interface ClusterStatusReportApp {
  /** `tenant/app`. */
  app: string;
  /** The deployed version. */
  version: string | null;
  /** Its deploy seq. */
  seq: number | null;
  /** Present when the object cannot be read: why. */
  problem?: string;
}

/**
 * What `wasmkeep cluster status --json` prints, as {@linkcode clusterStatus}
 * returns it: snake_case fields, `null` for what a heartbeat does not say, and
 * no `undefined` anywhere, so the object equals its own JSON.
 */
export interface ClusterStatusReport {
  /** The bucket URL, as given (or the `url` option for an open bucket). */
  bucket: string;
  /** A node is live if its lease was written within this many ms (the ttl). */
  live_within_ms: number;
  /** Every heartbeat under `nodes/`, in key order. */
  nodes: ClusterStatusReportNode[];
  /** Every deployed app, in key order. */
  apps: ClusterStatusReportApp[];
  /**
   * The nodes asked to drain (`wasmkeep cluster drain`, an object
   * `drains/<id>`), sorted; whether each drains is its node's `state`.
   */
  drains: string[];
  /** The summary line's counts. */
  summary: {
    /** Live nodes. */
    live: number;
    /** Every heartbeat listed. */
    nodes: number;
    /** Live nodes with a cluster listener and a TLS pin. */
    cluster_listener: number;
    /** Live nodes without. */
    plain: number;
    /** The WasmKeep versions live nodes run, sorted. */
    versions: string[];
  };
  /** Each warning the status prints, without the `warning: ` prefix. */
  warnings: string[];
}

/**
 * The status for `--json` (see {@linkcode ClusterStatusReport}). Fields a
 * node or app does not have are left out rather than `undefined`, so that
 * {@linkcode clusterStatus} returns exactly what the CLI prints.
 *
 * @example
 * ```ts
 * import { clusterStatusJson } from "./status_report.ts";
 * import { readClusterStatus } from "./status.ts";
 * import { MemoryBucket } from "../bucket/memory.ts";
 * JSON.stringify(clusterStatusJson(await readClusterStatus(new MemoryBucket(), "memory://")));
 * ```
 */
export function clusterStatusJson(status: ClusterStatus): ClusterStatusReport {
  return {
    bucket: status.bucket,
    live_within_ms: status.timing.ttlMs,
    nodes: status.nodes.map((node) => {
      const h = node.heartbeat;
      return {
        id: node.id,
        live: node.live,
        lease: h?.lease ?? null,
        ...(h?.lease === "fenced" ? { fenced_by: h.fencedBy ?? null } : {}),
        age_ms: node.ageMs ?? null,
        ...(node.aheadMs !== undefined ? { ahead_ms: node.aheadMs } : {}),
        at_ms: h?.at ?? null,
        state: (h && reportedState(h)) ?? null,
        version: h?.version && h.version !== "-" ? h.version : null,
        app: h?.app ?? null,
        address: h?.address || null,
        cluster_address: h?.clusterAddress ?? null,
        tls: node.tls ?? null,
        format: h?.format ?? null,
        ...(node.problem !== undefined ? { problem: node.problem } : {}),
      };
    }),
    apps: status.apps.map((app) => ({
      app: app.app,
      version: app.version ?? null,
      seq: app.seq ?? null,
      ...(app.problem !== undefined ? { problem: app.problem } : {}),
    })),
    drains: status.drains,
    summary: {
      live: status.summary.live,
      nodes: status.summary.nodes,
      cluster_listener: status.summary.clusterListener,
      plain: status.summary.plain,
      versions: status.summary.versions,
    },
    warnings: status.warnings,
  };
}

/** Options of {@linkcode clusterStatus}. */
export interface ClusterStatusOptions {
  /**
   * The cluster's bucket: a URL (`s3://BUCKET[/PREFIX]` or `file://PATH`),
   * opened for the call and closed after it, or an open {@linkcode Bucket},
   * left open.
   */
  bucket: string | Bucket;
  /** How an open bucket is named in the report's `bucket` field; default `(open bucket)`. */
  url?: string;
  /** How a bucket URL is opened (the `AWS_*` variables for `s3://`, say). */
  open?: OpenBucketOptions;
  /** This machine's clock (ms since the epoch), which ages are measured on; default `Date.now`. */
  now?: () => number;
  /** The lease ttl the nodes use; default 10 s. */
  ttlMs?: number;
}

/**
 * Reads the cluster's state from its bucket alone, whether or not any node
 * answers, and returns what `wasmkeep cluster status --json` prints (the CLI
 * calls this). Throws `FileBucketMissing` for a `file://` folder that does
 * not exist, and what the bucket throws when it cannot be read; a
 * heartbeat that cannot be decoded is listed with its `problem` and a warning.
 *
 * @example
 * ```ts
 * import { clusterStatus } from "./status_report.ts";
 * const report = await clusterStatus({ bucket: "file:///tmp/wasmkeep-bucket" });
 * for (const node of report.nodes) console.log(node.id, node.live);
 * if (report.summary.live === 0) console.log("no live node");
 * ```
 */
export async function clusterStatus(options: ClusterStatusOptions): Promise<ClusterStatusReport> {
  const tool = { now: options.now, ttlMs: options.ttlMs };
  if (typeof options.bucket !== "string") {
    const url = options.url ?? "(open bucket)";
    return clusterStatusJson(await readClusterStatus(options.bucket, url, tool));
  }
  // Read, never made: a file bucket's folder that is not there is refused.
  const bucket = openBucket(options.bucket, { ...options.open, existing: true });
  try {
    return clusterStatusJson(await readClusterStatus(bucket, options.bucket, tool));
  } finally {
    await bucket.close();
  }
}
