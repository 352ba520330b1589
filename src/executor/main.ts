/**
 * An executor process: the shell around the runtime (runtime.ts). It
 * connects to the Unix socket the node names in its arguments, reads the
 * node's framed messages (frames.ts) from it and writes the runtime's; its
 * log goes to stderr, which it shares with the node. It lives and dies with
 * its node (lifeline.ts). The node kills it (SIGKILL) when an event runs
 * past its wall-clock limit, which ends the loop, the instances and the
 * database connections with their locks at once; a terminated Deno Worker
 * would keep spinning and keep its connections (docs/adr/0001).
 *
 * @module
 */

import { createLogger, type LogLevel } from "../log.ts";
import { FrameSender, readFrames } from "../actors/frames.ts";
import type { Plain } from "../actors/codec.ts";
import { type ExecutorInit, type ToExecutor, toExecutorMessage } from "../actors/protocol.ts";
import { openBucket } from "../bucket/open.ts";
import { systemClock, systemRandom } from "../time/clock.ts";
import { bindToNode, executorNodePid } from "./lifeline.ts";
import { componentProgram } from "./program.ts";
import type { ExecutorRuntime } from "./runtime.ts";
import { buildExecutorRuntime } from "./build_runtime.ts";
import { serveMessages } from "./message_loop.ts";

/**
 * Runs an executor on the Unix socket at `socketPath` until the node closes
 * it or sends a shutdown message; then the process must exit (the lifeline's
 * Worker keeps it alive). The executor lives and dies with its node, process
 * `nodePid` (its parent when not given): see lifeline.ts.
 *
 * @example
 * ```ts
 * import { runExecutor } from "./main.ts";
 * await runExecutor("/tmp/wasmkeep-1234-x/e0.sock", 1234);
 * Deno.exit(0);
 * ```
 */
export async function runExecutor(socketPath: string, nodePid = Deno.ppid): Promise<void> {
  bindToNode(nodePid);
  const conn = await Deno.connect({ transport: "unix", path: socketPath });
  const sender = new FrameSender(conn);
  try {
    await serveMessages(messagesOf(conn), (init) => startRuntime(init, sender));
    await sender.drain();
  } finally {
    conn.close();
  }
}

/** The node's messages on `conn`, each checked: a frame of another shape ends the executor. */
async function* messagesOf(conn: Deno.Conn): AsyncGenerator<ToExecutor> {
  for await (const frame of readFrames(conn)) yield toExecutorMessage(frame);
}

/** The runtime of a real executor: components, the system's clock, its own bucket client. */
function startRuntime(init: ExecutorInit, sender: FrameSender): Promise<ExecutorRuntime> {
  return buildExecutorRuntime(init, {
    clock: systemClock,
    random: systemRandom,
    log: createLogger({ level: init.logLevel as LogLevel }),
    openBucket: ({ bucketUrl }) =>
      openBucket(bucketUrl, { clock: systemClock, random: systemRandom }),
    program: componentProgram,
    post: (message) => sender.send(message as unknown as Plain),
    drain: () => sender.drain(),
  });
}

if (import.meta.main) {
  await runExecutor(Deno.args[0], executorNodePid(Deno.args[1]));
  Deno.exit(0);
}
