/**
 * A {@linkcode ClusterStatus} as `wasmkeep cluster status` prints it: a
 * header, the node table, the app table, the summary line, the nodes asked
 * to drain and the warnings.
 *
 * Apart from the reading (`status.ts`) because it is only layout: the same
 * status is also given as JSON (`status_report.ts`), which prints none of it.
 *
 * @module
 */

import { NODES_PREFIX } from "../bucket/keys.ts";
import {
  type ClusterStatus,
  formatDuration,
  type NodeStatus,
  reportedState,
  type StatusSummary,
} from "./status.ts";

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

/**
 * The summary line: `2 of 3 nodes live; TLS: 1 with a cluster listener, 1 plain; version: 0.3.0`.
 *
 * @example
 * ```ts
 * import { summaryLine } from "./status_text.ts";
 * summaryLine({ live: 0, nodes: 1, clusterListener: 0, plain: 0, versions: [] });
 * // "0 of 1 nodes live; TLS: 0 with a cluster listener, 0 plain; version: -"
 * ```
 */
export function summaryLine(summary: StatusSummary): string {
  return `${summary.live} of ${summary.nodes} nodes live; TLS: ${summary.clusterListener} with a ` +
    `cluster listener, ${summary.plain} plain; version: ${summary.versions.join(", ") || "-"}`;
}

/**
 * The status as `wasmkeep cluster status` prints it: header, node table, app
 * table (when there are apps), summary, the nodes asked to drain (when there
 * are drain requests) and warnings.
 *
 * @example
 * ```ts
 * import { formatClusterStatus } from "./status_text.ts";
 * import { readClusterStatus } from "./status.ts";
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
        (h && reportedState(h)) ?? "-",
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
  if (status.drains.length > 0) lines.push(`drain requested: ${status.drains.join(", ")}`);
  for (const warning of status.warnings) lines.push(`warning: ${warning}`);
  return lines.join("\n");
}
