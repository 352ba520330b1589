/**
 * An executor process: instantiates actor components and runs their events,
 * with the actors' SQLite databases. The node kills it (SIGKILL) when an
 * event runs past its wall-clock limit, which ends the loop, the instances
 * and the database connections with their locks at once; a terminated Deno
 * Worker would keep spinning and keep its connections (docs/adr/0001).
 *
 * It connects to the Unix socket the node names in its arguments and
 * exchanges framed messages (frames.ts) on it; its log goes to stderr, which
 * it shares with the node.
 *
 * @module
 */

import { createLogger, type Logger, type LogLevel } from "../log.ts";
import { type ActorKey, actorKeyString } from "./key.ts";
import {
  actorDatabasePath,
  type ActorRequest,
  type ExecutorClass,
  type ExecutorInit,
  type FromExecutor,
  type ToExecutor,
} from "./protocol.ts";
import { FrameSender, readFrames } from "./frames.ts";
import { DatabasePool } from "../sqlite/database_pool.ts";
import { type ActorDatabase, type SqlError, toSqlError } from "../sqlite/actor_database.ts";
import type { Plain } from "./codec.ts";
import {
  type ActorExportCalls,
  type ActorImports,
  GuestError,
  instantiateDirect,
} from "./abi/direct.ts";

/** How often idle databases are looked for. */
const DATABASE_SWEEP_MS = 1000;

/** The meta key holding the code version whose on-init ran. */
const INIT_VERSION_KEY = "init_version";

interface GlueModule {
  instantiate(
    getCoreModule: (name: string) => WebAssembly.Module,
    imports: Record<string, Record<string, unknown>>,
  ): Promise<ActorExportCalls>;
}

interface LoadedClass {
  spec: ExecutorClass;
  /** jco's glue, for a class without the direct bindings. */
  glue?: GlueModule;
  modules: Map<string, WebAssembly.Module>;
}

interface ResidentActor {
  key: ActorKey;
  path: string;
  exports: ActorExportCalls;
}

/** Raised when an event must fail with a status the actor did not choose. */
class EventFailure extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

function unavailable(feature: string, needs: string): SqlError {
  return {
    code: "WASMKEEP_UNSUPPORTED",
    message: `${feature} is not available in this version of WasmKeep yet (${needs})`,
  };
}

function describe(error: unknown): string {
  if (error instanceof GuestError) {
    return `host error not returned to the actor: ${JSON.stringify(error.payload)}`;
  }
  if (error instanceof Error) return error.stack ?? error.message;
  return String(error);
}

function errorId(): string {
  return Array.from(
    crypto.getRandomValues(new Uint8Array(6)),
    (b) => b.toString(16).padStart(2, "0"),
  ).join("");
}

async function loadClass(spec: ExecutorClass): Promise<LoadedClass> {
  const modules = new Map<string, WebAssembly.Module>();
  for (const [name, bytes] of Object.entries(spec.coreModules)) {
    if (spec.directModule && name !== spec.directModule) continue;
    modules.set(name, new WebAssembly.Module(bytes as Uint8Array<ArrayBuffer>));
  }
  if (spec.directModule) return { spec, modules };
  // The glue is generated at run time, so it is imported from memory: a
  // compiled binary has no source tree to import it from.
  const url = URL.createObjectURL(new Blob([spec.glue], { type: "text/javascript" }));
  try {
    return { spec, glue: await import(url) as GlueModule, modules };
  } finally {
    URL.revokeObjectURL(url);
  }
}

/** The same imports in the nested, camel-cased shape jco's glue asks for. */
function jcoImports(host: ActorImports): Record<string, Record<string, unknown>> {
  return {
    "wasmkeep:actor/storage": {
      exec: host.exec,
      execDurable: host.execDurable,
      inTransaction: host.inTransaction,
      deleteSelf: host.deleteSelf,
    },
    "wasmkeep:actor/actors": { self: host.self, call: host.call },
    "wasmkeep:actor/alarms": { set: host.alarmSet, get: host.alarmGet, delete: host.alarmDelete },
    "wasmkeep:actor/websockets": {
      send: host.wsSend,
      close: host.wsClose,
      connections: host.wsConnections,
    },
    "wasmkeep:actor/config": { get: host.configGet },
    "wasmkeep:actor/log": { log: host.log },
  };
}

/** One executor's state and event loop. */
class Executor {
  readonly #classes = new Map<string, LoadedClass>();
  readonly #resident = new Map<string, ResidentActor>();
  readonly #databases: DatabasePool;
  readonly #sender: FrameSender;
  readonly #log: Logger;

  constructor(readonly init: ExecutorInit, classes: LoadedClass[], sender: FrameSender) {
    this.#sender = sender;
    for (const loaded of classes) this.#classes.set(loaded.spec.className, loaded);
    this.#databases = new DatabasePool(init.maxOpenDatabases, () => performance.now());
    // The executor runs no cluster code and has no clock to share: its own
    // timer is fine here. Unref'd, so it never keeps the process alive.
    const sweep = setInterval(
      () => this.#databases.closeIdle(init.databaseIdleMs),
      Math.min(init.databaseIdleMs, DATABASE_SWEEP_MS),
    );
    Deno.unrefTimer(sweep);
    this.#log = createLogger({ level: init.logLevel as LogLevel });
  }

  post(message: FromExecutor) {
    this.#sender.send(message as unknown as Plain);
  }

  #db(path: string): ActorDatabase {
    try {
      return this.#databases.get(path);
    } catch (error) {
      throw new GuestError(toSqlError(error));
    }
  }

  #imports(key: ActorKey, path: string, spec: ExecutorClass): ActorImports {
    const log = this.#log.with({ actor: actorKeyString(key) });
    const fail = (error: SqlError | string): never => {
      throw new GuestError(error);
    };
    return {
      exec: (sql, params) => {
        try {
          return this.#db(path).exec(sql, params);
        } catch (error) {
          if (error instanceof GuestError) throw error;
          throw new GuestError(toSqlError(error));
        }
      },
      execDurable: () =>
        fail(unavailable("storage.exec-durable", "it needs replication to a bucket")),
      inTransaction: () => this.#databases.peek(path)?.inTransaction ?? false,
      deleteSelf: () =>
        fail(unavailable("storage.delete-self", "it needs replication to a bucket")),
      self: () => ({ tenant: key.tenant, class: key.class, name: key.name }),
      call: () => fail(unavailable("actors.call", "calls between actors").message),
      alarmSet: () => fail(unavailable("alarms.set", "alarms").message),
      // No alarm can have been set, so "none" is the true answer.
      alarmGet: () => undefined,
      alarmDelete: () => fail(unavailable("alarms.delete", "alarms").message),
      wsSend: () => fail(unavailable("websockets.send", "WebSockets").message),
      wsClose: () => fail(unavailable("websockets.close", "WebSockets").message),
      // No socket can be open, so the empty list is the true answer.
      wsConnections: () => [],
      configGet: (name) => Object.hasOwn(spec.config, name) ? spec.config[name] : undefined,
      log: (level: LogLevel, message) => log[level](message.slice(0, 4096)),
    };
  }

  async #instantiate(loaded: LoadedClass, imports: ActorImports): Promise<ActorExportCalls> {
    const direct = loaded.spec.directModule;
    if (direct) return instantiateDirect(loaded.modules.get(direct)!, imports);
    return await loaded.glue!.instantiate((name) => loaded.modules.get(name)!, jcoImports(imports));
  }

  async #wake(key: ActorKey): Promise<ResidentActor> {
    const loaded = this.#classes.get(key.class);
    if (!loaded) throw new EventFailure(500, `no class ${key.class} in this executor`);
    const path = actorDatabasePath(this.init.dataDir, key);
    const db = this.#db(path);
    const exports = await this.#instantiate(loaded, this.#imports(key, path, loaded.spec));
    if (db.getMeta(INIT_VERSION_KEY) !== loaded.spec.hash) {
      try {
        await exports.onInit();
      } catch (error) {
        const payload = (error as { payload?: unknown }).payload;
        if (typeof payload !== "string") throw error;
        throw new EventFailure(500, `the actor's on-init failed: ${payload}`);
      }
      if (this.#db(path).inTransaction) {
        throw new EventFailure(
          500,
          "the actor's on-init ended with a transaction open; it was rolled back",
        );
      }
      this.#db(path).setMeta(INIT_VERSION_KEY, loaded.spec.hash);
    }
    return { key, path, exports };
  }

  #discard(id: string, path: string) {
    this.#resident.delete(id);
    this.#databases.peek(path)?.rollback();
  }

  async runEvent(seq: number, id: string, key: ActorKey, request: ActorRequest) {
    let actor = this.#resident.get(id);
    // Kept with the resident actor: computing it costs a percent-encoding per event.
    const path = actor?.path ?? actorDatabasePath(this.init.dataDir, key);
    try {
      if (!actor) {
        actor = await this.#wake(key);
        this.#resident.set(id, actor);
      }
      const response = await actor.exports.onRequest(request);
      if (this.#databases.peek(path)?.inTransaction) {
        throw new EventFailure(500, "the event ended with a transaction open; it was rolled back");
      }
      this.post({ type: "done", seq, response });
    } catch (error) {
      this.#discard(id, path);
      if (error instanceof EventFailure) {
        this.#log.warn("event failed", { actor: id, reason: error.message });
        this.post({ type: "failed", seq, status: error.status, message: error.message });
      } else {
        // A trap or a host failure: the instance may be in any state, so it
        // is discarded and its open transaction rolled back.
        const eid = errorId();
        this.#log.error("actor failed", { actor: id, error_id: eid, error: describe(error) });
        this.post({
          type: "failed",
          seq,
          status: 500,
          message: `the actor failed (error id ${eid})`,
        });
      }
    }
  }

  handle(message: ToExecutor): Promise<void> | void {
    switch (message.type) {
      case "event":
        return this.runEvent(
          message.seq,
          actorKeyString(message.actor),
          message.actor,
          message.request,
        );
      case "drop": {
        this.#resident.delete(actorKeyString(message.actor));
        this.#databases.close(actorDatabasePath(this.init.dataDir, message.actor));
        return;
      }
      case "abandon":
        this.#discard(
          actorKeyString(message.actor),
          actorDatabasePath(this.init.dataDir, message.actor),
        );
        this.post({ type: "abandoned", seq: message.seq });
        return;
      case "shutdown":
        this.#resident.clear();
        this.#databases.closeAll();
        this.post({ type: "closed" });
        return;
    }
  }
}

/**
 * Runs an executor on the Unix socket at `socketPath` until the node closes
 * it or sends a shutdown message.
 *
 * @example
 * ```ts ignore
 * await runExecutor("/tmp/wasmkeep-x/e0.sock");
 * ```
 */
export async function runExecutor(socketPath: string): Promise<void> {
  const conn = await Deno.connect({ transport: "unix", path: socketPath });
  const sender = new FrameSender(conn);
  let executor: Executor | undefined;
  try {
    for await (const frame of readFrames(conn)) {
      const message = frame as unknown as ToExecutor;
      if (message.type === "init") {
        const classes = await Promise.all(message.classes.map(loadClass));
        executor = new Executor(message, classes, sender);
        executor.post({ type: "ready" });
        continue;
      }
      if (!executor) throw new Error("the first message to an executor must be init");
      // One event at a time, in arrival order, each to its end: the node
      // sends an actor's events without waiting for the previous answer,
      // and counts an event's wall-clock time from when it becomes the
      // oldest it has not been answered, so the oldest must be the one
      // running (a wake awaits, and must not let a later event slip in).
      // Imports that really wait (issue 4) will need the node told which
      // events are suspended instead.
      await executor.handle(message);
      if (message.type === "shutdown") break;
    }
    await sender.drain();
  } finally {
    conn.close();
  }
}

if (import.meta.main) {
  await runExecutor(Deno.args[0]);
}
