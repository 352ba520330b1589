/**
 * What `wasmkeep cluster status`, `fence` and `forget` do, from the bucket
 * alone (the spec's "Checking a cluster"): read every heartbeat under
 * `nodes/` and every `apps/<tenant>/<app>/current`, judge liveness on this
 * machine's clock with the default lease timings, and write or remove a
 * heartbeat under the conditions ADR 0004 sets. The CLI only parses and
 * prints.
 *
 * @module
 */

import { type Bucket, listAll, PreconditionFailed } from "../bucket/bucket.ts";
import { openBucket, type OpenBucketOptions } from "../bucket/open.ts";
import { APPS_PREFIX, nodeKey, NODES_PREFIX } from "../bucket/keys.ts";
import {
  decodeHeartbeat,
  encodeHeartbeat,
  type Heartbeat,
  isLive,
  type LeaseState,
  MalformedHeartbeat,
  type ServingState,
} from "./heartbeat.ts";
import { assertNodeId, isNodeId } from "./node_id.ts";
import { type LeaseTiming, leaseTiming } from "./lease_timing.ts";

/** Who line 5 of a heartbeat names when `wasmkeep cluster fence` wrote it. */
export const CLI_FENCER = "cli";

/** How many times fence and forget re-read a heartbeat whose condition was refused. */
export const CONDITION_ATTEMPTS = 5;

/** Heartbeats and app objects read at once. */
const READ_CONCURRENCY = 16;

/** One heartbeat object, as the status shows it. */
export interface NodeStatus {
  /** The node id, from the key. */
  id: string;
  /** `nodes/<id>`. */
  key: string;
  /** The decoded heartbeat; absent when it cannot be read (see `problem`). */
  heartbeat?: Heartbeat;
  /** Why the object cannot be read as a heartbeat. */
  problem?: string;
  /** A live lease written within the ttl on this machine's clock. */
  live: boolean;
  /** This machine's clock minus line 4; negative when the lease is dated ahead. */
  ageMs?: number;
  /** How far line 4 is ahead of this machine's clock, when it is. */
  aheadMs?: number;
  /** `pinned` with a TLS fingerprint and a cluster address, `plain` without. */
  tls?: "pinned" | "plain";
}

/** An app's `current` object. */
export interface AppStatus {
  /** `tenant/app`. */
  app: string;
  /** `apps/<tenant>/<app>/current`. */
  key: string;
  /** The deployed version. */
  version?: string;
  /** Its deploy seq. */
  seq?: number;
  /** Why the object cannot be read. */
  problem?: string;
}

/** The summary line's counts. */
export interface StatusSummary {
  /** Live nodes. */
  live: number;
  /** Every heartbeat object listed. */
  nodes: number;
  /** Live nodes with a cluster listener and a TLS pin. */
  clusterListener: number;
  /** Live nodes without. */
  plain: number;
  /** The WasmKeep versions live nodes run, sorted. */
  versions: string[];
}

/** Everything `wasmkeep cluster status` reports. */
export interface ClusterStatus {
  /** The bucket URL, as given. */
  bucket: string;
  /** This machine's clock when the reads finished (ages are measured from it). */
  now: number;
  /** The lease timings the nodes use by default. */
  timing: LeaseTiming;
  /** Nodes in key order. */
  nodes: NodeStatus[];
  /** Apps in key order. */
  apps: AppStatus[];
  summary: StatusSummary;
  /** Each warning, without the `warning: ` prefix. */
  warnings: string[];
}

/** Options of the bucket-reading functions. */
export interface ClusterToolOptions {
  /** This machine's clock (ms since the epoch); default `Date.now`. */
  now?: () => number;
  /** The lease ttl the nodes use; default 10 s. */
  ttlMs?: number;
}

/**
 * Formats a duration as the status table does: `979ms`, `2.2s`, `14m`, `3h`,
 * `2d` (rounded down).
 *
 * @example
 * ```ts
 * import { formatDuration } from "./status.ts";
 * formatDuration(2250); // "2.2s"
 * ```
 */
export function formatDuration(ms: number): string {
  if (ms < 0) return `-${formatDuration(-ms)}`;
  if (ms < 1000) return `${Math.floor(ms)}ms`;
  if (ms < 60_000) return `${(Math.floor(ms / 100) / 10).toFixed(1)}s`;
  if (ms < 3_600_000) return `${Math.floor(ms / 60_000)}m`;
  if (ms < 48 * 3_600_000) return `${Math.floor(ms / 3_600_000)}h`;
  return `${Math.floor(ms / 86_400_000)}d`;
}

/** Runs `work` over `items`, at most `limit` at once, keeping the order. */
async function mapLimited<T, R>(
  items: T[],
  limit: number,
  work: (item: T) => Promise<R>,
): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  const worker = async () => {
    while (next < items.length) {
      const i = next++;
      results[i] = await work(items[i]);
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

function idOfKey(key: string): { id: string; problem?: string } {
  const rest = key.slice(NODES_PREFIX.length);
  let id = rest;
  try {
    id = decodeURIComponent(rest);
  } catch {
    return { id, problem: "the key is not a node id" };
  }
  if (rest.includes("/") || !isNodeId(id)) {
    return { id, problem: "the key is not a node id" };
  }
  return { id };
}

/** Reads one heartbeat object; `null` when it was deleted since the listing. */
async function readNode(bucket: Bucket, key: string): Promise<Omit<NodeStatus, "live"> | null> {
  const { id, problem } = idOfKey(key);
  if (problem) return { id, key, problem };
  const object = await bucket.get(key);
  if (object === null) return null;
  try {
    const heartbeat = decodeHeartbeat(object.body, key);
    if (heartbeat.nodeId !== id) {
      return { id, key, problem: `line 2 names node ${JSON.stringify(heartbeat.nodeId)}` };
    }
    return { id, key, heartbeat };
  } catch (error) {
    if (error instanceof MalformedHeartbeat) return { id, key, problem: error.problem };
    throw error;
  }
}

/** Reads one `apps/<tenant>/<app>/current`; `null` when it was deleted since the listing. */
async function readApp(bucket: Bucket, key: string): Promise<AppStatus | null> {
  const [, tenant, app] = key.split("/");
  let name: string;
  try {
    name = `${decodeURIComponent(tenant)}/${decodeURIComponent(app)}`;
  } catch {
    name = `${tenant}/${app}`;
  }
  const object = await bucket.get(key);
  if (object === null) return null;
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(object.body));
  } catch {
    return { app: name, key, problem: "not JSON" };
  }
  const { version, seq } = (parsed ?? {}) as { version?: unknown; seq?: unknown };
  if (typeof version !== "string" || version === "" || !Number.isSafeInteger(seq)) {
    return { app: name, key, problem: 'not { "version": "<hex>", "seq": <n> }' };
  }
  return { app: name, key, version, seq: seq as number };
}

const CURRENT_KEY = /^apps\/[^/]+\/[^/]+\/current$/;

/**
 * Reads the cluster's state from the bucket: every heartbeat under `nodes/`
 * and every app's `current`, judged on this machine's clock. Throws what the
 * bucket throws when it cannot be read; a heartbeat that cannot be decoded is
 * listed with its problem and a warning.
 *
 * @example
 * ```ts
 * import { readClusterStatus } from "./status.ts";
 * import { MemoryBucket } from "../bucket/memory.ts";
 * const status = await readClusterStatus(new MemoryBucket(), "memory://");
 * status.summary.live; // 0
 * ```
 */
export async function readClusterStatus(
  bucket: Bucket,
  url: string,
  options: ClusterToolOptions = {},
): Promise<ClusterStatus> {
  const timing = leaseTiming(options.ttlMs);
  const nodeKeys: string[] = [];
  for await (const object of listAll(bucket, NODES_PREFIX)) nodeKeys.push(object.key);
  const appKeys: string[] = [];
  for await (const object of listAll(bucket, APPS_PREFIX)) {
    if (CURRENT_KEY.test(object.key)) appKeys.push(object.key);
  }
  const read = await mapLimited(nodeKeys, READ_CONCURRENCY, (key) => readNode(bucket, key));
  const apps = (await mapLimited(appKeys, READ_CONCURRENCY, (key) => readApp(bucket, key)))
    .filter((app): app is AppStatus => app !== null);
  const now = (options.now ?? Date.now)();
  const nodes: NodeStatus[] = [];
  for (const entry of read) {
    if (entry === null) continue;
    const heartbeat = entry.heartbeat;
    if (!heartbeat) {
      nodes.push({ ...entry, live: false });
      continue;
    }
    const ageMs = now - heartbeat.at;
    nodes.push({
      ...entry,
      live: isLive(heartbeat, now, timing.ttlMs),
      ageMs,
      aheadMs: ageMs < 0 ? -ageMs : undefined,
      tls: heartbeat.fingerprint && heartbeat.clusterAddress ? "pinned" : "plain",
    });
  }
  const live = nodes.filter((node) => node.live);
  const pinned = live.filter((node) => node.tls === "pinned");
  const plain = live.filter((node) => node.tls === "plain");
  const versions = [...new Set(live.map((node) => node.heartbeat!.version))].sort();
  const summary: StatusSummary = {
    live: live.length,
    nodes: nodes.length,
    clusterListener: pinned.length,
    plain: plain.length,
    versions,
  };
  return {
    bucket: url,
    now,
    timing,
    nodes,
    apps,
    summary,
    warnings: statusWarnings(nodes, apps, timing),
  };
}

const ids = (nodes: NodeStatus[]) => nodes.map((node) => node.id).join(", ");

function statusWarnings(nodes: NodeStatus[], apps: AppStatus[], timing: LeaseTiming): string[] {
  const warnings: string[] = [];
  const live = nodes.filter((node) => node.live);
  const within = formatDuration(timing.ttlMs);
  if (nodes.length === 0) {
    warnings.push(`no live node: no heartbeat under ${NODES_PREFIX}`);
  } else if (live.length === 0) {
    warnings.push(
      `no live node: none of the ${nodes.length} heartbeats is a live lease written within ${within}`,
    );
  }
  for (const node of nodes) {
    if (node.problem) {
      warnings.push(
        `${node.key} cannot be read as a heartbeat (${node.problem}); counted not live`,
      );
    }
  }
  const pinned = live.filter((node) => node.tls === "pinned");
  const plain = live.filter((node) => node.tls === "plain");
  if (pinned.length > 0 && plain.length > 0) {
    warnings.push(
      `mixed plain and TLS nodes: ${ids(plain)} still plain while ${
        ids(pinned)
      } use the cluster listener; give every node a cluster listener, then drop --cluster-plaintext accept (ADR 0011)`,
    );
  }
  const byVersion = new Map<string, NodeStatus[]>();
  for (const node of live) {
    const version = node.heartbeat!.version;
    byVersion.set(version, [...(byVersion.get(version) ?? []), node]);
  }
  if (byVersion.size > 1) {
    const list = [...byVersion.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .map(([version, group]) => `${version} (${ids(group)})`).join(", ");
    warnings.push(
      `live nodes on different WasmKeep versions: ${list}; nodes of different versions are not supported together: stop every node, upgrade them all, start them all (Upgrading WasmKeep)`,
    );
  }
  for (const node of live) {
    if (node.heartbeat!.format === 2 && node.heartbeat!.state === "stuck") {
      warnings.push(
        `node ${node.id} is draining but stuck: it still holds actors or WebSockets and no other live node of its app takes them; start another node, or undrain one`,
      );
    }
  }
  for (const node of nodes) {
    if (node.aheadMs === undefined || node.aheadMs <= timing.skewMs) continue;
    const ahead = `dated ${formatDuration(node.aheadMs)} ahead of this machine's clock, ` +
      `more than the allowed skew of ${formatDuration(timing.skewMs)}`;
    const fix = "fix the clock that is wrong (that node's, or this machine's if it is behind)";
    const lease = node.heartbeat!.lease;
    if (lease === "live") {
      warnings.push(
        `node ${node.id}'s lease is ${ahead}: it never goes stale, so no node fences it and the actors it holds stay held until that date; ${fix}`,
      );
    } else {
      warnings.push(
        `node ${node.id} is ${lease}, but its lease is ${ahead}: the actors it holds are free only ${
          formatDuration(timing.fenceAfterMs)
        } after that date; ${fix}`,
      );
    }
  }
  for (const app of apps) {
    if (app.problem) warnings.push(`${app.key} cannot be read (${app.problem})`);
  }
  return warnings;
}

/** The LIVE column: `yes`, `no`, `no (fenced)`, `no (released)`, `no (unreadable)`. */
function liveText(node: NodeStatus): string {
  if (!node.heartbeat) return "no (unreadable)";
  if (node.heartbeat.lease !== "live") return `no (${node.heartbeat.lease})`;
  return node.live ? "yes" : "no";
}

/** Columns padded to their widest cell, two spaces apart, no trailing spaces. */
function table(rows: string[][]): string[] {
  const widths = rows[0].map((_, column) => Math.max(...rows.map((row) => row[column].length)));
  return rows.map((row) =>
    row.map((cell, column) => column === row.length - 1 ? cell : cell.padEnd(widths[column]))
      .join("  ").trimEnd()
  );
}

/** The summary line: `2 of 3 nodes live; TLS: 1 with a cluster listener, 1 plain; version: 0.3.0`. */
export function summaryLine(summary: StatusSummary): string {
  return `${summary.live} of ${summary.nodes} nodes live; TLS: ${summary.clusterListener} with a ` +
    `cluster listener, ${summary.plain} plain; version: ${summary.versions.join(", ") || "-"}`;
}

/**
 * The status as `wasmkeep cluster status` prints it: header, node table, app
 * table (when there are apps), summary and warnings.
 *
 * @example
 * ```ts
 * import { formatClusterStatus, readClusterStatus } from "./status.ts";
 * import { MemoryBucket } from "../bucket/memory.ts";
 * console.log(formatClusterStatus(await readClusterStatus(new MemoryBucket(), "memory://")));
 * ```
 */
export function formatClusterStatus(status: ClusterStatus): string {
  const lines = [
    `Cluster ${status.bucket} (live: heartbeat within ${formatDuration(status.timing.ttlMs)})`,
    "",
  ];
  if (status.nodes.length === 0) {
    lines.push(`no heartbeat under ${NODES_PREFIX}`);
  } else {
    const rows = [[
      "NODE",
      "LIVE",
      "AGE",
      "STATE",
      "VERSION",
      "APP",
      "ADDRESS",
      "CLUSTER ADDRESS",
      "TLS",
    ]];
    for (const node of status.nodes) {
      const h = node.heartbeat;
      const age = node.ageMs === undefined
        ? "-"
        : node.aheadMs !== undefined
        ? `ahead ${formatDuration(node.aheadMs)}`
        : formatDuration(node.ageMs);
      rows.push([
        node.id,
        liveText(node),
        age,
        h && h.format === 2 ? h.state : "-",
        h?.version || "-",
        h?.app ?? "-",
        h?.address || "-",
        h?.clusterAddress ?? "-",
        node.tls ?? "-",
      ]);
    }
    lines.push(...table(rows));
  }
  if (status.apps.length > 0) {
    const rows = [["APP", "DEPLOYED VERSION", "SEQ"]];
    for (const app of status.apps) {
      rows.push([app.app, app.version ?? "?", app.seq === undefined ? "?" : String(app.seq)]);
    }
    lines.push("", ...table(rows));
  }
  lines.push("", summaryLine(status.summary));
  for (const warning of status.warnings) lines.push(`warning: ${warning}`);
  return lines.join("\n");
}

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
  /** Whether the node takes actors; `null` in a heartbeat from before node leases. */
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
 * import { clusterStatusJson, readClusterStatus } from "./status.ts";
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
        state: h && h.format === 2 ? h.state : null,
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
 * calls this). Throws what the bucket throws when it cannot be read; a
 * heartbeat that cannot be decoded is listed with its `problem` and a warning.
 *
 * @example
 * ```ts
 * import { clusterStatus } from "./status.ts";
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
  const bucket = openBucket(options.bucket, options.open);
  try {
    return clusterStatusJson(await readClusterStatus(bucket, options.bucket, tool));
  } finally {
    await bucket.close();
  }
}

/** A fence or forget the bucket's state does not allow; the CLI prints it and exits 1. */
export class ClusterToolRefusal extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ClusterToolRefusal";
  }
}

/** What `fenceNode` found and did. */
export interface FenceOutcome {
  /**
   * `fenced`: a heartbeat was written fenced; `created`: there was none (or
   * one that could not be read) and a fence dated now was written;
   * `already-fenced` / `released`: nothing was written.
   */
  action: "fenced" | "created" | "already-fenced" | "released";
  nodeId: string;
  /** The heartbeat as it is now in the bucket. */
  heartbeat: Heartbeat;
  /** The lease as it was before the fence, for `fenced`: live or lapsed. */
  wasLive?: boolean;
  /** Why a `created` fence replaced an object. */
  replacedProblem?: string;
  /** When the node's actors are free: line 4 plus ttl + grace. */
  freeAt: number;
  /** This machine's clock when it finished. */
  now: number;
}

/** Line 5 replaced by `fenced cli`, every other line kept as it is. */
function fencedText(body: Uint8Array): Uint8Array {
  const text = new TextDecoder().decode(body);
  const lines = text.split("\n");
  lines[4] = `fenced ${CLI_FENCER}`;
  return new TextEncoder().encode(lines.join("\n"));
}

/**
 * Fences node `nodeId` (`wasmkeep cluster fence`): writes its heartbeat
 * `fenced cli`, keeping its other lines and its line-4 date, `If-Match` the
 * ETag read; with no object (or one that cannot be read), writes a minimal
 * fenced heartbeat dated now. A refused condition is re-read and tried again,
 * {@linkcode CONDITION_ATTEMPTS} times in all. Refuses a heartbeat in the
 * format from before node leases, whose node does not read fences.
 *
 * @example
 * ```ts
 * import { fenceNode } from "./status.ts";
 * import { MemoryBucket } from "../bucket/memory.ts";
 * (await fenceNode(new MemoryBucket(), "node-b")).action; // "created"
 * ```
 */
export async function fenceNode(
  bucket: Bucket,
  nodeId: string,
  options: ClusterToolOptions = {},
): Promise<FenceOutcome> {
  assertNodeId(nodeId, "the node to fence");
  const clock = options.now ?? Date.now;
  const timing = leaseTiming(options.ttlMs);
  const key = nodeKey(nodeId);
  let lastRefusal: unknown;
  for (let attempt = 0; attempt < CONDITION_ATTEMPTS; attempt++) {
    const object = await bucket.get(key);
    let current: Heartbeat | undefined;
    let problem: string | undefined;
    if (object) {
      try {
        current = decodeHeartbeat(object.body, key);
        if (current.nodeId !== nodeId) {
          problem = `line 2 names node ${JSON.stringify(current.nodeId)}`;
          current = undefined;
        }
      } catch (error) {
        if (!(error instanceof MalformedHeartbeat)) throw error;
        problem = error.problem;
      }
    }
    const done = (outcome: Omit<FenceOutcome, "freeAt" | "now" | "nodeId">): FenceOutcome => ({
      ...outcome,
      nodeId,
      freeAt: outcome.heartbeat.at + timing.fenceAfterMs,
      now: clock(),
    });
    if (current?.format === 1) {
      throw new ClusterToolRefusal(
        `${key} is a heartbeat in the format from before node leases: a node of that version ` +
          `does not read fences, so a fence would not stop it. Stop its process; once the ` +
          `heartbeat is older than ${formatDuration(timing.ttlMs + timing.fenceAfterMs)}, ` +
          `wasmkeep cluster forget ${nodeId} removes it`,
      );
    }
    if (current?.lease === "fenced") {
      return done({ action: "already-fenced", heartbeat: current });
    }
    if (current?.lease === "released") {
      return done({ action: "released", heartbeat: current });
    }
    try {
      if (current) {
        await bucket.put(key, fencedText(object!.body), { ifMatch: object!.etag });
        const heartbeat: Heartbeat = { ...current, lease: "fenced", fencedBy: CLI_FENCER };
        return done({
          action: "fenced",
          heartbeat,
          wasLive: isLive(current, clock(), timing.ttlMs),
        });
      }
      const heartbeat: Heartbeat = {
        format: 2,
        nodeId,
        process: "-",
        at: clock(),
        lease: "fenced",
        fencedBy: CLI_FENCER,
        address: "-",
        readsSecrets: false,
        takesMoved: false,
        version: "-",
        state: "serving",
      };
      await bucket.put(
        key,
        encodeHeartbeat(heartbeat),
        object ? { ifMatch: object.etag } : { ifNoneMatch: "*" },
      );
      return done({ action: "created", heartbeat, replacedProblem: problem });
    } catch (error) {
      if (!(error instanceof PreconditionFailed)) throw error;
      lastRefusal = error;
    }
  }
  throw new ClusterToolRefusal(
    `${key} changed under each of ${CONDITION_ATTEMPTS} fence attempts (${
      (lastRefusal as Error).message
    }); nothing was written, try again`,
  );
}

/** What `forgetNode` removed. */
export interface ForgetOutcome {
  nodeId: string;
  /** The heartbeat removed (format 1). */
  heartbeat: Heartbeat;
  /** Its age on this machine's clock when it was removed. */
  ageMs: number;
}

/**
 * Removes a retired node's heartbeat (`wasmkeep cluster forget`): only one in
 * the format from before node leases (format 1) whose time is older than the
 * ttl plus ttl + grace (25 s by default), deleted `If-Match` the ETag read.
 * Refuses a node lease (format 2: leases are never collected), a younger
 * heartbeat, one that cannot be read, and a missing one.
 *
 * @example
 * ```ts ignore
 * import { forgetNode } from "./status.ts";
 * await forgetNode(bucket, "old-node");
 * ```
 */
export async function forgetNode(
  bucket: Bucket,
  nodeId: string,
  options: ClusterToolOptions = {},
): Promise<ForgetOutcome> {
  assertNodeId(nodeId, "the node to forget");
  const clock = options.now ?? Date.now;
  const timing = leaseTiming(options.ttlMs);
  const minAgeMs = timing.ttlMs + timing.fenceAfterMs;
  const key = nodeKey(nodeId);
  let removed: ForgetOutcome | undefined;
  for (let attempt = 0; attempt < CONDITION_ATTEMPTS; attempt++) {
    const object = await bucket.get(key);
    if (object === null) {
      // A delete whose answer was lost and whose resend was refused did land.
      if (removed) return removed;
      throw new ClusterToolRefusal(`no heartbeat ${key}: nothing to forget`);
    }
    let heartbeat: Heartbeat;
    try {
      heartbeat = decodeHeartbeat(object.body, key);
    } catch (error) {
      if (!(error instanceof MalformedHeartbeat)) throw error;
      throw new ClusterToolRefusal(
        `${error.message}; not removed: forget removes only a heartbeat in the format from before node leases`,
      );
    }
    if (heartbeat.format === 2) {
      throw new ClusterToolRefusal(
        `${key} is a node lease, not a heartbeat from before node leases: leases are never ` +
          `collected (deleting one frees none of the node's actors). Stop the node (a clean stop ` +
          `releases it), or use wasmkeep cluster fence ${nodeId} to revoke it`,
      );
    }
    const now = clock();
    const ageMs = now - heartbeat.at;
    if (ageMs <= minAgeMs) {
      throw new ClusterToolRefusal(
        `${key} was written ${
          ageMs < 0
            ? `${formatDuration(-ageMs)} ahead of this clock`
            : `${formatDuration(ageMs)} ago`
        }: a heartbeat from before node leases is removed only once it is older than ${
          formatDuration(minAgeMs)
        } (its ${formatDuration(timing.ttlMs)} horizon plus ${
          formatDuration(timing.fenceAfterMs)
        }); stop its node first, then try again in ${formatDuration(minAgeMs - ageMs + 1)}`,
      );
    }
    try {
      removed = { nodeId, heartbeat, ageMs };
      await bucket.delete(key, { ifMatch: object.etag });
      return removed;
    } catch (error) {
      if (!(error instanceof PreconditionFailed)) throw error;
      if (!error.maybeOwnWrite) removed = undefined;
    }
  }
  throw new ClusterToolRefusal(
    `${key} changed under each of ${CONDITION_ATTEMPTS} attempts; nothing was removed, try again`,
  );
}
