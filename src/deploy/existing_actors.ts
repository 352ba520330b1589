/**
 * Whether an actor exists, for classes open only to existing actors
 * (access rule `existing`): one that was ever created has an ownership
 * record, which is never collected (a deleted actor keeps it and stays
 * known to exist). An actor held here exists; one found to exist is
 * remembered, {@linkcode MAX_KNOWN_ACTORS} at most, the least recently
 * asked for forgotten first. An absence is never remembered: a call may
 * create the actor at any moment.
 *
 * @module
 */

import { type ActorKey, actorKeyString } from "../actors/key.ts";
import { MAX_KNOWN_ACTORS } from "../limits.ts";

/**
 * The existence of actors.
 *
 * @example
 * ```ts
 * import { ExistingActors } from "./existing_actors.ts";
 * const existing = new ExistingActors({ held: () => false, hasRecord: () => Promise.resolve(true) });
 * await existing.exists({ tenant: "t", class: "c", name: "n" }); // true
 * ```
 */
export class ExistingActors {
  readonly #known = new Set<string>();
  readonly #o: {
    held(key: ActorKey): boolean;
    hasRecord(key: ActorKey): Promise<boolean>;
    max?: number;
  };

  constructor(options: {
    held(key: ActorKey): boolean;
    hasRecord(key: ActorKey): Promise<boolean>;
    max?: number;
  }) {
    this.#o = options;
  }

  /** Whether `key` exists; throws what the bucket threw. */
  async exists(key: ActorKey): Promise<boolean> {
    const id = actorKeyString(key);
    if (this.#known.delete(id)) {
      this.#known.add(id);
      return true;
    }
    if (!this.#o.held(key) && !(await this.#o.hasRecord(key))) return false;
    this.#known.add(id);
    if (this.#known.size > (this.#o.max ?? MAX_KNOWN_ACTORS)) {
      this.#known.delete(this.#known.values().next().value!);
    }
    return true;
  }
}
