/**
 * The trace of a run: every line goes into a digest (so two runs of one seed
 * can be compared bit for bit) and the last ones into a bounded ring buffer,
 * printed when an invariant fails.
 *
 * @module
 */

/** A bounded trace with a digest of everything written to it. */
export class Trace {
  readonly #ring: string[];
  #next = 0;
  #count = 0;
  #h1 = 0x811c9dc5;
  #h2 = 0x01000193;
  /** Every line is also given to it (`--trace`). */
  echo: ((line: string) => void) | undefined;

  /** A trace keeping the last `capacity` lines. */
  constructor(readonly capacity: number) {
    this.#ring = new Array(Math.max(1, capacity));
  }

  /** Adds a line. */
  add(line: string): void {
    let a = this.#h1, b = this.#h2;
    for (let i = 0; i < line.length; i++) {
      const c = line.charCodeAt(i);
      a = Math.imul(a ^ c, 0x01000193);
      b = Math.imul(b ^ c ^ (a >>> 13), 0x5bd1e995);
    }
    this.#h1 = Math.imul(a ^ 10, 0x01000193);
    this.#h2 = b;
    this.#ring[this.#next] = line;
    this.#next = (this.#next + 1) % this.#ring.length;
    this.#count++;
    this.echo?.(line);
  }

  /** Lines written so far. */
  get count(): number {
    return this.#count;
  }

  /** The last lines, oldest first. */
  last(): string[] {
    const n = Math.min(this.#count, this.#ring.length);
    const out: string[] = [];
    for (let i = 0; i < n; i++) {
      out.push(this.#ring[(this.#next - n + i + this.#ring.length) % this.#ring.length]);
    }
    return out;
  }

  /** A digest of every line written, in order. */
  digest(): string {
    const hex = (n: number) => (n >>> 0).toString(16).padStart(8, "0");
    return `${hex(this.#h1)}${hex(this.#h2)}-${this.#count}`;
  }
}
