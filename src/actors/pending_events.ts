/**
 * The events sent to one executor and not answered yet, in the order they
 * were sent, looked up by their sequence number.
 *
 * Not a `Map`: a `Map` that gains and loses an entry per event rehashes into
 * a new table every few dozen events, and V8 links each old table to the
 * next (for iterators made before the rehash). Once one of those tables has
 * been promoted to the old generation, which a full GC does with whatever
 * is live, the young-generation GC keeps every later table alive through
 * that link, and with them every event they held: its request, its promise,
 * and the client handler's state behind it. Measured on the counter
 * benchmark: about 29 % of everything the main thread allocated survived
 * each young-generation GC and was promoted (4.5 MB per GC, 10 ms pauses),
 * against 10 % with this queue. An array whose slots are cleared holds
 * nothing once an event is answered.
 *
 * @module
 */

import { AssertionError } from "../assert.ts";

/** Holes past this many, and more than the live entries, are compacted away. */
const COMPACT_AFTER_HOLES = 32;

/**
 * Entries ordered by a sequence number that grows with each one added.
 *
 * @example
 * ```ts
 * import { PendingEvents } from "./pending_events.ts";
 * const pending = new PendingEvents<{ seq: number }>();
 * pending.add({ seq: 1 });
 * pending.add({ seq: 2 });
 * pending.delete(1);
 * pending.first(); // { seq: 2 }
 * ```
 */
export class PendingEvents<T extends { readonly seq: number }> {
  /** Entries in the order added; `undefined` where one was deleted. */
  #items: (T | undefined)[] = [];
  /** The seq of each slot of #items, deleted ones too, for the binary search. */
  #seqs: number[] = [];
  /** The first slot that may be live: every slot before it is a hole. */
  #head = 0;
  #size = 0;

  /** Number of entries. */
  get size(): number {
    return this.#size;
  }

  /** Adds `item`; its seq must be larger than that of every entry added before. */
  add(item: T): void {
    const last = this.#seqs.length - 1;
    if (last >= 0 && this.#seqs[last] >= item.seq) {
      throw new AssertionError(
        `seqs are added in increasing order: ${item.seq} after ${this.#seqs[last]}`,
      );
    }
    this.#items.push(item);
    this.#seqs.push(item.seq);
    this.#size++;
  }

  /** The entry with `seq`, or `undefined`. */
  get(seq: number): T | undefined {
    const slot = this.#slot(seq);
    return slot < 0 ? undefined : this.#items[slot];
  }

  /** Whether an entry has `seq`. */
  has(seq: number): boolean {
    return this.#slot(seq) >= 0;
  }

  /** The oldest entry, or `undefined` when there is none. */
  first(): T | undefined {
    return this.#items[this.#head];
  }

  /** Removes the entry with `seq` and returns it (`undefined` when there is none). */
  delete(seq: number): T | undefined {
    const slot = this.#slot(seq);
    if (slot < 0) return undefined;
    const item = this.#items[slot];
    this.#items[slot] = undefined;
    this.#size--;
    if (this.#size === 0) {
      this.clear();
      return item;
    }
    while (this.#items[this.#head] === undefined) this.#head++;
    while (this.#items[this.#items.length - 1] === undefined) {
      this.#items.pop();
      this.#seqs.pop();
    }
    const holes = this.#items.length - this.#size;
    if (holes > COMPACT_AFTER_HOLES && holes > this.#size) this.#compact();
    return item;
  }

  /** Removes every entry. */
  clear(): void {
    this.#items.length = 0;
    this.#seqs.length = 0;
    this.#head = 0;
    this.#size = 0;
  }

  /** The entries, oldest first. Nothing may be deleted until the iteration ends. */
  *values(): IterableIterator<T> {
    for (let slot = this.#head; slot < this.#items.length; slot++) {
      const item = this.#items[slot];
      if (item !== undefined) yield item;
    }
  }

  /** The slot of `seq` in #items, or -1 (also for a deleted entry). */
  #slot(seq: number): number {
    // Answers mostly come in the order their events were sent.
    if (this.#seqs[this.#head] === seq) return this.#items[this.#head] ? this.#head : -1;
    let low = this.#head;
    let high = this.#seqs.length - 1;
    while (low <= high) {
      const middle = (low + high) >>> 1;
      const at = this.#seqs[middle];
      if (at === seq) return this.#items[middle] ? middle : -1;
      if (at < seq) low = middle + 1;
      else high = middle - 1;
    }
    return -1;
  }

  /** Moves the live entries to the front, in order, and drops the holes. */
  #compact() {
    let to = 0;
    for (let from = this.#head; from < this.#items.length; from++) {
      const item = this.#items[from];
      if (item === undefined) continue;
      this.#items[to] = item;
      this.#seqs[to] = this.#seqs[from];
      to++;
    }
    this.#items.length = to;
    this.#seqs.length = to;
    this.#head = 0;
  }
}
