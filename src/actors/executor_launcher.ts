/**
 * The process boundary of the execution plane, as the pool (executor_pool.ts)
 * sees it: a launcher starts executor `index` and hands back a channel that
 * carries messages both ways, can kill the executor, and tells when it is
 * gone. {@linkcode ProcessLauncher} starts real processes on Unix sockets;
 * the simulator's launcher runs the same runtime in its own process
 * (sim/executor_host.ts), so that this boundary is all it replaces.
 *
 * @module
 */

import type { Logger } from "../log.ts";
import type { Plain } from "./codec.ts";
import { FrameSender, readFrames } from "./frames.ts";
import { type FromExecutor, fromExecutorMessage, type ToExecutor } from "./protocol.ts";
import { makeSocketDir } from "./executor_sockets.ts";

/** How an executor ended, as far as its process tells. */
export interface ExecutorExit {
  code: number | null;
  signal?: string;
}

/** What a launcher tells the pool of one executor. */
export interface ExecutorHandlers {
  /** A message of the executor. */
  onMessage(message: FromExecutor): void;
  /** Once, when it is gone (it exited, was killed, or never connected). */
  onExit(exit: ExecutorExit): void;
}

/** One executor, as the pool talks to it. */
export interface ExecutorChannel {
  /**
   * Sends a message, queued until the executor connected; throws when the
   * message cannot be sent (over the frame limit).
   */
  send(message: ToExecutor): void;
  /** Whether the executor connected: messages reach it as they are sent. */
  readonly connected: boolean;
  /** Ends the executor at once (SIGKILL). */
  kill(): void;
  /** Resolves once it is gone. */
  readonly exited: Promise<void>;
}

/** Starts executors. */
export interface ExecutorLauncher {
  /** Starts executor `index`; throws when it cannot be started (no process, no socket). */
  launch(index: number, handlers: ExecutorHandlers): ExecutorChannel;
  /** Removes what the launcher made (its executors are gone by then). */
  close(): Promise<void>;
}

/** The program and arguments that start an executor on `socketPath`. */
export type ExecutorCommand = (socketPath: string) => { program: string; args: string[] };

/**
 * Starts executors as processes of this binary (or `deno run` of the
 * executor module), each connecting to a Unix socket of its own.
 *
 * @example
 * ```ts
 * import { type ExecutorHandlers, ProcessLauncher } from "./executor_launcher.ts";
 * import { createLogger } from "../log.ts";
 * declare const handlers: ExecutorHandlers;
 * const launcher = new ProcessLauncher(createLogger());
 * const channel = launcher.launch(0, handlers);
 * ```
 */
export class ProcessLauncher implements ExecutorLauncher {
  readonly #log: Logger;
  readonly #command: ExecutorCommand;
  /** Where the executors' sockets are; removed by close(). */
  readonly #socketDir: string;
  #launched = 0;

  constructor(log: Logger, command: ExecutorCommand = defaultCommand) {
    this.#log = log;
    this.#command = command;
    this.#socketDir = makeSocketDir(log);
  }

  launch(index: number, handlers: ExecutorHandlers): ExecutorChannel {
    const socketPath = `${this.#socketDir}/e${index}-${++this.#launched}.sock`;
    const listener = Deno.listen({ transport: "unix", path: socketPath });
    let process: Deno.ChildProcess;
    try {
      const { program, args } = this.#command(socketPath);
      process = new Deno.Command(program, {
        args,
        stdin: "null",
        stdout: "inherit",
        stderr: "inherit",
      }).spawn();
    } catch (error) {
      listener.close();
      Deno.remove(socketPath).catch(() => {});
      throw error;
    }
    const channel = new ProcessChannel(process);
    channel.serve(listener, socketPath, handlers, this.#log, index);
    return channel;
  }

  async close(): Promise<void> {
    await Deno.remove(this.#socketDir, { recursive: true }).catch(() => {});
  }
}

class ProcessChannel implements ExecutorChannel {
  readonly #process: Deno.ChildProcess;
  #sender: FrameSender | undefined;
  /** Messages sent before it connected. */
  readonly #early: ToExecutor[] = [];
  #killed = false;
  /** It was told to shut down: it closes its end without reading what came after. */
  #shuttingDown = false;
  readonly exited: Promise<void>;

  constructor(process: Deno.ChildProcess) {
    this.#process = process;
    this.exited = process.status.then(() => {}, () => {});
  }

  get connected(): boolean {
    return this.#sender !== undefined;
  }

  send(message: ToExecutor): void {
    if (message.type === "shutdown") this.#shuttingDown = true;
    if (this.#sender) this.#sender.send(message as unknown as Plain);
    else this.#early.push(message);
  }

  kill(): void {
    this.#killed = true;
    try {
      this.#process.kill("SIGKILL");
    } catch {
      // Exited already.
    }
  }

  async serve(
    listener: Deno.Listener,
    socketPath: string,
    handlers: ExecutorHandlers,
    log: Logger,
    index: number,
  ): Promise<void> {
    // The process may die before it connects: then accept() would wait
    // forever, so its exit closes the listener.
    this.#process.status.then(() => listener.close()).catch(() => {});
    let conn: Deno.Conn | undefined;
    try {
      conn = await listener.accept() as Deno.Conn;
      // The events of one turn go out in one write (see FrameBatching).
      this.#sender = new FrameSender(conn, "turn");
      for (const message of this.#early.splice(0)) this.#sender.send(message as unknown as Plain);
      for await (const frame of readFrames(conn)) handlers.onMessage(fromExecutorMessage(frame));
    } catch (error) {
      // An executor that shut down closed its socket with the node's later
      // messages (a lease's renewal) unread: the kernel resets it.
      const expected = this.#killed || error instanceof Deno.errors.BadResource ||
        (this.#shuttingDown && error instanceof Deno.errors.ConnectionReset);
      if (!expected) {
        log.error("executor connection failed", { executor: index, error: String(error) });
        // A frame of another shape, or one the node could not send: the
        // executor cannot be talked to any more.
        this.kill();
      }
    } finally {
      try {
        listener.close();
      } catch {
        // Closed when the process exited.
      }
      await Deno.remove(socketPath).catch(() => {});
    }
    try {
      conn?.close();
    } catch {
      // Closed already.
    }
    const status = await this.#process.status;
    handlers.onExit({ code: status.code, signal: status.signal ?? undefined });
  }
}

/**
 * How to start an executor: the compiled binary runs itself with a hidden
 * command; `deno run` runs the executor module by its URL (a file, or JSR).
 * Either way it is given this process's id, to live and die with it
 * (src/executor/lifeline.ts).
 */
function defaultCommand(socketPath: string): { program: string; args: string[] } {
  const program = Deno.execPath();
  const binary = program.split(/[\\/]/).pop()!;
  const node = String(Deno.pid);
  if (!/^deno(\.exe)?$/.test(binary)) return { program, args: ["__executor", socketPath, node] };
  const module = new URL("../executor/main.ts", import.meta.url).href;
  return { program, args: ["run", "-A", "--no-prompt", module, socketPath, node] };
}
