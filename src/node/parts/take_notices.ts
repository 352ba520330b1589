/**
 * The actor host tells every take to the actor's sockets, which are built
 * after the host (they send their events to it). This is the one late-bound
 * link of the assembly: the host is given the notices, the sockets listen.
 *
 * @module
 */

import { assert } from "../../assert.ts";
import type { Hold } from "../../cluster/ownership.ts";

/**
 * The takes of the node's actor host, told to one listener bound once.
 *
 * @example
 * ```ts
 * import { TakeNotices } from "./take_notices.ts";
 * const takes = new TakeNotices();
 * takes.listen((hold) => console.log(hold.generation));
 * ```
 */
export class TakeNotices {
  #listener: ((hold: Hold) => void) | undefined;

  /** From now on `listener` hears every take; bound once, before the executors start. */
  listen(listener: (hold: Hold) => void): void {
    assert(this.#listener === undefined, "the takes already have their listener");
    this.#listener = listener;
  }

  /** Tells a take, before any event is sent under it. */
  tell(hold: Hold): void {
    assert(this.#listener !== undefined, "a take before the sockets listened");
    this.#listener(hold);
  }
}
