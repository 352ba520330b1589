/**
 * The global scope of a Deno worker, typed without `/// <reference
 * lib="deno.worker" />` (which JSR refuses in a published module because it
 * changes the globals of every user).
 *
 * @module
 */

/** What a worker module uses of its global scope. */
export interface WorkerScope {
  onmessage: ((event: MessageEvent) => void) | null;
  postMessage(message: unknown): void;
  close(): void;
}

/**
 * The worker's global scope; only meaningful inside a worker.
 *
 * @example
 * ```ts ignore
 * import { workerScope } from "./worker_scope.ts";
 * workerScope.postMessage({ type: "ready" });
 * ```
 */
export const workerScope: WorkerScope = globalThis as unknown as WorkerScope;
