/**
 * An executor's message loop, the same for the process (main.ts, on its
 * socket) and the simulator (on its queue): `init` first, which makes the
 * runtime, then every message in order until `shutdown`.
 *
 * @module
 */

import type { ExecutorInit, ToExecutor } from "../actors/protocol.ts";
import type { ExecutorRuntime } from "./runtime.ts";

/**
 * Serves one executor's messages in order, as the process does with its
 * socket and the simulator with its queue: the first must be `init`, from
 * which `start` makes the runtime (its classes loaded); the runtime then
 * takes every message until `shutdown`, after which its actors are closed
 * and this resolves.
 *
 * @example
 * ```ts
 * import { serveMessages } from "./message_loop.ts";
 * import type { ExecutorInit, ToExecutor } from "../actors/protocol.ts";
 * import type { ExecutorRuntime } from "./runtime.ts";
 * declare const messages: AsyncIterable<ToExecutor>;
 * declare const startRuntime: (init: ExecutorInit) => Promise<ExecutorRuntime>;
 * await serveMessages(messages, (init) => startRuntime(init));
 * ```
 */
export async function serveMessages(
  messages: AsyncIterable<ToExecutor>,
  start: (init: ExecutorInit) => Promise<ExecutorRuntime>,
): Promise<void> {
  let runtime: ExecutorRuntime | undefined;
  for await (const message of messages) {
    if (message.type === "init") {
      if (runtime) throw new Error("an executor takes one init message");
      runtime = await start(message);
      runtime.ready();
      continue;
    }
    if (!runtime) throw new Error("the first message to an executor must be init");
    if (message.type === "classes") {
      // Every message after it sees the new programs.
      await runtime.setClasses(message.seq, message.line, message.classes);
      continue;
    }
    runtime.handle(message);
    if (message.type === "shutdown") {
      await runtime.shutdown();
      return;
    }
  }
}
