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
 * Or embed a node in a program:
 *
 * @example
 * ```ts ignore
 * import { NODE_DEFAULTS, WasmKeepNode } from "jsr:@wasmkeep/cli";
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
 * @module
 */

import { runCli } from "./cli/main.ts";

export { runCli } from "./cli/main.ts";
export {
  type ActorClassOption,
  NODE_DEFAULTS,
  type NodeDependencies,
  type NodeOptions,
  NodeStartError,
  WasmKeepNode,
} from "./src/node.ts";
export { ComponentError } from "./src/actors/component.ts";
export type { ActorKey } from "./src/actors/key.ts";
export type { Clock, Random, Timer } from "./src/time/clock.ts";
export type { Logger, LogLevel } from "./src/log.ts";
export { type Bucket, openBucket, PreconditionFailed } from "./src/bucket/mod.ts";
export { VERSION } from "./src/version.ts";

if (import.meta.main) {
  Deno.exit(await runCli(Deno.args));
}
