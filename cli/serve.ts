/**
 * `wasmkeep serve`: parses its flags and runs a node until SIGTERM or Ctrl-C.
 *
 * @module
 */

import { type FlagSpec, formatHelp, parseArgs, UsageError } from "./args.ts";
import {
  type ActorClassOption,
  NODE_DEFAULTS,
  type NodeDependencies,
  type NodeOptions,
  WasmKeepNode,
} from "../src/node/mod.ts";
import { classNameProblem } from "../src/actors/key.ts";
import { MAX_CONFIG_FILE_BYTES, parseEnvFile } from "../src/config/env_file.ts";
import type { LogLevel } from "../src/log.ts";
import {
  ALARM_RETRY_MAX_MS,
  MAX_SOCKET_MESSAGE_BYTES,
  SOCKET_MESSAGE_BYTES_CEILING,
} from "../src/limits.ts";
import { isNodeId } from "../src/node_id.ts";
import { type AccessRule, parseAccessRule } from "../src/deploy/access_rule.ts";
import { type AppName, parseAppName } from "../src/deploy/app_name.ts";
import { defaultFailoverWaitMs } from "../src/cluster/failover_wait.ts";
import { leaseTiming } from "../src/cluster/lease_timing.ts";

/**
 * At most `limit` bytes of `file`: its size is not asked, since a pipe
 * (`--config c=<(...)`) reports none and may never end.
 */
function readAtMost(file: string, limit: number): Uint8Array {
  const handle = Deno.openSync(file, { read: true });
  try {
    const buffer = new Uint8Array(limit);
    let filled = 0;
    while (filled < limit) {
      const n = handle.readSync(buffer.subarray(filled));
      if (n === null) break;
      filled += n;
    }
    return buffer.subarray(0, filled);
  } finally {
    handle.close();
  }
}

/**
 * Largest value of a flag in seconds that sets a timer: a day. Timers take at
 * most 2^31 - 1 ms (24.8 days) and fire at once past it.
 */
const MAX_DURATION_SECS = 86_400;

/** Most executor processes: each gets a share of the node's 2,048 open databases. */
const MAX_EXECUTORS = 256;

/** Flags that set how a node works with other nodes: they need --bucket. */
const CLUSTER_ONLY_FLAGS = [
  "advertise",
  "cluster-plaintext",
  "failover-wait-secs",
  "lease-ttl-secs",
  "history-retention-secs",
];

const SERVE_FLAGS: FlagSpec[] = [
  {
    name: "actor",
    kind: "string",
    multiple: true,
    value: "CLASS=PATH",
    description: "serve the actor component at PATH as class CLASS",
  },
  {
    name: "config",
    kind: "string",
    multiple: true,
    value: "CLASS=FILE",
    description: "NAME=VALUE lines config.get returns to CLASS",
  },
  {
    name: "access",
    kind: "string",
    multiple: true,
    value: "CLASS=RULE",
    description:
      "who reaches CLASS from outside: open, existing (only actors that exist), existing:NAME (and NAME may be created) or internal (only actors, with actors.call); with --app, until the app deploys rules",
    defaultText: "open",
  },
  {
    name: "app",
    kind: "string",
    value: "TENANT/APP",
    description:
      "follow the app deployed to the bucket (wasmkeep deploy): its classes, rules and configuration, its actors under its tenant",
  },
  {
    name: "env",
    kind: "string",
    multiple: true,
    value: "FILE",
    description:
      "NAME=VALUE lines every class reads with config.get, over its configuration by name (node-local values, e.g. secrets)",
  },
  {
    name: "data-dir",
    kind: "string",
    value: "DIR",
    description: "where actor databases and the component cache live",
    defaultText: ".wasmkeep",
  },
  {
    name: "listen",
    kind: "string",
    value: "ADDR",
    description: "HOST:PORT of the client listener (port 0: any free port)",
    defaultText: "127.0.0.1:8080",
  },
  {
    name: "node-id",
    kind: "string",
    value: "ID",
    description: "this node's id, [a-z0-9-]",
    defaultText: "from the host name",
  },
  {
    name: "bucket",
    kind: "string",
    value: "URL",
    description: "s3://BUCKET[/PREFIX] or file://PATH",
    defaultText: "file://DATA-DIR/bucket",
  },
  {
    name: "advertise",
    kind: "string",
    value: "URL",
    description: "the URL other nodes forward requests to",
    defaultText: "http://LISTEN",
  },
  {
    name: "cluster-listen",
    kind: "string",
    value: "ADDR",
    description: "HOST:PORT of the cluster listener: mutual TLS between nodes, only they reach it",
  },
  {
    name: "cluster-advertise",
    kind: "string",
    value: "URL",
    description: "https://HOST:PORT other nodes reach the cluster listener at",
  },
  {
    name: "cluster-plaintext",
    kind: "string",
    value: "refuse|accept",
    description: "whether plain HTTP between nodes is used; refuse needs --cluster-listen",
    defaultText: "refuse",
  },
  {
    name: "failover-wait-secs",
    kind: "integer",
    max: MAX_DURATION_SECS,
    min: 0,
    value: "N",
    description:
      "how long a GET/HEAD or WebSocket upgrade for a dead or stopping node's actor is kept (0: off)",
    defaultText: "from the lease timing: 25 with the default ttl",
  },
  {
    name: "max-connections",
    kind: "integer",
    min: 1,
    value: "N",
    description: "client connections at once, lowered to fit the open-file limit",
    defaultText: "10000",
  },
  {
    name: "lease-ttl-secs",
    kind: "integer",
    max: MAX_DURATION_SECS,
    min: 3,
    value: "N",
    description:
      "node lease ttl; every lease timing derives from it (heartbeat ttl×0.3, fence after ttl×1.5)",
    defaultText: "10",
  },
  {
    name: "event-timeout-secs",
    kind: "integer",
    max: MAX_DURATION_SECS,
    min: 1,
    value: "N",
    description: "wall-clock limit of one event, answered 504",
    defaultText: "30",
  },
  {
    name: "max-queued-events",
    kind: "integer",
    min: 1,
    value: "N",
    description: "events one actor may have waiting; more get 503",
    defaultText: "128",
  },
  {
    name: "max-resident-actors",
    kind: "integer",
    min: 1,
    value: "N",
    description: "actors in memory at once; least recently used hibernate first",
    defaultText: "10000",
  },
  {
    name: "idle-secs",
    kind: "integer",
    max: MAX_DURATION_SECS,
    min: 1,
    value: "N",
    description: "an actor without events this long hibernates",
    defaultText: "60",
  },
  {
    name: "db-idle-secs",
    kind: "integer",
    max: MAX_DURATION_SECS,
    min: 1,
    value: "N",
    description: "an actor's database unused this long is closed (the actor may stay in memory)",
    defaultText: "5",
  },
  {
    name: "history-retention-secs",
    kind: "integer",
    min: 0,
    value: "N",
    description:
      "old actor history stays in the bucket this long before collection may delete it (0 allowed)",
    defaultText: "3600",
  },
  {
    name: "max-body-bytes",
    kind: "integer",
    min: 0,
    value: "N",
    description: "largest request body, at most 33554432 (32 MiB); larger get 413",
    defaultText: "1048576",
  },
  {
    name: "max-socket-message-bytes",
    kind: "integer",
    min: 1,
    max: SOCKET_MESSAGE_BYTES_CEILING,
    value: "N",
    description:
      "largest WebSocket message either way, at most 16777216 (16 MiB); a larger one from a client closes its socket with 1009",
    defaultText: String(MAX_SOCKET_MESSAGE_BYTES),
  },
  {
    name: "alarm-retry-max-secs",
    kind: "integer",
    min: 1,
    value: "N",
    description: "ceiling of the backoff between retries of a failed on-alarm (from 1 s, doubling)",
    defaultText: String(ALARM_RETRY_MAX_MS / 1000),
  },
  {
    name: "executors",
    kind: "integer",
    max: MAX_EXECUTORS,
    min: 1,
    value: "N",
    description:
      "executor processes that run the actors, each started on first use when standalone",
    defaultText: "one per core",
  },
  {
    name: "abi",
    kind: "string",
    value: "auto|jco",
    description:
      "how components are bound: auto (direct bindings where they fit, jco's glue elsewhere) or jco",
    defaultText: "auto",
  },
  {
    name: "log-level",
    kind: "string",
    value: "LEVEL",
    description: "debug, info, warn or error",
    defaultText: "info",
  },
  { name: "help", short: "h", kind: "boolean", description: "show this help" },
];

/** The variables an `s3://` bucket is reached with (src/bucket/s3_config.ts). */
const SERVE_ENVIRONMENT = `Environment, with --bucket s3://...:
  AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY  the bucket's credentials; without them serve exits at start
  AWS_SESSION_TOKEN                         with temporary credentials
  AWS_REGION (or AWS_DEFAULT_REGION)        the region to sign for (default us-east-1)
  AWS_ENDPOINT (or AWS_ENDPOINT_URL)        an S3-compatible store (MinIO, R2, moto...), addressed path-style
  AWS_ALLOW_HTTP=true                       allows a plain http:// endpoint (local testing only)
  WASMKEEP_S3_CREDENTIALS=default-chain     credentials from the AWS SDK's own chain instead: ~/.aws
                                            profiles, SSO, ECS/EKS container and EC2 instance roles`;

/** The help text of `wasmkeep serve`. */
export const SERVE_HELP: string = formatHelp(
  "wasmkeep serve [STATELESS.wasm (not in this version yet)] (--actor CLASS=PATH... | --app TENANT/APP) [flags]",
  "Runs a WasmKeep node: actors at /actor/<class>/<name>, health at /_wasmkeep/health,\n" +
    "readiness at /_wasmkeep/ready. SIGTERM or Ctrl-C stops it cleanly.",
  SERVE_FLAGS,
) + `\n\n${SERVE_ENVIRONMENT}`;

/** The largest --max-body-bytes: half a frame to an executor (MAX_FRAME_BYTES). */
const MAX_BODY_BYTES = 32 * 1024 * 1024;

function parseListen(value: string, flag = "listen"): { hostname: string; port: number } {
  const match = value.match(/^(?:\[([0-9a-fA-F:.]+)\]|([^:\[\]]*)):(\d{1,5})$/);
  const port = match ? Number(match[3]) : NaN;
  if (!match || port > 65535) {
    throw new UsageError(
      `--${flag} must be HOST:PORT (e.g. 127.0.0.1:${
        flag === "listen" ? 8080 : 7443
      } or [::1]:8080), not '${value}'`,
    );
  }
  return { hostname: match[1] ?? (match[2] || "0.0.0.0"), port };
}

function defaultNodeId(): string {
  const id = Deno.hostname().toLowerCase().replace(/[^a-z0-9-]+/g, "-").replace(/^-+|-+$/g, "")
    .slice(0, 63);
  return isNodeId(id) ? id : "node";
}

function splitClassValue(flag: string, value: string): [string, string] {
  const eq = value.indexOf("=");
  if (eq <= 0 || eq === value.length - 1) {
    throw new UsageError(
      `--${flag} must be CLASS=${flag === "actor" ? "PATH" : "FILE"}, not '${value}'`,
    );
  }
  const className = value.slice(0, eq);
  const problem = classNameProblem(className);
  if (problem) throw new UsageError(`--${flag} ${value}: ${problem}`);
  return [className, value.slice(eq + 1)];
}

/** The NAME=VALUE lines of `file`, for the flag `flag` (named in its errors). */
function readValuesFile(flag: string, file: string): Record<string, string> {
  let text: string;
  try {
    const bytes = readAtMost(file, MAX_CONFIG_FILE_BYTES + 1);
    if (bytes.length > MAX_CONFIG_FILE_BYTES) {
      throw new UsageError(`${flag}: the file is larger than ${MAX_CONFIG_FILE_BYTES} bytes`);
    }
    text = new TextDecoder().decode(bytes);
  } catch (error) {
    if (error instanceof UsageError) throw error;
    throw new UsageError(`${flag}: cannot read ${file}: ${(error as Error).message}`);
  }
  try {
    return parseEnvFile(text);
  } catch (error) {
    throw new UsageError(`${flag}: ${file} ${(error as Error).message}`);
  }
}

/** Turns `serve`'s arguments into node options. Throws {@linkcode UsageError}. */
export function serveOptions(args: string[]): NodeOptions | "help" {
  const { flags, positionals } = parseArgs(args, SERVE_FLAGS, "serve");
  if (flags.help) return "help";
  if (positionals.length > 1) {
    throw new UsageError(
      `serve takes one stateless component at most, got ${positionals.length} files`,
    );
  }
  if (positionals.length === 1) {
    throw new UsageError(
      `a stateless component (${
        positionals[0]
      }) is not in this version yet; serve actors with --actor CLASS=PATH`,
    );
  }
  const appValue = flags.app as string | undefined;
  let app: AppName | undefined;
  if (appValue !== undefined) {
    try {
      app = parseAppName(appValue);
    } catch (error) {
      throw new UsageError((error as Error).message);
    }
  }
  const actors = new Map<string, ActorClassOption>();
  for (const value of (flags.actor as string[] | undefined) ?? []) {
    if (app) {
      throw new UsageError(
        `--actor ${value}: a node following --app ${appValue} serves the classes its deploys give (wasmkeep deploy --app ${appValue} --actor ${value})`,
      );
    }
    const [className, path] = splitClassValue("actor", value);
    if (actors.has(className)) throw new UsageError(`--actor names class '${className}' twice`);
    actors.set(className, { className, path });
  }
  if (actors.size === 0 && !app) {
    throw new UsageError(
      "serve needs at least one actor class: --actor CLASS=PATH (e.g. --actor counter=examples/counter/counter.wasm), or --app TENANT/APP to follow an app deployed to the bucket",
    );
  }
  const accessFlags: Record<string, AccessRule> = {};
  for (const value of (flags.access as string[] | undefined) ?? []) {
    const eq = value.indexOf("=");
    const className = eq > 0 ? value.slice(0, eq) : "";
    if (eq <= 0) throw new UsageError(`--access must be CLASS=RULE, not '${value}'`);
    const problem = classNameProblem(className);
    if (problem) throw new UsageError(`--access ${value}: ${problem}`);
    let rule: AccessRule;
    try {
      rule = parseAccessRule(value.slice(eq + 1));
    } catch (error) {
      throw new UsageError(`--access ${value}: ${(error as Error).message}`);
    }
    const actor = actors.get(className);
    if (app) accessFlags[className] = rule;
    else if (!actor) {
      throw new UsageError(`--access ${value}: no --actor gives class '${className}'`);
    } else actor.access = rule;
  }
  for (const value of (flags.config as string[] | undefined) ?? []) {
    if (app) {
      throw new UsageError(
        `--config ${value}: a node following --app ${appValue} reads its classes' configuration from the app (wasmkeep deploy --app ${appValue} --config ${value}); node-local values go in --env FILE`,
      );
    }
    const [className, file] = splitClassValue("config", value);
    const actor = actors.get(className);
    if (!actor) throw new UsageError(`--config ${value}: no --actor gives class '${className}'`);
    actor.config = { ...actor.config, ...readValuesFile(`--config ${value}`, file) };
  }
  let env: Record<string, string> | undefined;
  for (const file of (flags.env as string[] | undefined) ?? []) {
    env = { ...env, ...readValuesFile(`--env ${file}`, file) };
  }
  const nodeId = (flags["node-id"] as string | undefined) ?? defaultNodeId();
  if (!isNodeId(nodeId)) {
    throw new UsageError(
      `--node-id must be lower-case letters, digits and '-' (at most 63, not first or last), not '${nodeId}'`,
    );
  }
  const clusterListen = flags["cluster-listen"] as string | undefined;
  const clusterAdvertise = flags["cluster-advertise"] as string | undefined;
  if ((clusterListen === undefined) !== (clusterAdvertise === undefined)) {
    throw new UsageError(
      clusterListen === undefined
        ? "--cluster-advertise needs --cluster-listen (the address the cluster listener binds, e.g. 0.0.0.0:7443): the two flags go together"
        : "--cluster-listen needs --cluster-advertise https://HOST:PORT (the address other nodes reach it at): the two flags go together",
    );
  }
  if (clusterListen !== undefined && flags["node-id"] === undefined) {
    throw new UsageError(
      "--cluster-listen and --cluster-advertise go only with --node-id (a cluster node's id)",
    );
  }
  if (clusterListen !== undefined && flags.bucket === undefined) {
    throw new UsageError(
      "--cluster-listen needs --bucket (the bucket the cluster's nodes share): a node on its embedded bucket talks to no other node",
    );
  }
  if (clusterAdvertise !== undefined && !/^https:\/\/[^/\s]+:\d{1,5}\/?$/.test(clusterAdvertise)) {
    throw new UsageError(
      `--cluster-advertise must be https://HOST:PORT (the cluster listener speaks mutual TLS), not '${clusterAdvertise}'`,
    );
  }
  const plaintext = (flags["cluster-plaintext"] as string | undefined) ?? "refuse";
  if (plaintext !== "refuse" && plaintext !== "accept") {
    throw new UsageError(`--cluster-plaintext must be refuse or accept, not '${plaintext}'`);
  }
  const bucketUrl = flags.bucket as string | undefined;
  const clusterOnly = CLUSTER_ONLY_FLAGS.find((name) => flags[name] !== undefined);
  if (clusterOnly !== undefined && bucketUrl === undefined) {
    throw new UsageError(
      `--${clusterOnly} needs --bucket (the bucket the cluster's nodes share): a node on its embedded bucket talks to no other node and replicates nothing`,
    );
  }
  // A node on its embedded bucket talks to no other node.
  if (
    flags["node-id"] !== undefined && bucketUrl !== undefined && plaintext === "refuse" &&
    clusterListen === undefined
  ) {
    throw new UsageError(
      "--node-id without --cluster-listen needs --cluster-plaintext accept: with refuse (the default) nodes talk to each other only over mutual TLS; give --cluster-listen ADDR --cluster-advertise https://HOST:PORT, or --cluster-plaintext accept on a private network",
    );
  }
  const advertise = flags.advertise as string | undefined;
  if (advertise !== undefined && !/^https?:\/\/[^/\s]+\/?$/.test(advertise)) {
    throw new UsageError(`--advertise must be http://HOST:PORT, not '${advertise}'`);
  }
  const logLevel = (flags["log-level"] as string | undefined) ?? NODE_DEFAULTS.logLevel;
  if (!["debug", "info", "warn", "error"].includes(logLevel)) {
    throw new UsageError(`--log-level must be debug, info, warn or error, not '${logLevel}'`);
  }
  const maxBody = flags["max-body-bytes"] as number | undefined;
  if (maxBody !== undefined && maxBody > MAX_BODY_BYTES) {
    // A request travels to its executor in one frame, which has a limit.
    throw new UsageError(`--max-body-bytes must be at most ${MAX_BODY_BYTES}, not ${maxBody}`);
  }
  const abi = (flags.abi as string | undefined) ?? NODE_DEFAULTS.abi;
  if (abi !== "auto" && abi !== "jco") {
    throw new UsageError(`--abi must be auto or jco, not '${abi}'`);
  }
  if (bucketUrl !== undefined && !/^(s3|file):\/\/./.test(bucketUrl)) {
    throw new UsageError(
      `--bucket must be s3://BUCKET[/PREFIX] or file://PATH, not '${bucketUrl}'`,
    );
  }
  const seconds = (name: string, fallbackMs: number) =>
    flags[name] === undefined ? fallbackMs : (flags[name] as number) * 1000;
  return {
    nodeId,
    ...parseListen((flags.listen as string | undefined) ?? "127.0.0.1:8080"),
    dataDir: (flags["data-dir"] as string | undefined) ?? ".wasmkeep",
    actors: [...actors.values()],
    ...(app ? { app, accessFlags } : {}),
    ...(env ? { env } : {}),
    bucketUrl,
    eventTimeoutMs: seconds("event-timeout-secs", NODE_DEFAULTS.eventTimeoutMs),
    maxQueuedEvents: (flags["max-queued-events"] as number | undefined) ??
      NODE_DEFAULTS.maxQueuedEvents,
    maxResidentActors: (flags["max-resident-actors"] as number | undefined) ??
      NODE_DEFAULTS.maxResidentActors,
    idleMs: seconds("idle-secs", NODE_DEFAULTS.idleMs),
    databaseIdleMs: seconds("db-idle-secs", NODE_DEFAULTS.databaseIdleMs),
    historyRetentionMs: seconds("history-retention-secs", NODE_DEFAULTS.historyRetentionMs),
    cluster: bucketUrl === undefined ? undefined : {
      advertise: advertise?.replace(/\/$/, ""),
      plaintext: plaintext as "accept" | "refuse",
      listener: clusterListen === undefined ? undefined : {
        ...parseListen(clusterListen, "cluster-listen"),
        advertise: clusterAdvertise!.replace(/\/$/, ""),
      },
      failoverWaitMs: seconds(
        "failover-wait-secs",
        defaultFailoverWaitMs(
          leaseTiming(seconds("lease-ttl-secs", NODE_DEFAULTS.leaseTtlMs)),
        ),
      ),
      leaseTtlMs: seconds("lease-ttl-secs", NODE_DEFAULTS.leaseTtlMs),
    },
    maxConnections: (flags["max-connections"] as number | undefined) ??
      NODE_DEFAULTS.maxConnections,
    maxBodyBytes: maxBody ?? NODE_DEFAULTS.maxBodyBytes,
    maxSocketMessageBytes: (flags["max-socket-message-bytes"] as number | undefined) ??
      MAX_SOCKET_MESSAGE_BYTES,
    alarmRetryMaxMs: seconds("alarm-retry-max-secs", ALARM_RETRY_MAX_MS),
    executors: (flags.executors as number | undefined) ?? navigator.hardwareConcurrency,
    stopGraceMs: NODE_DEFAULTS.stopGraceMs,
    abi,
    logLevel: logLevel as LogLevel,
  };
}

/**
 * Runs `wasmkeep serve` until a stop signal; returns the exit status.
 *
 * @example
 * ```ts
 * import { serveCommand } from "./serve.ts";
 * Deno.exit(await serveCommand(["--actor", "counter=examples/counter/counter.wasm"]));
 * ```
 */
export async function serveCommand(args: string[], deps: NodeDependencies = {}): Promise<number> {
  const options = serveOptions(args);
  if (options === "help") {
    console.log(SERVE_HELP);
    return 0;
  }
  const node = await WasmKeepNode.start(options, deps);
  const stopped = Promise.withResolvers<void>();
  let signals = 0;
  const onSignal = () => {
    if (++signals > 1) Deno.exit(130);
    node.stop().then(stopped.resolve, stopped.reject);
  };
  const watched: Deno.Signal[] = Deno.build.os === "windows" ? ["SIGINT"] : ["SIGINT", "SIGTERM"];
  for (const signal of watched) Deno.addSignalListener(signal, onSignal);
  try {
    // A bucket that fails the probe ends the command with an error; one that
    // passes leaves the node serving until a signal.
    await Promise.race([
      stopped.promise,
      node.whenFailed,
      node.whenReady.then(
        () => stopped.promise,
        // Stopped by a signal before the probe passed: a clean stop.
        (error) => signals > 0 ? stopped.promise : Promise.reject(error),
      ),
    ]);
  } finally {
    for (const signal of watched) Deno.removeSignalListener(signal, onSignal);
  }
  return 0;
}
