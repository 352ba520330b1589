/**
 * How an executor process lives and dies with its node.
 *
 * - **It outlives the node's stop.** A SIGTERM or SIGINT sent to the whole
 *   process group (systemd's `KillMode=control-group`, Ctrl-C in a terminal)
 *   reaches the executors at the same moment as the node. Had they died of
 *   it, the uploads under way would be cut while the node's clean stop went
 *   on to release the actors without them: answered writes lost. So an
 *   executor ignores both; its node ends it, with a `shutdown` message once
 *   its actors' last uploads landed, or with SIGKILL.
 * - **It never outlives the node.** A node that dies without a stop (SIGKILL,
 *   a crash, a second Ctrl-C) cannot end its executors, and one that runs a
 *   looping actor never reads its socket's end, nor runs a timer. On Linux
 *   the kernel kills it: the executor asks for SIGKILL at its parent's death
 *   (`prctl(PR_SET_PDEATHSIG)`, through libc), which no loop can hold off.
 *   The kernel sends it when the thread that spawned the executor ends: the
 *   node spawns executors from its main thread (JavaScript's), which ends
 *   only with the process. Elsewhere a Worker thread, which a loop does not
 *   hold either, checks every {@linkcode PARENT_CHECK_MS} that the node is
 *   still this process's parent, and kills the process otherwise (an orphan
 *   is given to init or a subreaper, so its parent id changes). The Worker
 *   costs an isolate, about 18 MB of an executor's memory (docs/performance.md
 *   "Idle memory"); the kernel's signal costs nothing.
 *
 * @module
 */

/**
 * How often an executor checks that its node is alive: an orphaned executor
 * is gone within this much of its node's death.
 *
 * @example
 * ```ts
 * import { PARENT_CHECK_MS } from "./lifeline.ts";
 * console.log(PARENT_CHECK_MS); // 250
 * ```
 */
export const PARENT_CHECK_MS = 250;

/** The signals a group stop sends, which an executor leaves to its node. */
const GROUP_STOP_SIGNALS: Deno.Signal[] = ["SIGINT", "SIGTERM"];

/**
 * Ties this process to its node `nodePid`: group stops are ignored, and the
 * process is killed once `nodePid` is no longer its parent (at once if it
 * already is not). Unix only; elsewhere it does nothing.
 *
 * @example
 * ```ts
 * import { bindToNode } from "./lifeline.ts";
 * bindToNode(Number(Deno.args[1]));
 * ```
 */
export function bindToNode(nodePid: number): void {
  if (Deno.build.os === "windows") return;
  for (const signal of GROUP_STOP_SIGNALS) Deno.addSignalListener(signal, () => {});
  if (Deno.build.os === "linux" && killedWithParent()) {
    // Asked after the process started: a node that died before is seen here.
    if (Deno.ppid !== nodePid) Deno.kill(Deno.pid, "SIGKILL");
    return;
  }
  // Inline, so a compiled binary needs no module file for it. The Worker
  // keeps the process alive: the executor exits explicitly when it is done.
  const watch = `
    const check = () => {
      if (Deno.ppid !== ${nodePid}) Deno.kill(Deno.pid, "SIGKILL");
    };
    check();
    setInterval(check, ${PARENT_CHECK_MS});
  `;
  new Worker(`data:application/javascript,${encodeURIComponent(watch)}`, { type: "module" });
}

/** `PR_SET_PDEATHSIG` of prctl(2), and the signal asked for. */
const PR_SET_PDEATHSIG = 1;
const SIGKILL = 9n;

/**
 * Asks Linux to SIGKILL this process when its parent dies; false when libc
 * cannot be opened (a static or musl build), and the Worker watches instead.
 */
function killedWithParent(): boolean {
  let libc;
  try {
    libc = Deno.dlopen("libc.so.6", {
      prctl: { parameters: ["i32", "u64", "u64", "u64", "u64"], result: "i32" },
    });
  } catch {
    return false;
  }
  try {
    return libc.symbols.prctl(PR_SET_PDEATHSIG, SIGKILL, 0n, 0n, 0n) === 0;
  } finally {
    // The setting stays with the process; the library is not needed again.
    libc.close();
  }
}

/**
 * The node's process id from an executor's argument, or its parent's when
 * the argument is absent (a test's own command line).
 *
 * @example
 * ```ts
 * import { executorNodePid } from "./lifeline.ts";
 * console.log(executorNodePid("1234")); // 1234
 * ```
 */
export function executorNodePid(argument: string | undefined): number {
  if (argument === undefined) return Deno.ppid;
  const pid = Number(argument);
  if (!Number.isSafeInteger(pid) || pid <= 1) {
    throw new TypeError(
      `an executor's node process id must be an integer above 1, not '${argument}'`,
    );
  }
  return pid;
}
