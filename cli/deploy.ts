/**
 * `wasmkeep deploy`: parses its flags, runs `src/deploy/deploy.ts` against
 * the bucket, and prints what changed.
 *
 * @module
 */

import { type FlagSpec, formatHelp, parseArgs, UsageError } from "./args.ts";
import { openBucket } from "../src/bucket/open.ts";
import { S3ConfigError } from "../src/bucket/s3_config.ts";
import { ComponentError } from "../src/actors/component.ts";
import { classNameProblem } from "../src/actors/key.ts";
import { MAX_CONFIG_FILE_BYTES, parseEnvFile } from "../src/config/env_file.ts";
import { type AccessRule, parseAccessRule } from "../src/deploy/access_rule.ts";
import { type AppName, appNameString, parseAppName } from "../src/deploy/app_name.ts";
import {
  deploy,
  type DeployOutcome,
  DeployRefusal,
  type DeployRequest,
  DeployUsageError,
  rollback,
} from "../src/deploy/deploy.ts";
import { KEPT_BEFORE_CURRENT } from "../src/deploy/retention.ts";

/** Where deploy prints, and what it runs with (tests replace them). */
export interface DeployIo {
  /** Prints a line of the command's output. */
  stdout(text: string): void;
  /** Prints an error or a warning. */
  stderr(text: string): void;
  /** This machine's clock, ms since the epoch; default `Date.now`. */
  now?: () => number;
  /** The `AWS_*` variables for `s3://`; default the process's environment. */
  env?: Record<string, string>;
}

const consoleIo: DeployIo = {
  stdout: (text) => console.log(text),
  stderr: (text) => console.error(text),
};

/** Largest `--version-retention-secs`: ten years, far past any window worth keeping. */
const MAX_RETENTION_SECS = 10 * 365 * 86_400;

const DEPLOY_FLAGS: FlagSpec[] = [
  { name: "app", kind: "string", value: "TENANT/APP", description: "the app to deploy" },
  {
    name: "bucket",
    kind: "string",
    value: "URL",
    description:
      "the cluster's bucket: s3://BUCKET[/PREFIX] (with the AWS_* variables) or file://PATH",
  },
  {
    name: "actor",
    kind: "string",
    multiple: true,
    value: "CLASS=PATH",
    description: "a class and its component; with any, these are the app's classes",
  },
  {
    name: "access",
    kind: "string",
    multiple: true,
    value: "CLASS=RULE",
    description: "open (removes a rule), existing, existing:NAME or internal",
  },
  {
    name: "config",
    kind: "string",
    multiple: true,
    value: "CLASS=FILE",
    description: "NAME=VALUE lines config.get returns, stored in the clear; CLASS= removes",
  },
  {
    name: "requires",
    kind: "string",
    multiple: true,
    value: "CLASS=NAME,...",
    description: "names that must be set before the class runs; CLASS= removes",
  },
  {
    name: "rollback",
    kind: "boolean",
    description: "make the version before current current again, as a new version",
  },
  {
    name: "allow-reopen",
    kind: "boolean",
    description: "with --rollback: roll back even when a class becomes more open",
  },
  {
    name: "version-retention-secs",
    kind: "integer",
    min: 0,
    max: MAX_RETENTION_SECS,
    value: "N",
    description: "old versions stay this long after they stopped being current (0 allowed)",
    defaultText: "3600",
  },
  { name: "help", short: "h", kind: "boolean", description: "show this help" },
];

/** The help text of `wasmkeep deploy`. */
export const DEPLOY_HELP: string = formatHelp(
  "wasmkeep deploy --app TENANT/APP --bucket URL [--actor CLASS=PATH]... [--access CLASS=RULE]...\n" +
    "         [--config CLASS=FILE]... [--requires CLASS=NAME,...]... [--version-retention-secs N]\n" +
    "       wasmkeep deploy --app TENANT/APP --bucket URL --rollback [--allow-reopen]",
  "Writes a new version of the app to the bucket and makes it current; nodes started with\n" +
    "serve --app follow it. Every component is compiled and checked before anything is uploaded.\n" +
    "A deploy changes what it names and keeps the rest: without --actor the current classes are\n" +
    "kept, and classes not named keep their rule, configuration and required names.\n" +
    "--rollback makes the version before current current again (as a new version). After each\n" +
    `deploy, the current version and the ${KEPT_BEFORE_CURRENT} before it are kept; older ones ` +
    "are deleted once\nthey stopped being current more than --version-retention-secs ago.\n" +
    "Exits 0 when deployed (or nothing changed), 1 when refused or failed, 2 for a usage error.",
  DEPLOY_FLAGS,
);

function splitClass(flag: string, value: string, what: string): [string, string] {
  const eq = value.indexOf("=");
  if (eq <= 0) throw new UsageError(`--${flag} must be CLASS=${what}, not '${value}'`);
  const className = value.slice(0, eq);
  const problem = classNameProblem(className);
  if (problem) throw new UsageError(`--${flag} ${value}: ${problem}`);
  return [className, value.slice(eq + 1)];
}

/** At most `limit` bytes of `file` (a pipe reports no size, so none is asked). */
async function readAtMost(file: string, limit: number): Promise<Uint8Array> {
  using handle = await Deno.open(file, { read: true });
  const buffer = new Uint8Array(limit);
  let filled = 0;
  while (filled < limit) {
    const n = await handle.read(buffer.subarray(filled));
    if (n === null) break;
    filled += n;
  }
  return buffer.subarray(0, filled);
}

async function readConfig(value: string, file: string): Promise<Record<string, string>> {
  let bytes: Uint8Array;
  try {
    bytes = await readAtMost(file, MAX_CONFIG_FILE_BYTES + 1);
  } catch (error) {
    throw new UsageError(`--config ${value}: cannot read ${file}: ${(error as Error).message}`);
  }
  if (bytes.length > MAX_CONFIG_FILE_BYTES) {
    throw new UsageError(
      `--config ${value}: the file is larger than ${MAX_CONFIG_FILE_BYTES} bytes`,
    );
  }
  try {
    return parseEnvFile(new TextDecoder().decode(bytes));
  } catch (error) {
    // The parser's message names the line, never a value.
    throw new UsageError(`--config ${value}: ${file} ${(error as Error).message}`);
  }
}

/** What `deploy`'s flags ask for. */
interface DeployCommand {
  app: AppName;
  bucket: string;
  rollback: boolean;
  allowReopen: boolean;
  retentionMs: number;
  request: DeployRequest;
}

async function deployArgs(flags: Record<string, unknown>): Promise<DeployCommand> {
  const appFlag = flags.app as string | undefined;
  if (appFlag === undefined) throw new UsageError("deploy needs --app TENANT/APP");
  let app: AppName;
  try {
    app = parseAppName(appFlag);
  } catch (error) {
    throw new UsageError((error as Error).message);
  }
  const bucket = flags.bucket as string | undefined;
  if (bucket === undefined) {
    throw new UsageError("deploy needs --bucket URL (s3://BUCKET[/PREFIX] or file://PATH)");
  }
  if (!/^(s3|file):\/\/./.test(bucket)) {
    throw new UsageError(`--bucket must be s3://BUCKET[/PREFIX] or file://PATH, not '${bucket}'`);
  }
  const list = (name: string) => (flags[name] as string[] | undefined) ?? [];
  const actors: Record<string, string> = {};
  for (const value of list("actor")) {
    const [className, path] = splitClass("actor", value, "PATH");
    if (path === "") throw new UsageError(`--actor must be CLASS=PATH, not '${value}'`);
    if (className in actors) throw new UsageError(`--actor names class '${className}' twice`);
    actors[className] = path;
  }
  const access: Record<string, AccessRule> = {};
  for (const value of list("access")) {
    const [className, rule] = splitClass("access", value, "RULE");
    if (className in access) throw new UsageError(`--access names class '${className}' twice`);
    try {
      access[className] = parseAccessRule(rule);
    } catch (error) {
      throw new UsageError(`--access ${value}: ${(error as Error).message}`);
    }
  }
  const config: Record<string, Record<string, string>> = {};
  const removedConfig = new Set<string>();
  for (const value of list("config")) {
    const [className, file] = splitClass("config", value, "FILE");
    if (file === "" ? className in config : removedConfig.has(className)) {
      throw new UsageError(
        `--config ${className}= removes the configuration; it cannot be given with --config ${className}=FILE`,
      );
    }
    if (file === "") {
      removedConfig.add(className);
      config[className] = {};
    } else {
      // Several files of one class are merged, a later one winning by name, as serve does.
      config[className] = { ...config[className], ...await readConfig(value, file) };
    }
  }
  const requires: Record<string, string[]> = {};
  for (const value of list("requires")) {
    const [className, names] = splitClass("requires", value, "NAME,...");
    if (className in requires) throw new UsageError(`--requires names class '${className}' twice`);
    requires[className] = names === "" ? [] : names.split(",").map((name) => name.trim());
  }
  const rollingBack = flags.rollback === true;
  if (rollingBack) {
    const given = ["actor", "access", "config", "requires"].filter((name) => list(name).length);
    if (given.length > 0) {
      throw new UsageError(
        `--rollback brings back the previous version as it was; it takes no --${given[0]} ` +
          "(roll back first, then deploy the change)",
      );
    }
  } else if (flags["allow-reopen"] === true) {
    throw new UsageError("--allow-reopen goes with --rollback");
  }
  const retentionSecs = (flags["version-retention-secs"] as number | undefined) ?? 3600;
  return {
    app,
    bucket,
    rollback: rollingBack,
    allowReopen: flags["allow-reopen"] === true,
    retentionMs: retentionSecs * 1000,
    request: { actors, access, config, requires },
  };
}

function version(id: string, seq: number): string {
  return `${id} (seq ${seq})`;
}

function report(outcome: DeployOutcome, io: DeployIo): void {
  const app = appNameString(outcome.app);
  for (const warning of outcome.warnings) io.stderr(`warning: ${warning}`);
  const { after, before } = outcome;
  if (outcome.kind === "unchanged") {
    io.stdout(
      `nothing changed: ${app} stays at version ${version(after.id, after.version.seq)}; ` +
        "no version written",
    );
    reportRetention(outcome, io);
    return;
  }
  for (const line of outcome.changes) io.stdout(line);
  if (outcome.kind === "rolled-back" && outcome.restored && before) {
    io.stdout(
      `rolled back ${app} to the content of version ${
        version(outcome.restored.id, outcome.restored.version.seq)
      }, from ${version(before.id, before.version.seq)}`,
    );
  }
  io.stdout(
    `${app}: version ${version(after.id, after.version.seq)} is current` +
      (before ? ` (was ${version(before.id, before.version.seq)})` : " (its first version)"),
  );
  reportRetention(outcome, io);
}

function reportRetention(outcome: DeployOutcome, io: DeployIo): void {
  const retention = outcome.retention;
  if (retention && "error" in retention) {
    io.stderr(`warning: old versions were not collected this time: ${retention.error}`);
  } else if (retention) {
    if (retention.deleted.length > 0) {
      io.stdout(
        `removed ${retention.deleted.length} old ${
          retention.deleted.length === 1 ? "version" : "versions"
        }: ${retention.deleted.join(", ")}`,
      );
    }
    if (retention.stopped === "current-changed") {
      io.stderr("warning: another deploy moved current during the collection of old versions");
    }
  }
}

/**
 * Runs `wasmkeep deploy ARGS` and returns the exit status: 0 when deployed
 * or nothing changed, 1 when refused or the bucket failed. Throws
 * {@linkcode UsageError} (exit 2).
 *
 * @example
 * ```ts
 * import { deployCommand } from "./deploy.ts";
 * Deno.exit(await deployCommand(["--app", "acme/shop", "--bucket", "file://.wasmkeep/bucket",
 *   "--actor", "counter=examples/counter/counter.wasm"]));
 * ```
 */
export async function deployCommand(args: string[], io: DeployIo = consoleIo): Promise<number> {
  const { flags, positionals } = parseArgs(args, DEPLOY_FLAGS, "deploy");
  if (flags.help) {
    io.stdout(DEPLOY_HELP);
    return 0;
  }
  if (positionals.length > 0) {
    throw new UsageError(
      `deploy takes no arguments, got '${positionals[0]}' (classes are --actor CLASS=PATH)`,
    );
  }
  const command = await deployArgs(flags);
  const name = appNameString(command.app);
  let bucket;
  try {
    bucket = openBucket(command.bucket, io.env ? { env: io.env } : {});
  } catch (error) {
    if (!(error instanceof S3ConfigError)) throw error;
    io.stderr(`wasmkeep: cannot open the bucket ${command.bucket}: ${error.message}`);
    return 1;
  }
  try {
    const options = { now: io.now, retentionMs: command.retentionMs };
    const outcome = command.rollback
      ? await rollback(bucket, command.app, { ...options, allowReopen: command.allowReopen })
      : await deploy(bucket, command.app, command.request, options);
    report(outcome, io);
    return 0;
  } catch (error) {
    if (error instanceof DeployUsageError) throw new UsageError(error.message);
    if (error instanceof ComponentError) {
      io.stderr(`wasmkeep: deploy ${name}: refused, nothing uploaded: ${error.message}`);
    } else if (error instanceof DeployRefusal) {
      io.stderr(`wasmkeep: deploy ${name}: ${error.message}`);
    } else {
      io.stderr(`wasmkeep: deploy ${name}: bucket ${command.bucket}: ${(error as Error).message}`);
    }
    return 1;
  } finally {
    await bucket.close();
  }
}
