/**
 * Whether a process id names a running process, for cleaning up what a
 * killed process left on the machine (temp files, locks, socket folders).
 * Read from `/proc`, so a question only Linux answers; elsewhere the answer
 * is "unknown" and nothing is removed on its strength.
 *
 * @module
 */

/** What `/proc` says of a process id. */
export type ProcessState = "alive" | "gone" | "unknown";

/**
 * The state of process `pid` on this machine: `gone` when no process has
 * that id or it is a zombie (it exited and only waits to be reaped, as the
 * executors of a killed node do under an init that does not reap), `alive`
 * otherwise, `unknown` without `/proc`. A reused id reads as alive: a
 * caller that removes on `gone` only ever keeps too much.
 *
 * @example
 * ```ts
 * import { processState } from "./process_alive.ts";
 * console.log(processState(Deno.pid)); // "alive" on Linux
 * ```
 */
export function processState(pid: number): ProcessState {
  if (Deno.build.os !== "linux") return "unknown";
  let stat: string;
  try {
    stat = Deno.readTextFileSync(`/proc/${pid}/stat`);
  } catch (error) {
    if (error instanceof Deno.errors.NotFound) return "gone";
    return "unknown";
  }
  // `pid (comm) S ...`: comm may hold spaces and parentheses, the state
  // follows the last ')'.
  const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
  return state === "Z" || state === "X" ? "gone" : "alive";
}
