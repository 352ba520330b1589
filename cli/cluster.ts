/**
 * `wasmkeep cluster status | fence | forget | drain | undrain`: parses their
 * flags and prints what `src/cluster/status.ts` reads,
 * `src/cluster/fence_forget.ts` or `src/handover/drain_command.ts` writes in
 * the bucket.
 *
 * @module
 */

import { type FlagSpec, formatHelp, parseArgs, UsageError } from "./args.ts";
import {
  BUCKET_FLAG,
  bucketUrl,
  cannotOpen,
  type ClusterIo,
  consoleIo,
  HELP_FLAG,
  nodeIdArgument,
  openOptions,
  withBucket,
} from "./bucket_command.ts";
import { leaseTiming } from "../src/cluster/lease_timing.ts";
import { formatDuration, readClusterStatus } from "../src/cluster/status.ts";
import { formatClusterStatus } from "../src/cluster/status_text.ts";
import { clusterStatus } from "../src/cluster/status_report.ts";
import {
  ClusterToolRefusal,
  fenceNode,
  type FenceOutcome,
  forgetNode,
} from "../src/cluster/fence_forget.ts";
import { drainNode, type DrainOutcome, undrainNode } from "../src/handover/drain_command.ts";

export type { ClusterIo } from "./bucket_command.ts";

const STATUS_FLAGS: FlagSpec[] = [
  BUCKET_FLAG,
  { name: "json", kind: "boolean", description: "print one JSON object, for scripts" },
  HELP_FLAG,
];
const NODE_FLAGS: FlagSpec[] = [BUCKET_FLAG, HELP_FLAG];
const DRAIN_FLAGS: FlagSpec[] = [
  BUCKET_FLAG,
  {
    name: "force",
    kind: "boolean",
    description: "go on when no live node has the id (for a node about to start)",
  },
  HELP_FLAG,
];

const timing = leaseTiming();
const fenceAfter = formatDuration(timing.fenceAfterMs);
const forgetAfter = formatDuration(timing.ttlMs + timing.fenceAfterMs);

/** The help text of `wasmkeep cluster status`. */
export const CLUSTER_STATUS_HELP: string = formatHelp(
  "wasmkeep cluster status --bucket URL [--json]",
  "Lists every node's heartbeat (nodes/<id>) and every app's deployed version, from the bucket\n" +
    "alone, whether or not any node answers. A node is live if its lease was written within\n" +
    `${formatDuration(timing.ttlMs)}, measured on this machine's clock (keep it in sync); ` +
    "fenced and released nodes never are.\n" +
    "Exits 1 when no node is live (an empty bucket included), the bucket cannot be read,\n" +
    "or a file:// bucket's folder does not exist (a typo; cluster commands never make one),\n" +
    "0 otherwise, warnings or not. With --json, node ages are age_ms (negative, with ahead_ms,\n" +
    "for a lease dated ahead of this clock).",
  STATUS_FLAGS,
);

/** The help text of `wasmkeep cluster fence`. */
export const CLUSTER_FENCE_HELP: string = formatHelp(
  "wasmkeep cluster fence <node> --bucket URL",
  "Revokes a node's lease: writes its heartbeat fenced, keeping its other lines and the date of\n" +
    "its last live write, or writes a fence dated now when it has none. Its process stops at its\n" +
    `next heartbeat write, and its actors are free ${fenceAfter} after that date. A service manager\n` +
    "that restarts the process brings it back as a new process: to remove a machine, stop and\n" +
    "disable its service too, and rotate its bucket credentials.",
  NODE_FLAGS,
);

/** The help text of `wasmkeep cluster forget`. */
export const CLUSTER_FORGET_HELP: string = formatHelp(
  "wasmkeep cluster forget <node> --bucket URL",
  "Removes a retired node's heartbeat in the format from before node leases, once it is older\n" +
    `than ${forgetAfter}. Node leases are never collected: stop the node (a clean stop releases ` +
    "its\nlease) or fence it instead.",
  NODE_FLAGS,
);

/** The help text of `wasmkeep cluster drain`. */
export const CLUSTER_DRAIN_HELP: string = formatHelp(
  "wasmkeep cluster drain <node> --bucket URL [--force]",
  "Asks a node to drain (writes drains/<node>): it claims no actor, hands the actors it holds to\n" +
    "other live nodes of its app with their WebSockets and alarms, and reports STATE draining,\n" +
    "then drained once it holds nothing (wasmkeep cluster status); it keeps running and forwarding\n" +
    "until you stop it. With no node to hand to, it keeps serving and reports stuck.\n" +
    "Refuses an id no live node has, as cluster status counts it (a request for a mistyped id\n" +
    "would stay in the bucket). Exits 0 when the request is written, 1 when refused or the bucket\n" +
    "cannot be written.",
  DRAIN_FLAGS,
);

/** The help text of `wasmkeep cluster undrain`. */
export const CLUSTER_UNDRAIN_HELP: string = formatHelp(
  "wasmkeep cluster undrain <node> --bucket URL [--force]",
  "Withdraws a node's drain request (deletes drains/<node>): the node serves and takes actors\n" +
    "again. A request is withdrawn whether or not a live node has the id; with no request, an id\n" +
    "no live node has is refused (a typo). Exits 0 when the request is withdrawn or there was none,\n" +
    "1 when refused or the bucket cannot be written.",
  DRAIN_FLAGS,
);

/** The help text of `wasmkeep cluster`. */
export const CLUSTER_HELP: string = `Usage: wasmkeep cluster <command> --bucket URL

Reads or changes the cluster's state in its bucket alone; no node needs to answer.

Commands:
  status          the nodes, their leases, the deployed apps, and warnings
  fence <node>    revoke a node's lease (its actors are free ${fenceAfter} after its last write)
  forget <node>   remove a retired node's heartbeat from before node leases
  drain <node>    ask a node to hand its actors to the others and take none (STATE drained)
  undrain <node>  withdraw a drain request: the node takes actors again

See wasmkeep cluster <command> --help.`;

const HELP: Record<string, string> = {
  status: CLUSTER_STATUS_HELP,
  fence: CLUSTER_FENCE_HELP,
  forget: CLUSTER_FORGET_HELP,
  drain: CLUSTER_DRAIN_HELP,
  undrain: CLUSTER_UNDRAIN_HELP,
};

const FLAGS: Record<string, FlagSpec[]> = {
  status: STATUS_FLAGS,
  fence: NODE_FLAGS,
  forget: NODE_FLAGS,
  drain: DRAIN_FLAGS,
  undrain: DRAIN_FLAGS,
};

function nodeArgument(positionals: string[], command: string): string {
  if (positionals.length === 0) {
    throw new UsageError(`${command} needs a node id: wasmkeep ${command} <node> --bucket URL`);
  }
  if (positionals.length > 1) {
    throw new UsageError(`${command} takes one node id, got ${positionals.length}`);
  }
  return nodeIdArgument(positionals[0], command);
}

function freeLine(outcome: FenceOutcome, since: string): string {
  const { freeAt, now } = outcome;
  const when = `${fenceAfter} after ${since}`;
  return freeAt <= now
    ? `its actors are free now (since ${formatDuration(now - freeAt)}, ${when})`
    : `its actors are free at ${new Date(freeAt).toISOString()}, ${when} (in ${
      formatDuration(freeAt - now)
    })`;
}

function describeFence(outcome: FenceOutcome): string[] {
  const { nodeId, heartbeat, now } = outcome;
  const key = `nodes/${nodeId}`;
  switch (outcome.action) {
    case "fenced": {
      const age = now - heartbeat.at;
      const written = age < 0
        ? `dated ${formatDuration(-age)} ahead of this clock`
        : `last written ${formatDuration(age)} ago`;
      return [
        `fenced node ${nodeId} (${key}; its lease was ${
          outcome.wasLive ? "live" : "not live"
        }, ${written}): its process stops at its next heartbeat write`,
        freeLine(outcome, "its last live write"),
      ];
    }
    case "created":
      return [
        outcome.replacedProblem
          ? `${key} could not be read (${outcome.replacedProblem}): replaced it with a fence dated now`
          : `no heartbeat for node ${nodeId}: wrote a fence dated now (${key})`,
        `a process still running with this id stops at its next heartbeat write`,
        freeLine(outcome, "the fence"),
      ];
    case "already-fenced":
      return [
        `node ${nodeId} is already fenced (by ${heartbeat.fencedBy ?? "-"}): nothing written`,
        freeLine(outcome, "its last live write"),
      ];
    case "released":
      return [
        `node ${nodeId} stopped cleanly (its heartbeat is released): nothing to fence`,
      ];
  }
}

/** What a drain or an undrain did, in one line. */
function describeDrain(outcome: DrainOutcome, url: string): string {
  const { nodeId, notLive } = outcome;
  switch (outcome.action) {
    case "requested":
      return notLive !== undefined
        ? `drain requested for ${nodeId}, which is not live (${notLive}): a process started ` +
          `with that id drains from its start`
        : `drain requested for ${nodeId}${
          outcome.again ? " (it was requested already: written anew)" : ""
        }${
          outcome.predatesDraining
            ? ""
            : `; wait for STATE drained in wasmkeep cluster status --bucket ${url}`
        }`;
    case "withdrawn":
      return notLive !== undefined
        ? `drain request withdrawn for ${nodeId}, which is not live (${notLive})`
        : `drain request withdrawn for ${nodeId}; it takes actors again (STATE serving in ` +
          `wasmkeep cluster status --bucket ${url})`;
    case "none":
      return `no drain request for ${nodeId}: nothing withdrawn`;
  }
}

/** What `cluster status` prints, and how many nodes are live (its exit status). */
async function statusOutput(
  url: string,
  json: boolean,
  io: ClusterIo,
  now: () => number,
): Promise<{ text: string; live: number }> {
  if (json) {
    // The library's clusterStatus(), so that what it returns and what --json prints cannot drift.
    const report = await clusterStatus({ bucket: url, open: openOptions(io), now });
    return { text: JSON.stringify(report, null, 2), live: report.summary.live };
  }
  const status = await withBucket(url, io, (bucket) => readClusterStatus(bucket, url, { now }));
  return { text: formatClusterStatus(status), live: status.summary.live };
}

/**
 * Runs `wasmkeep cluster ARGS` and returns the exit status: 0, 1 when no node
 * is live (status), a refusal, or a bucket that cannot be read or written.
 * Throws {@linkcode UsageError} (exit 2).
 *
 * @example
 * ```ts
 * import { clusterCommand } from "./cluster.ts";
 * Deno.exit(await clusterCommand(["status", "--bucket", "file://.wasmkeep/bucket"]));
 * ```
 */
export async function clusterCommand(args: string[], io: ClusterIo = consoleIo): Promise<number> {
  const [sub, ...rest] = args;
  if (sub === undefined) {
    throw new UsageError(
      "cluster needs a command: status, fence, forget, drain or undrain (see wasmkeep cluster --help)",
    );
  }
  if (sub === "--help" || sub === "-h" || sub === "help") {
    io.stdout(rest[0] && Object.hasOwn(HELP, rest[0]) ? HELP[rest[0]] : CLUSTER_HELP);
    return 0;
  }
  if (!Object.hasOwn(HELP, sub)) {
    throw new UsageError(`unknown command 'cluster ${sub}' (see wasmkeep cluster --help)`);
  }
  const command = `cluster ${sub}`;
  const { flags, positionals } = parseArgs(rest, FLAGS[sub], command);
  if (flags.help) {
    io.stdout(HELP[sub]);
    return 0;
  }
  const url = bucketUrl(flags, command);
  const now = io.now ?? Date.now;
  if (sub === "status") {
    if (positionals.length > 0) {
      throw new UsageError(`cluster status takes no arguments, got '${positionals[0]}'`);
    }
    let output;
    try {
      output = await statusOutput(url, flags.json === true, io, now);
    } catch (error) {
      io.stderr(
        cannotOpen(url, error) ??
          `wasmkeep: cannot read bucket ${url}: ${(error as Error).message}`,
      );
      return 1;
    }
    io.stdout(output.text);
    return output.live > 0 ? 0 : 1;
  }
  const node = nodeArgument(positionals, command);
  const force = flags.force === true;
  try {
    if (sub === "drain" || sub === "undrain") {
      const outcome = await withBucket(
        url,
        io,
        (bucket) => (sub === "drain" ? drainNode : undrainNode)(bucket, node, { now, force }),
      );
      if (outcome.predatesDraining) {
        io.stderr(
          `wasmkeep: warning: node ${node} runs a version that predates draining (its ` +
            `heartbeat's line 11 is not take): it will not act on the request; stop it instead`,
        );
      }
      io.stdout(describeDrain(outcome, url));
    } else if (sub === "fence") {
      const outcome = await withBucket(url, io, (bucket) => fenceNode(bucket, node, { now }));
      for (const line of describeFence(outcome)) io.stdout(line);
    } else {
      const removed = await withBucket(url, io, (bucket) => forgetNode(bucket, node, { now }));
      io.stdout(
        `removed nodes/${node} (a heartbeat from before node leases, last written ${
          formatDuration(removed.ageMs)
        } ago)`,
      );
    }
    return 0;
  } catch (error) {
    if (error instanceof ClusterToolRefusal) {
      io.stderr(`wasmkeep: ${command} ${node}: ${error.message}`);
    } else if (cannotOpen(url, error) !== undefined) {
      io.stderr(cannotOpen(url, error)!);
    } else {
      io.stderr(`wasmkeep: ${command} ${node}: bucket ${url}: ${(error as Error).message}`);
    }
    return 1;
  }
}
