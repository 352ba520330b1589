/**
 * The open actor databases of one executor, least recently used closed first,
 * so open files stay within the process's limit.
 *
 * @module
 */

import { ActorDatabase } from "./actor_database.ts";

/**
 * A bounded set of open databases, by path.
 *
 * @example
 * ```ts ignore
 * const pool = new DatabasePool(100);
 * pool.get("/data/actors/default/counter/alice.db").exec("SELECT 1", []);
 * pool.closeAll();
 * ```
 */
export class DatabasePool {
  readonly #open = new Map<string, ActorDatabase>();
  readonly #madeDirs = new Set<string>();

  /** @param maxOpen databases kept open at once */
  constructor(readonly maxOpen: number) {}

  /** The open database at `path`, opening (and creating) it if needed. */
  get(path: string): ActorDatabase {
    let db = this.#open.get(path);
    if (db) {
      this.#open.delete(path);
      this.#open.set(path, db);
      return db;
    }
    if (this.#open.size >= this.maxOpen) this.#closeOne();
    const dir = path.slice(0, path.lastIndexOf("/"));
    if (!this.#madeDirs.has(dir)) {
      Deno.mkdirSync(dir, { recursive: true });
      this.#madeDirs.add(dir);
    }
    db = new ActorDatabase(path);
    this.#open.set(path, db);
    return db;
  }

  /** The database at `path` if it is open. */
  peek(path: string): ActorDatabase | undefined {
    return this.#open.get(path);
  }

  #closeOne() {
    for (const [path, db] of this.#open) {
      // A database inside a transaction belongs to an event under way.
      if (db.inTransaction) continue;
      db.close();
      this.#open.delete(path);
      return;
    }
  }

  /** Closes the database at `path`, rolling back an open transaction. */
  close(path: string): void {
    this.#open.get(path)?.close();
    this.#open.delete(path);
  }

  /** Closes every database. */
  closeAll(): void {
    for (const db of this.#open.values()) db.close();
    this.#open.clear();
  }
}
