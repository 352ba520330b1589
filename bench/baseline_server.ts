/**
 * The baseline of the counter benchmark: what WasmKeep's counter does, with
 * no Wasm, no workers and no message passing. A plain `Deno.serve` with
 * `node:sqlite` on its one thread: one SQLite file per actor name, opened
 * with the settings of `src/sqlite/actor_database.ts` (exclusive locking,
 * WAL, synchronous NORMAL), at most `--max-open` open at once (least
 * recently used closed first).
 *
 * - `POST /actor/counter/<name>` increments and answers the count as text
 * - `GET /actor/counter/<name>` answers the count
 * - `GET /ready` answers `ready`; `GET /open` the number of open databases
 *
 * Usage: `deno run -A bench/baseline_server.ts --data-dir DIR [--listen 127.0.0.1:0] [--max-open N]`
 *
 * Prints `baseline ready url=http://HOST:PORT` on stderr once listening.
 *
 * @module
 */

import { DatabaseSync, type StatementSync } from "node:sqlite";
import { maxOpenDatabases, openFileLimit } from "../src/limits.ts";

interface Counter {
  db: DatabaseSync;
  increment: StatementSync;
  read: StatementSync;
}

/** Open counter databases, least recently used first, bounded. */
export class CounterStore {
  readonly #open = new Map<string, Counter>();

  constructor(readonly dir: string, readonly maxOpen: number) {
    Deno.mkdirSync(dir, { recursive: true });
  }

  get openCount(): number {
    return this.#open.size;
  }

  #counter(name: string): Counter {
    let counter = this.#open.get(name);
    if (counter) {
      this.#open.delete(name);
      this.#open.set(name, counter);
      return counter;
    }
    if (this.#open.size >= this.maxOpen) {
      const [victimName, victim] = this.#open.entries().next().value!;
      victim.db.close();
      this.#open.delete(victimName);
    }
    const db = new DatabaseSync(`${this.dir}/${encodeURIComponent(name)}.db`);
    db.exec("PRAGMA locking_mode = EXCLUSIVE");
    db.exec("PRAGMA journal_mode = WAL");
    db.exec("PRAGMA synchronous = NORMAL");
    db.exec(
      "CREATE TABLE IF NOT EXISTS counter (id INTEGER PRIMARY KEY CHECK (id = 1), n INTEGER NOT NULL)",
    );
    counter = {
      db,
      increment: db.prepare(
        "INSERT INTO counter VALUES (1, 1) ON CONFLICT(id) DO UPDATE SET n = n + 1 RETURNING n",
      ),
      read: db.prepare("SELECT n FROM counter WHERE id = 1"),
    };
    this.#open.set(name, counter);
    return counter;
  }

  increment(name: string): number {
    return Number(this.#counter(name).increment.get()!.n);
  }

  read(name: string): number {
    return Number(this.#counter(name).read.get()?.n ?? 0);
  }

  close(): void {
    for (const counter of this.#open.values()) counter.db.close();
    this.#open.clear();
  }
}

const PREFIX = "/actor/counter/";
const TEXT = { "content-type": "text/plain; charset=utf-8" };

/** The request handler over a store. */
export function handler(store: CounterStore): (request: Request) => Response {
  return (request) => {
    const url = new URL(request.url);
    if (url.pathname === "/ready") return new Response("ready\n", { headers: TEXT });
    if (url.pathname === "/open") return new Response(String(store.openCount), { headers: TEXT });
    if (!url.pathname.startsWith(PREFIX)) return new Response("not found\n", { status: 404 });
    const name = decodeURIComponent(url.pathname.slice(PREFIX.length));
    if (name === "" || name.includes("/")) return new Response("bad name\n", { status: 400 });
    if (request.method === "POST") {
      return new Response(String(store.increment(name)), { headers: TEXT });
    }
    if (request.method === "GET") return new Response(String(store.read(name)), { headers: TEXT });
    return new Response("method not allowed\n", { status: 405, headers: { allow: "GET, POST" } });
  };
}

if (import.meta.main) {
  const flags: Record<string, string> = { listen: "127.0.0.1:0" };
  for (let i = 0; i < Deno.args.length; i += 2) {
    const flag = Deno.args[i];
    if (!["--data-dir", "--listen", "--max-open"].includes(flag) || i + 1 >= Deno.args.length) {
      console.error("usage: baseline_server.ts --data-dir DIR [--listen HOST:PORT] [--max-open N]");
      Deno.exit(2);
    }
    flags[flag.slice(2)] = Deno.args[i + 1];
  }
  if (!flags["data-dir"]) {
    console.error("usage: baseline_server.ts --data-dir DIR [--listen HOST:PORT] [--max-open N]");
    Deno.exit(2);
  }
  const maxOpen = flags["max-open"] ? Number(flags["max-open"]) : maxOpenDatabases(openFileLimit());
  const store = new CounterStore(flags["data-dir"], maxOpen);
  const colon = flags.listen.lastIndexOf(":");
  const server = Deno.serve({
    hostname: flags.listen.slice(0, colon),
    port: Number(flags.listen.slice(colon + 1)),
    onListen: ({ hostname, port }) =>
      console.error(`baseline ready url=http://${hostname}:${port} max_open=${maxOpen}`),
  }, handler(store));
  Deno.addSignalListener("SIGTERM", async () => {
    await server.shutdown();
    store.close();
    Deno.exit(0);
  });
}
