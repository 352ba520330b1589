/**
 * Cluster nodes under chaos: each node id is a slot whose process can be
 * killed (SIGKILL of the whole tree), paused (SIGSTOP) and resumed
 * (SIGCONT), and restarted, with or without its data directory. Every fault
 * and every process's exit goes into one timeline, from which the checks
 * learn how long a node was paused and why a node could have lost a write.
 *
 * @module
 */

import type { NodeProcess } from "../../src/testing/node_process.ts";
import { startClusterNode } from "../../src/testing/cluster.ts";

/** One thing that happened to a node's process. */
export interface NodeEvent {
  /** `Date.now()`. */
  at: number;
  node: string;
  /** Which process of the node (0 the first). */
  incarnation: number;
  what: "ready" | "kill" | "pause" | "resume" | "exit" | "start-failed";
  detail?: string;
}

/** How to start a node's process. */
export interface SlotOptions {
  dir: string;
  bucketUrl: string;
  actors: string[];
  leaseTtlSecs: number;
  env: Record<string, string>;
  extra: string[];
}

/** Log lines after which a node may have dropped an actor's writes not yet uploaded. */
const DROPS_WRITES =
  /node lease not valid|another writer took this node's lease|upload failed; giving the actor up|executor exited|actor failed/;

/** A node id and its current process, if one runs. */
export class Slot {
  readonly id: string;
  /** The running process, or undefined while it is down or starting. */
  proc?: NodeProcess;
  incarnation = -1;
  paused = false;
  /** A fault (and the restart after it) is under way. */
  busy = false;
  /** Every process started (its stderr), or why a start failed. */
  readonly #processes: (NodeProcess | string)[] = [];
  readonly #options: SlotOptions;
  readonly #timeline: NodeEvent[];
  /** Set while this test stops the process itself, so its exit is expected. */
  #stopping = false;

  constructor(id: string, options: SlotOptions, timeline: NodeEvent[]) {
    this.id = id;
    this.#options = options;
    this.#timeline = timeline;
  }

  #record(what: NodeEvent["what"], detail?: string) {
    this.#timeline.push({
      at: Date.now(),
      node: this.id,
      incarnation: this.incarnation,
      what,
      detail,
    });
  }

  /**
   * Starts a new process (its data directory emptied first with `empty`);
   * a start that fails is recorded and tried again, up to three times.
   */
  async start(empty = false): Promise<void> {
    if (empty) {
      await Deno.remove(`${this.#options.dir}/${this.id}`, { recursive: true }).catch(() => {});
    }
    for (let attempt = 1;; attempt++) {
      this.incarnation++;
      try {
        const proc = await startClusterNode(
          this.id,
          this.#options.dir,
          this.#options.bucketUrl,
          this.#options.actors,
          {
            leaseTtlSecs: this.#options.leaseTtlSecs,
            env: this.#options.env,
            extra: this.#options.extra,
          },
        );
        this.#processes.push(proc);
        const incarnation = this.incarnation;
        this.proc = proc;
        this.#stopping = false;
        this.#record("ready", proc.url);
        proc.status.then((status) => {
          if (this.incarnation !== incarnation || this.#stopping) return;
          this.#timeline.push({
            at: Date.now(),
            node: this.id,
            incarnation,
            what: "exit",
            detail: `code ${status.code}${status.signal ? ` signal ${status.signal}` : ""}`,
          });
          this.proc = undefined;
        });
        return;
      } catch (error) {
        this.#processes.push(String(error));
        this.#record("start-failed", String(error).slice(0, 2000));
        if (attempt === 3) throw error;
        await new Promise((r) => setTimeout(r, 2000));
      }
    }
  }

  /** SIGKILL of the process and its executors, as a lost machine. */
  async kill(): Promise<void> {
    const proc = this.proc;
    if (!proc) return;
    this.#stopping = true;
    this.proc = undefined;
    this.#record("kill");
    await proc.killTree();
    this.paused = false;
  }

  /** SIGSTOP of the whole tree, as a frozen machine. */
  pause(): void {
    this.proc?.signalTree("SIGSTOP");
    this.paused = true;
    this.#record("pause");
  }

  /** SIGCONT of the whole tree. */
  resume(): void {
    this.proc?.signalTree("SIGCONT");
    this.paused = false;
    this.#record("resume");
  }

  /**
   * Waits up to `ms` for the process to exit by itself (a fenced node
   * stops at its next heartbeat write); true if it did.
   */
  async exited(ms: number): Promise<boolean> {
    const proc = this.proc;
    if (!proc) return true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const done = await Promise.race([
      proc.status.then(() => true),
      new Promise<boolean>((r) => timer = setTimeout(() => r(false), ms)),
    ]);
    clearTimeout(timer);
    if (done) this.proc = undefined;
    return done;
  }

  /** Stops the process cleanly (SIGTERM); its exit status. */
  async stop(): Promise<Deno.CommandStatus | undefined> {
    const proc = this.proc;
    if (!proc) return undefined;
    this.#stopping = true;
    this.proc = undefined;
    return await proc.stop();
  }

  /** Every process's stderr so far, each under a header. */
  logs(): string {
    return this.#processes.map((process, i) =>
      `----- node ${this.id} process ${i} -----\n${
        typeof process === "string" ? process : process.logs()
      }`
    ).join("\n");
  }

  /** Log lines of this node matching `pattern` between `from` and `to` (`Date.now()` times). */
  linesMatching(pattern: RegExp, from: number, to: number): string[] {
    return this.logs().split("\n").filter((line) => {
      if (!pattern.test(line)) return false;
      const at = Date.parse(line.slice(0, 24));
      return at >= from && at <= to;
    });
  }
}

/** How long `node`'s process `incarnation` was paused between `from` and `to`. */
export function pausedWithin(
  timeline: NodeEvent[],
  node: string,
  incarnation: number,
  from: number,
  to: number,
): number {
  let total = 0;
  let pausedAt: number | undefined;
  for (const event of timeline) {
    if (event.node !== node || event.incarnation !== incarnation) continue;
    if (event.what === "pause") pausedAt = event.at;
    if ((event.what === "resume" || event.what === "kill") && pausedAt !== undefined) {
      total += Math.max(0, Math.min(event.at, to) - Math.max(pausedAt, from));
      pausedAt = undefined;
    }
  }
  if (pausedAt !== undefined) total += Math.max(0, to - Math.max(pausedAt, from));
  return total;
}

/**
 * Why `node` could have lost a write it acknowledged at `from` by `to`: a
 * kill, a pause or an exit of one of its processes in that time, or a log
 * line saying it dropped its actors or gave one up. Undefined: nothing did.
 */
export function lossExcuse(
  timeline: NodeEvent[],
  slot: Slot,
  from: number,
  to: number,
): string | undefined {
  const event = timeline.find((e) =>
    e.node === slot.id && e.at >= from && e.at <= to &&
    (e.what === "kill" || e.what === "pause" || e.what === "exit")
  );
  if (event) return `${event.what} of ${event.node}#${event.incarnation} at ${event.at}`;
  return slot.linesMatching(DROPS_WRITES, from, to)[0];
}
