/**
 * The holders a node remembers: which node held each actor it recently
 * forwarded a request for, so the next request for it goes there without
 * reading the actor's ownership record from the bucket. A memory, never a
 * truth: it is used only while the remembered node is live in this node's
 * view, and forgotten when that node answers that it does not hold the
 * actor (a "not held" answer, which only the cluster path makes and which
 * proves the request did not run there) or when a forward to it fails.
 *
 * @module
 */

import { MAX_REMEMBERED_HOLDERS } from "../../limits.ts";

/**
 * Remembered holders by actor key string, least recently used forgotten first.
 *
 * @example
 * ```ts
 * import { HolderMemory } from "./holders.ts";
 * const holders = new HolderMemory(2);
 * holders.remember("default/room/a", "node-b");
 * holders.holderOf("default/room/a"); // "node-b"
 * holders.forget("default/room/a", "node-b");
 * holders.holderOf("default/room/a"); // undefined
 * ```
 */
export class HolderMemory {
  readonly #holders = new Map<string, string>();

  constructor(readonly max: number = MAX_REMEMBERED_HOLDERS) {}

  /** The node remembered to hold `actor`, if any (it becomes the most recently used). */
  holderOf(actor: string): string | undefined {
    const node = this.#holders.get(actor);
    if (node === undefined) return undefined;
    this.#holders.delete(actor);
    this.#holders.set(actor, node);
    return node;
  }

  /** `node` holds `actor`, as its record said. */
  remember(actor: string, node: string): void {
    this.#holders.delete(actor);
    this.#holders.set(actor, node);
    if (this.#holders.size > this.max) this.#holders.delete(this.#holders.keys().next().value!);
  }

  /** `node` does not hold `actor` (it said so, or could not be reached): forgotten, if it is the one remembered. */
  forget(actor: string, node: string): void {
    if (this.#holders.get(actor) === node) this.#holders.delete(actor);
  }

  /** Actors remembered now. */
  get size(): number {
    return this.#holders.size;
  }
}
