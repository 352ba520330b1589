/**
 * The cluster's state from the bucket alone (the spec's "Checking a
 * cluster"): read every heartbeat under `nodes/`, every
 * `apps/<tenant>/<app>/current` and the drain requests under `drains/`, judge
 * liveness on this machine's clock with the default lease timings, and word
 * as warnings what an operator should fix. The CLI only parses and prints.
 * The commands that refuse an id no live node has judge it here too
 * ({@linkcode readNodeStatus}).
 *
 * This module reads the bucket into a {@linkcode ClusterStatus}; printing it
 * is in `status_text.ts`, its JSON form (the package's `clusterStatus`) in
 * `status_report.ts`, and `fence` and `forget`, which write, in
 * `fence_forget.ts`. {@linkcode formatDuration} is here because the warnings
 * read here are worded with it, as are the table and the refusals.
 *
 * @module
 */

import { type Bucket, listAll } from "../bucket/bucket.ts";
import { APPS_PREFIX, DRAINS_PREFIX, nodeKey, NODES_PREFIX } from "../bucket/keys.ts";
import {
  decodeHeartbeat,
  type Heartbeat,
  isLive,
  MalformedHeartbeat,
  type ServingState,
} from "./heartbeat.ts";
import { isNodeId } from "../node_id.ts";
import { type LeaseTiming, leaseTiming } from "./lease_timing.ts";

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
  /** The nodes asked to drain (an object `drains/<id>`), sorted. */
  drains: string[];
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

/**
 * The STATE a heartbeat reports, or undefined for a node that predates
 * draining: a heartbeat from before node leases, or one whose line 11 is not
 * `take` (such a node writes `serving` whatever it does, and never drains).
 *
 * @example
 * ```ts
 * import { reportedState } from "./status.ts";
 * reportedState({ format: 2, takesMoved: true, state: "drained" }); // "drained"
 * reportedState({ format: 2, takesMoved: false, state: "serving" }); // undefined
 * ```
 */
export function reportedState(
  heartbeat: Pick<Heartbeat, "format" | "takesMoved" | "state">,
): ServingState | undefined {
  return heartbeat.format === 2 && heartbeat.takesMoved ? heartbeat.state : undefined;
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

/**
 * One node's heartbeat judged as {@linkcode readClusterStatus} judges it (live
 * by the same rule, on this machine's clock), for the commands that refuse an
 * id no live node has; `null` when there is no heartbeat `nodes/<id>`.
 *
 * @example
 * ```ts
 * import { readNodeStatus } from "./status.ts";
 * import { MemoryBucket } from "../bucket/memory.ts";
 * await readNodeStatus(new MemoryBucket(), "node-b"); // null
 * ```
 */
export async function readNodeStatus(
  bucket: Bucket,
  nodeId: string,
  options: ClusterToolOptions = {},
): Promise<NodeStatus | null> {
  const timing = leaseTiming(options.ttlMs);
  const entry = await readNode(bucket, nodeKey(nodeId));
  if (entry === null) return null;
  return judged(entry, (options.now ?? Date.now)(), timing);
}

/**
 * Why `node` (as {@linkcode readNodeStatus} read node `nodeId`, `null` for
 * none) is not live, in a few words; undefined when it is.
 *
 * @example
 * ```ts
 * import { whyNotLive } from "./status.ts";
 * whyNotLive(null, "node-b"); // "no heartbeat nodes/node-b"
 * ```
 */
export function whyNotLive(node: NodeStatus | null, nodeId: string): string | undefined {
  if (node?.live) return undefined;
  if (node === null) return `no heartbeat ${nodeKey(nodeId)}`;
  if (!node.heartbeat) return `${node.key} cannot be read: ${node.problem}`;
  if (node.heartbeat.lease === "fenced") return "its heartbeat is fenced";
  if (node.heartbeat.lease === "released") return "it stopped (its heartbeat is released)";
  return `its heartbeat was last written ${formatDuration(node.ageMs!)} ago`;
}

/** An entry read, with its liveness and age on this machine's clock. */
function judged(entry: Omit<NodeStatus, "live">, now: number, timing: LeaseTiming): NodeStatus {
  const heartbeat = entry.heartbeat;
  if (!heartbeat) return { ...entry, live: false };
  const ageMs = now - heartbeat.at;
  return {
    ...entry,
    live: isLive(heartbeat, now, timing.ttlMs),
    ageMs,
    aheadMs: ageMs < 0 ? -ageMs : undefined,
    tls: heartbeat.fingerprint && heartbeat.clusterAddress ? "pinned" : "plain",
  };
}

/** The node ids of the drain requests listed, sorted; a key that names none is left out. */
async function readDrains(bucket: Bucket): Promise<string[]> {
  const drains: string[] = [];
  for await (const object of listAll(bucket, DRAINS_PREFIX)) {
    let id: string;
    try {
      id = decodeURIComponent(object.key.slice(DRAINS_PREFIX.length));
    } catch {
      continue;
    }
    if (isNodeId(id)) drains.push(id);
  }
  return drains.sort();
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
  const drains = await readDrains(bucket);
  const now = (options.now ?? Date.now)();
  const nodes = read.filter((entry) => entry !== null).map((entry) => judged(entry, now, timing));
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
    drains,
    summary,
    warnings: statusWarnings(nodes, apps, drains, timing),
  };
}

const ids = (nodes: NodeStatus[]) => nodes.map((node) => node.id).join(", ");

function statusWarnings(
  nodes: NodeStatus[],
  apps: AppStatus[],
  drains: string[],
  timing: LeaseTiming,
): string[] {
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
    if (reportedState(node.heartbeat!) === "stuck") {
      warnings.push(
        `node ${node.id} is draining but stuck: it still holds actors or WebSockets and no other live node of its app takes them; start another node, or undrain one`,
      );
    }
  }
  warnings.push(...drainWarnings(nodes, drains));
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

/** Drain requests no live node acts on: for a node not live, or one that predates draining. */
function drainWarnings(nodes: NodeStatus[], drains: string[]): string[] {
  const warnings: string[] = [];
  for (const id of drains) {
    const node = nodes.find((node) => node.id === id);
    if (!node?.live) {
      warnings.push(
        `a drain request is waiting for node ${id}, which is not live: a process started with that id drains from its start; wasmkeep cluster undrain ${id} withdraws it`,
      );
    } else if (reportedState(node.heartbeat!) === undefined) {
      warnings.push(
        `node ${id} is asked to drain but runs a version that predates draining (its heartbeat's line 11 is not take): it keeps serving and taking actors; stop it instead`,
      );
    }
  }
  return warnings;
}
