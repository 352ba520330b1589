/**
 * WasmKeep: durable WebAssembly actors, each a component with its own SQLite
 * database, reached over HTTP at `/actor/<class>/<name>`.
 *
 * Run it:
 *
 * ```sh
 * deno run -A jsr:@wasmkeep/cli serve --actor counter=counter.wasm
 * ```
 *
 * Or embed a node in a program, or read a cluster's state from its bucket (what
 * `wasmkeep cluster status --json` prints):
 *
 * @example Embedding a node
 * ```ts
 * import { NODE_DEFAULTS, WasmKeepNode } from "./mod.ts";
 * const node = await WasmKeepNode.start({
 *   ...NODE_DEFAULTS,
 *   nodeId: "a",
 *   hostname: "127.0.0.1",
 *   port: 8080,
 *   dataDir: ".wasmkeep",
 *   actors: [{ className: "counter", path: "counter.wasm" }],
 *   executors: 2,
 * });
 * await node.whenReady;
 * ```
 *
 * @example Reading a cluster's state
 * ```ts
 * import { clusterStatus } from "./mod.ts";
 * const report = await clusterStatus({ bucket: "file://.wasmkeep/bucket" });
 * console.log(report.summary.live, report.warnings);
 * ```
 *
 * @example Deploying an app from a script (what `wasmkeep deploy` does)
 * ```ts
 * import { deploy, openBucket } from "./mod.ts";
 * const bucket = openBucket("file://.wasmkeep/bucket");
 * const outcome = await deploy(bucket, { tenant: "acme", app: "shop" }, {
 *   actors: { counter: "counter.wasm" },
 *   access: { counter: { kind: "existing", creatable: "main" } },
 * });
 * console.log(outcome.after.id, outcome.after.version.seq);
 * ```
 *
 * @module
 */

import { runCli } from "./cli/main.ts";

export { runCli } from "./cli/main.ts";
export {
  type ActorClassOption,
  type ClusterOptions,
  NODE_DEFAULTS,
  type NodeDependencies,
  type NodeOptions,
  NodeStartError,
  WasmKeepNode,
} from "./src/node/mod.ts";
export { ComponentError } from "./src/actors/component.ts";
export type { ActorKey } from "./src/actors/key.ts";
export type { Clock, Random, Timer } from "./src/time/clock.ts";
export {
  createLogger,
  type LogFields,
  type Logger,
  type LoggerOptions,
  type LogLevel,
} from "./src/log.ts";
// Everything a Bucket's methods take and return, so that a program wrapping
// or implementing one can name it.
export {
  type Bucket,
  type CallOptions,
  type DeleteOptions,
  type ListOptions,
  type ListPage,
  type ObjectInfo,
  PreconditionFailed,
  type PutOptions,
  type StoredObject,
} from "./src/bucket/bucket.ts";
export { openBucket, type OpenBucketOptions } from "./src/bucket/open.ts";
export type { Env } from "./src/bucket/s3_config.ts";
export {
  MemoryBucket,
  type MemoryBucketOptions,
  type MemoryFaults,
  type TimeWindow,
} from "./src/bucket/memory.ts";
export {
  clusterStatus,
  type ClusterStatusOptions,
  type ClusterStatusReport,
  type ClusterStatusReportApp,
  type ClusterStatusReportNode,
} from "./src/cluster/status_report.ts";
export type { LeaseState, ServingState } from "./src/cluster/heartbeat.ts";
export {
  deploy,
  DeployConflict,
  type DeployOptions,
  type DeployOutcome,
  DeployRefusal,
  type DeployRequest,
  DeployUsageError,
  type IdentifiedVersion,
  rollback,
  type RollbackOptions,
} from "./src/deploy/deploy.ts";
export { type AppName, parseAppName } from "./src/deploy/app_name.ts";
export { type AccessRule, parseAccessRule } from "./src/deploy/access_rule.ts";
export type { AppVersion, ClassVersion } from "./src/deploy/manifest.ts";
export type { RetentionResult } from "./src/deploy/retention.ts";
export { VERSION } from "./src/version.ts";

if (import.meta.main) {
  Deno.exit(await runCli(Deno.args));
}
