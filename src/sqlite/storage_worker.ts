/**
 * The storage worker: owns the SQLite connections of one execution worker's
 * actors and answers its synchronous requests. It never runs actor code, so
 * it is never terminated while holding a lock; see sync_channel.ts.
 *
 * @module
 */

import { ActorDatabase, toSqlError } from "./actor_database.ts";
import { serveSyncChannel } from "./sync_channel.ts";
import type { Plain } from "./codec.ts";
import { INIT_VERSION_KEY, type StorageAnswer, type StorageRequest } from "./storage_protocol.ts";
import { workerScope } from "../worker_scope.ts";

/** The first message the worker gets. */
export interface StorageWorkerInit {
  channel: SharedArrayBuffer;
  /** Databases kept open at once; the least recently used are closed first. */
  maxOpenDatabases: number;
}

workerScope.onmessage = (event: MessageEvent<StorageWorkerInit>) => {
  const { channel, maxOpenDatabases } = event.data;
  const open = new Map<string, ActorDatabase>();
  const madeDirs = new Set<string>();

  const database = (path: string): ActorDatabase => {
    let db = open.get(path);
    if (db) {
      open.delete(path);
      open.set(path, db);
      return db;
    }
    if (open.size >= maxOpenDatabases) {
      for (const [victimPath, victim] of open) {
        // A database inside a transaction belongs to an event under way.
        if (victim.inTransaction) continue;
        victim.close();
        open.delete(victimPath);
        break;
      }
    }
    const dir = path.slice(0, path.lastIndexOf("/"));
    if (!madeDirs.has(dir)) {
      Deno.mkdirSync(dir, { recursive: true });
      madeDirs.add(dir);
    }
    db = new ActorDatabase(path);
    open.set(path, db);
    return db;
  };

  const handle = (request: StorageRequest): StorageAnswer => {
    switch (request.op) {
      case "open": {
        const db = database(request.db);
        return { ok: { initVersion: db.getMeta(INIT_VERSION_KEY) ?? null } };
      }
      case "exec":
        return { ok: database(request.db).exec(request.sql, request.params) };
      case "in-transaction":
        return { ok: open.get(request.db)?.inTransaction ?? false };
      case "rollback":
        return { ok: open.get(request.db)?.rollback() ?? false };
      case "set-meta":
        database(request.db).setMeta(request.key, request.value);
        return { ok: null };
      case "close":
        open.get(request.db)?.close();
        open.delete(request.db);
        return { ok: null };
      case "reset":
        for (const db of open.values()) db.rollback();
        return { ok: null };
      case "shutdown":
        for (const db of open.values()) db.close();
        open.clear();
        return { ok: null };
    }
  };

  serveSyncChannel(channel, (request) => {
    const typed = request as unknown as StorageRequest;
    let answer: StorageAnswer;
    try {
      answer = handle(typed);
    } catch (error) {
      answer = { error: toSqlError(error) };
    }
    return { answer: answer as unknown as Plain, stop: typed.op === "shutdown" };
  });
  workerScope.close();
};
