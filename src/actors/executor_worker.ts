/**
 * The execution worker: instantiates actor components and runs their events.
 * The main thread may terminate it at any moment (an actor that loops past
 * its wall-clock limit); it holds nothing that outlives it, because SQLite
 * connections live in its storage worker.
 *
 * @module
 */

import { createLogger, type Logger, type LogLevel } from "../log.ts";
import { type ActorKey, actorKeyString } from "./key.ts";
import {
  actorDatabasePath,
  type ActorRequest,
  type ActorResponse,
  type ExecutorInit,
  type FromExecutor,
  PROGRESS_RUNNING,
  PROGRESS_STARTED,
  type ToExecutor,
  type WorkerClass,
} from "./protocol.ts";
import { SyncChannelClient } from "../sqlite/sync_channel.ts";
import {
  INIT_VERSION_KEY,
  type OpenAnswer,
  type StorageAnswer,
  type StorageRequest,
} from "../sqlite/storage_protocol.ts";
import type { ExecResult, SqlError, SqlValue } from "../sqlite/actor_database.ts";
import type { Plain } from "../sqlite/codec.ts";
import { workerScope } from "../worker_scope.ts";

interface ActorExports {
  onInit(): Promise<void>;
  onRequest(request: ActorRequest): Promise<ActorResponse>;
}

interface GlueModule {
  instantiate(
    getCoreModule: (name: string) => WebAssembly.Module,
    imports: Record<string, Record<string, unknown>>,
  ): Promise<ActorExports>;
}

interface LoadedClass {
  spec: WorkerClass;
  glue: GlueModule;
  modules: Map<string, WebAssembly.Module>;
}

interface ResidentActor {
  key: ActorKey;
  db: string;
  exports: ActorExports;
}

/** Raised by a host import to return `err(payload)` to the guest (jco's convention). */
class GuestError {
  constructor(readonly payload: unknown) {}
}

/** Raised when an event must fail with a status the actor did not choose. */
class EventFailure extends Error {
  constructor(readonly status: number, message: string) {
    super(message);
  }
}

const post = (message: FromExecutor) => workerScope.postMessage(message);

let storage: SyncChannelClient;
let progress: Int32Array;
let dataDir: string;
let log: Logger;
const classes = new Map<string, LoadedClass>();
const resident = new Map<string, ResidentActor>();

function storageCall(request: StorageRequest): unknown {
  const answer = storage.call(request as unknown as Plain) as unknown as StorageAnswer;
  if ("error" in answer) throw new GuestError(answer.error);
  return answer.ok;
}

function unavailable(feature: string, issue: string): SqlError {
  return {
    code: "WASMKEEP_UNSUPPORTED",
    message: `${feature} is not available in this version of WasmKeep yet (${issue})`,
  };
}

function hostImports(key: ActorKey, db: string, spec: WorkerClass) {
  const actorLog = log.with({ actor: actorKeyString(key) });
  return {
    "wasmkeep:actor/storage": {
      exec: (sql: string, params: SqlValue[]) =>
        storageCall({ op: "exec", db, sql, params }) as ExecResult,
      execDurable: () => {
        throw new GuestError(
          unavailable("storage.exec-durable", "it needs replication to a bucket"),
        );
      },
      inTransaction: () => storageCall({ op: "in-transaction", db }) as boolean,
      deleteSelf: () => {
        throw new GuestError(
          unavailable("storage.delete-self", "it needs replication to a bucket"),
        );
      },
    },
    "wasmkeep:actor/actors": {
      self: () => ({ tenant: key.tenant, class: key.class, name: key.name }),
      call: () => {
        throw new GuestError(unavailable("actors.call", "calls between actors").message);
      },
    },
    "wasmkeep:actor/alarms": {
      set: () => {
        throw new GuestError(unavailable("alarms.set", "alarms").message);
      },
      // No alarm can have been set, so "none" is the true answer.
      get: () => undefined,
      delete: () => {
        throw new GuestError(unavailable("alarms.delete", "alarms").message);
      },
    },
    "wasmkeep:actor/websockets": {
      send: () => {
        throw new GuestError(unavailable("websockets.send", "WebSockets").message);
      },
      close: () => {
        throw new GuestError(unavailable("websockets.close", "WebSockets").message);
      },
      // No socket can be open, so the empty list is the true answer.
      connections: () => [],
    },
    "wasmkeep:actor/config": {
      get: (name: string) => Object.hasOwn(spec.config, name) ? spec.config[name] : undefined,
    },
    "wasmkeep:actor/log": {
      log: (level: LogLevel, message: string) => actorLog[level](message.slice(0, 4096)),
    },
  };
}

async function loadClass(spec: WorkerClass): Promise<LoadedClass> {
  const url = URL.createObjectURL(new Blob([spec.glue], { type: "text/javascript" }));
  try {
    const glue = await import(url) as GlueModule;
    const modules = new Map<string, WebAssembly.Module>();
    for (const [name, bytes] of Object.entries(spec.coreModules)) {
      modules.set(name, new WebAssembly.Module(bytes as Uint8Array<ArrayBuffer>));
    }
    return { spec, glue, modules };
  } finally {
    URL.revokeObjectURL(url);
  }
}

async function wake(key: ActorKey): Promise<ResidentActor> {
  const loaded = classes.get(key.class);
  if (!loaded) throw new EventFailure(500, `no class ${key.class} on this worker`);
  const db = actorDatabasePath(dataDir, key);
  const { initVersion } = storageCall({ op: "open", db }) as OpenAnswer;
  const exports = await loaded.glue.instantiate(
    (name) => loaded.modules.get(name)!,
    hostImports(key, db, loaded.spec),
  );
  const actor = { key, db, exports };
  if (initVersion !== loaded.spec.hash) {
    try {
      await exports.onInit();
    } catch (error) {
      const payload = (error as { payload?: unknown }).payload;
      if (typeof payload === "string") {
        storageCall({ op: "rollback", db });
        throw new EventFailure(500, `the actor's on-init failed: ${payload}`);
      }
      throw error;
    }
    if (storageCall({ op: "in-transaction", db })) {
      storageCall({ op: "rollback", db });
      throw new EventFailure(
        500,
        "the actor's on-init ended with a transaction open; it was rolled back",
      );
    }
    storageCall({ op: "set-meta", db, key: INIT_VERSION_KEY, value: loaded.spec.hash });
  }
  return actor;
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
  )
    .join("");
}

function discard(id: string, db?: string) {
  resident.delete(id);
  if (db) storageCall({ op: "rollback", db });
}

async function runEvent(seq: number, key: ActorKey, request: ActorRequest) {
  const id = actorKeyString(key);
  Atomics.store(progress, PROGRESS_STARTED, seq);
  Atomics.store(progress, PROGRESS_RUNNING, seq);
  let actor = resident.get(id);
  try {
    if (!actor) {
      actor = await wake(key);
      resident.set(id, actor);
      Atomics.store(progress, PROGRESS_RUNNING, seq);
    }
    const response = await actor.exports.onRequest(request);
    Atomics.store(progress, PROGRESS_RUNNING, seq);
    if (storageCall({ op: "in-transaction", db: actor.db })) {
      discard(id, actor.db);
      throw new EventFailure(500, "the event ended with a transaction open; it was rolled back");
    }
    post({ type: "done", seq, response });
  } catch (error) {
    if (error instanceof EventFailure) {
      discard(id, actor?.db);
      log.warn("event failed", { actor: id, reason: error.message });
      post({ type: "failed", seq, status: error.status, message: error.message });
    } else {
      // A trap or a host failure: the instance may be in any state, so it is
      // discarded and its open transaction rolled back.
      const eid = errorId();
      discard(id, actor?.db ?? actorDatabasePath(dataDir, key));
      log.error("actor failed", { actor: id, error_id: eid, error: describe(error) });
      post({ type: "failed", seq, status: 500, message: `the actor failed (error id ${eid})` });
    }
  } finally {
    Atomics.store(progress, PROGRESS_RUNNING, 0);
  }
}

async function init(message: ExecutorInit) {
  storage = new SyncChannelClient(message.channel);
  storage.recover();
  // A predecessor terminated mid-event may have left a transaction open.
  storageCall({ op: "reset" });
  progress = new Int32Array(message.progress);
  dataDir = message.dataDir;
  log = createLogger({ level: message.logLevel as LogLevel });
  for (const spec of message.classes) classes.set(spec.className, await loadClass(spec));
  post({ type: "ready" });
}

// Events arrive while earlier ones may still await (JSPI); each actor gets
// one event at a time from the main thread, so they never interleave within
// one actor.
let initialized: Promise<void> | undefined;
workerScope.onmessage = (event: MessageEvent<ToExecutor>) => {
  const message = event.data;
  if (message.type === "init") {
    initialized = init(message);
    return;
  }
  initialized!.then(() => {
    switch (message.type) {
      case "event":
        return runEvent(message.seq, message.actor, message.request);
      case "drop": {
        const id = actorKeyString(message.actor);
        resident.delete(id);
        storageCall({ op: "close", db: actorDatabasePath(dataDir, message.actor) });
        return;
      }
      case "abandon":
        discard(actorKeyString(message.actor), actorDatabasePath(dataDir, message.actor));
        post({ type: "abandoned", seq: message.seq });
        return;
      case "shutdown":
        resident.clear();
        storageCall({ op: "shutdown" });
        post({ type: "closed" });
        return;
    }
  });
};
