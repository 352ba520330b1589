/**
 * The folder of a node's executor sockets: one per node process, in the
 * machine's temp folder (a Unix socket path has about 100 bytes, which a
 * data directory's path may not leave), named after the process so that a
 * later node can tell a killed one's folder from a live node's.
 *
 * @module
 */

import { processState } from "../os/process_alive.ts";
import type { Logger } from "../log.ts";

/** `wasmkeep-<node pid>-<random>`, as {@linkcode makeSocketDir} names them. */
const SOCKET_DIR = /^wasmkeep-(\d+)-[^/]+$/;

/**
 * Makes this process's socket folder and removes those of node processes
 * that are gone (killed before their stop could remove them).
 *
 * @example
 * ```ts
 * import { makeSocketDir } from "./executor_sockets.ts";
 * import { createLogger } from "../log.ts";
 * const dir = makeSocketDir(createLogger());
 * ```
 */
export function makeSocketDir(log: Logger): string {
  const dir = Deno.makeTempDirSync({ prefix: `wasmkeep-${Deno.pid}-` });
  const parent = dir.slice(0, dir.lastIndexOf("/"));
  const removed: string[] = [];
  try {
    for (const entry of Deno.readDirSync(parent)) {
      const match = SOCKET_DIR.exec(entry.name);
      if (!match || !entry.isDirectory) continue;
      const pid = Number(match[1]);
      if (pid === Deno.pid || processState(pid) !== "gone") continue;
      try {
        Deno.removeSync(`${parent}/${entry.name}`, { recursive: true });
        removed.push(entry.name);
      } catch {
        // Another user's, or removed by another node starting now.
      }
    }
  } catch (error) {
    log.warn("could not look for executor socket folders of killed nodes", {
      folder: parent,
      error: String(error),
    });
  }
  if (removed.length > 0) {
    log.info("removed executor socket folders of killed nodes", {
      folder: parent,
      removed: removed.length,
    });
  }
  return dir;
}
