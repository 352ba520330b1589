/**
 * Why a node is not ready, as its ports answer it.
 *
 * @module
 */

import type { ClusterPlane } from "../../cluster/cluster_plane.ts";

/**
 * Why a node is not ready: set by its lifecycle as it goes (starting,
 * checking the bucket, joining, stopping), and a cluster node is not ready
 * while its lease is not valid.
 *
 * @example
 * ```ts
 * import { Readiness } from "./readiness.ts";
 * const readiness = new Readiness(undefined);
 * readiness.set(undefined);
 * console.log(readiness.reason()); // undefined: ready
 * ```
 */
export class Readiness {
  #reason: string | undefined = "starting";
  #stopping = false;

  /**
   * `blocked`: why the node's other parts keep it from being ready (its
   * app's version cannot be applied), checked after the lifecycle's reason.
   */
  constructor(
    readonly plane: ClusterPlane | undefined,
    readonly blocked: () => { reason: string; servesRequests: boolean } | undefined = () =>
      undefined,
  ) {}

  /** The reason the lifecycle gives now, `undefined` once it is done starting. */
  set(reason: string | undefined): void {
    this.#reason = reason;
  }

  /** From now on the node is stopping. */
  stopping(): void {
    this.#stopping = true;
  }

  /** Whether the start is over (the node served or serves). */
  get started(): boolean {
    return this.#reason === undefined;
  }

  /**
   * Why `/_wasmkeep/ready` says not ready, or `undefined`: {@linkcode reason},
   * or what keeps the node from being ready while it still serves (a
   * version of its app it cannot apply, beside the one it keeps).
   */
  readyReport(): string | undefined {
    return this.reason() ?? this.blocked()?.reason;
  }

  /** Why the node is not ready, or `undefined`. */
  reason(): string | undefined {
    if (this.#stopping) return "stopping";
    if (this.#reason) return this.#reason;
    const blocked = this.blocked();
    if (blocked && !blocked.servesRequests) return blocked.reason;
    if (this.plane && !this.plane.valid()) {
      return "the node lease is not valid (its heartbeat did not land)";
    }
    return undefined;
  }
}
