/**
 * The open actor databases of one executor: least recently used closed first,
 * so open files stay within the process's limit, and closed once idle, since
 * an open SQLite connection costs about 129 KiB (docs/performance.md) and an
 * idle actor does not need one.
 *
 * @module
 */

import { ActorDatabase, type DatabaseMode } from "./actor_database.ts";

/**
 * A bounded set of open databases, by path.
 *
 * @example
 * ```ts
 * import { DatabasePool } from "./database_pool.ts";
 * const pool = new DatabasePool(100, () => performance.now());
 * pool.get("/data/actors/default/counter/alice.db").exec("SELECT 1", []);
 * pool.closeAll();
 * ```
 */
export class DatabasePool {
  readonly #open = new Map<string, { db: ActorDatabase; lastUsed: number }>();
  readonly #madeDirs = new Set<string>();

  /**
   * @param maxOpen databases kept open at once
   * @param now the clock idle times are measured on, in milliseconds
   * @param mode how the databases are kept (ADR 0005)
   * @param beforeClose told before the pool closes a database of its own
   *   accord (to make room, or idle), not when asked to
   */
  constructor(
    readonly maxOpen: number,
    readonly now: () => number,
    readonly mode: DatabaseMode = "replicated",
    readonly beforeClose: (path: string, db: ActorDatabase) => void = () => {},
  ) {}

  /** The open database at `path`, opening (and creating) it if needed. */
  get(path: string): ActorDatabase {
    const entry = this.#open.get(path);
    if (entry) {
      this.#open.delete(path);
      entry.lastUsed = this.now();
      this.#open.set(path, entry);
      return entry.db;
    }
    if (this.#open.size >= this.maxOpen) this.#closeOne();
    const dir = path.slice(0, path.lastIndexOf("/"));
    if (!this.#madeDirs.has(dir)) {
      Deno.mkdirSync(dir, { recursive: true });
      this.#madeDirs.add(dir);
    }
    const db = new ActorDatabase(path, { mode: this.mode });
    this.#open.set(path, { db, lastUsed: this.now() });
    return db;
  }

  /** The paths of the open databases, least recently used first. */
  openPaths(): string[] {
    return [...this.#open.keys()];
  }

  /** The database at `path` if it is open. */
  peek(path: string): ActorDatabase | undefined {
    return this.#open.get(path)?.db;
  }

  #closeOne() {
    for (const [path, { db }] of this.#open) {
      // A database inside a transaction belongs to an event under way.
      if (db.inTransaction) continue;
      this.beforeClose(path, db);
      db.close();
      this.#open.delete(path);
      return;
    }
  }

  /** Closes the databases not used for `idleMs`; returns how many. */
  closeIdle(idleMs: number): number {
    const cutoff = this.now() - idleMs;
    let closed = 0;
    // Least recently used first: stop at the first one used since the cutoff.
    for (const [path, { db, lastUsed }] of this.#open) {
      if (lastUsed > cutoff) break;
      if (db.inTransaction) continue;
      this.beforeClose(path, db);
      db.close();
      this.#open.delete(path);
      closed++;
    }
    return closed;
  }

  /** Closes the database at `path`, rolling back an open transaction. */
  close(path: string): void {
    this.#open.get(path)?.db.close();
    this.#open.delete(path);
  }

  /**
   * Closes the database at `path` and deletes its files: the next
   * {@linkcode get} creates it empty.
   */
  wipe(path: string): void {
    this.close(path);
    for (const file of [path, `${path}-wal`, `${path}.pos`]) {
      try {
        Deno.removeSync(file);
      } catch (error) {
        if (!(error instanceof Deno.errors.NotFound)) throw error;
      }
    }
  }

  /** Closes every database. */
  closeAll(): void {
    for (const { db } of this.#open.values()) db.close();
    this.#open.clear();
  }
}
