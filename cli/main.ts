/**
 * The `wasmkeep` command line: dispatches to the commands.
 *
 * @module
 */

import { UsageError } from "./args.ts";
import { SERVE_HELP, serveCommand } from "./serve.ts";
import { CLUSTER_HELP, clusterCommand } from "./cluster.ts";
import { ACTOR_HELP, actorCommand } from "./actor.ts";
import { DEPLOY_HELP, deployCommand } from "./deploy.ts";
import { runExecutor } from "../src/executor/main.ts";
import { executorNodePid } from "../src/executor/lifeline.ts";
import { runTranspile } from "../src/actors/transpile_process.ts";
import { VERSION } from "../src/version.ts";
import { ComponentError, TranspileFailure } from "../src/actors/component.ts";
import { type NodeDependencies, NodeStartError } from "../src/node/mod.ts";

/** The help text of `wasmkeep` itself. */
export const MAIN_HELP =
  `WasmKeep ${VERSION}: durable WebAssembly actors, each with its own SQLite database.

Usage: wasmkeep <command> [flags]

Commands:
  serve      run a node (wasmkeep serve --help)
  deploy     deploy an app's actors to the bucket, or roll back (wasmkeep deploy --help)
  cluster    check a cluster; fence, forget, drain or undrain a node (wasmkeep cluster --help)
  actor      move one actor to another node (wasmkeep actor --help)
  version    print the version
  help       show this help

Example:
  wasmkeep serve --actor counter=examples/counter/counter.wasm --listen 127.0.0.1:8080
  curl -X POST localhost:8080/actor/counter/alice`;

const COMMAND_HELP: Record<string, string> = {
  serve: SERVE_HELP,
  deploy: DEPLOY_HELP,
  cluster: CLUSTER_HELP,
  actor: ACTOR_HELP,
  version: "Usage: wasmkeep version\n\nPrints the WasmKeep version.",
};

/**
 * Runs the CLI with `args` and returns the exit status: 0 on success, 1 when
 * the command failed, 2 for a usage error. `deps` replaces the node's clock,
 * log or bucket (tests).
 *
 * @example
 * ```ts
 * import { runCli } from "./main.ts";
 * Deno.exit(await runCli(Deno.args));
 * ```
 */
export async function runCli(args: string[], deps: NodeDependencies = {}): Promise<number> {
  const [command, ...rest] = args;
  try {
    switch (command) {
      case undefined:
      case "help":
      case "--help":
      case "-h":
        if (rest[0] && Object.hasOwn(COMMAND_HELP, rest[0])) {
          console.log(COMMAND_HELP[rest[0]]);
        } else {
          console.log(MAIN_HELP);
        }
        return 0;
      case "version":
      case "--version":
        if (rest.includes("--help") || rest.includes("-h")) {
          console.log(COMMAND_HELP.version);
          return 0;
        }
        if (rest.length > 0) throw new UsageError(`version takes no arguments, got '${rest[0]}'`);
        console.log(`wasmkeep ${VERSION}`);
        return 0;
      case "serve":
        return await serveCommand(rest, deps);
      case "deploy":
        return await deployCommand(rest);
      case "cluster":
        return await clusterCommand(rest);
      case "actor":
        return await actorCommand(rest);
      case "__executor":
        // A node's executor process, started by the node itself (how a
        // compiled binary runs its executors): not for people.
        await runExecutor(rest[0], executorNodePid(rest[1]));
        return 0;
      case "__transpile":
        // A node's transpile of a component, in a process of its own.
        await runTranspile();
        return 0;
      default:
        throw new UsageError(`unknown command '${command}' (see wasmkeep --help)`);
    }
  } catch (error) {
    if (error instanceof UsageError) {
      console.error(`wasmkeep: ${error.message}`);
      return 2;
    }
    if (
      error instanceof ComponentError || error instanceof TranspileFailure ||
      error instanceof NodeStartError
    ) {
      console.error(`wasmkeep: ${error.message}`);
      return 1;
    }
    throw error;
  }
}
