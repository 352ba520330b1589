/**
 * The host side of an actor's imports (`wasmkeep:actor/*`), over what the
 * runtime gives each resident actor: its database, its store, and the
 * runtime's waits (an import that waits suspends the event, and other
 * actors' events run meanwhile, ADR 0003).
 *
 * @module
 */

import type { ActorKey } from "../actors/key.ts";
import type { ActorRequest, CallAnswer, ExecutorClass, SocketMessage } from "../actors/protocol.ts";
import { sizeOverLimit } from "../websockets/message_size.ts";
import { type ActorAlarm, MAX_ALARM_DUE_MS } from "../alarms/actor_alarm.ts";
import type { ActorStore } from "../actors/actor_store.ts";
import { type ActorImports, GuestError } from "../actors/abi/direct.ts";
import { type ActorDatabase, type SqlError, toSqlError } from "../sqlite/actor_database.ts";
import type { Logger, LogLevel } from "../log.ts";

/** Inside a transaction, exec-durable takes only this. */
const COMMIT_STATEMENT = /^\s*(COMMIT|END)(\s+TRANSACTION)?\s*;?\s*$/i;

/** Longest log line an actor writes; the rest is cut. */
export const MAX_ACTOR_LOG_CHARS = 4096;

/** A resident actor as its imports see it. */
export interface ImportedActor {
  readonly key: ActorKey;
  readonly id: string;
  readonly path: string;
  readonly store: ActorStore;
  /** The event holding the run token for this actor (its waits are that event's). */
  readonly seq: number;
  /** Discarded: an event suspended in it must not touch its database again. */
  readonly dead: boolean;
  /** The actors waiting on the running event, outermost first (what a call carries). */
  readonly chain: string[];
  /**
   * The actor's open WebSockets as the running event's frame listed them,
   * less those it closed since: what `websockets.connections` answers.
   */
  readonly sockets: Set<number>;
  /** Its alarm: what the database stores and the running event's draft. */
  readonly alarm: ActorAlarm;
  /** Unsets the instance: the next event makes a new one (after a delete-self). */
  dropInstance(): void;
}

/** What the imports need of the runtime. */
export interface ImportRuntime {
  /** The open database at `path`, opened if needed; a failure is the guest's error. */
  db(path: string): ActorDatabase;
  /** The database at `path` if open. */
  peek(path: string): ActorDatabase | undefined;
  /** Closes and deletes the database at `path`. */
  wipe(path: string): void;
  /** Waits for `work` within the event's limit, letting other events run meanwhile. */
  suspend<T>(seq: number, work: Promise<T>): Promise<T>;
  /** Sends an actors.call to the node; resolves with its answer. */
  call(actor: ImportedActor, target: ActorKey, request: ActorRequest): Promise<CallAnswer>;
  /** Sends a message on one of the actor's sockets (the node holds them). */
  socketSend(actor: ImportedActor, connection: number, message: SocketMessage): void;
  /** Closes one of the actor's sockets. */
  socketClose(actor: ImportedActor, connection: number, code: number, reason: string): void;
  /** Largest message `websockets.send` takes (`--max-socket-message-bytes`). */
  maxSocketMessageBytes: number;
  log: Logger;
}

const utf8 = new TextEncoder();

/** Longest close reason, in UTF-8 bytes (RFC 6455: a close frame's payload is at most 125). */
const MAX_CLOSE_REASON_BYTES = 123;

/** Whether an actor may close with `code`: 1000 (normal) or one of the application's 3000-4999. */
function isApplicationCloseCode(code: number): boolean {
  return code === 1000 || (code >= 3000 && code <= 4999);
}

/**
 * The imports of `actor`, an instance of `spec`.
 *
 * @example
 * ```ts
 * import { hostImports, type ImportedActor, type ImportRuntime } from "./host_imports.ts";
 * import type { ActorProgram } from "./program.ts";
 * declare const actor: ImportedActor;
 * declare const program: ActorProgram;
 * declare const runtime: ImportRuntime;
 * const exports = await program.instantiate(hostImports(actor, program.spec, runtime));
 * ```
 */
export function hostImports(
  actor: ImportedActor,
  spec: ExecutorClass,
  runtime: ImportRuntime,
): ActorImports {
  const { key, path } = actor;
  const log = runtime.log.with({ actor: actor.id });
  const fail = (error: SqlError | string): never => {
    throw new GuestError(error);
  };
  const alive = () => {
    if (actor.dead) throw new Error("the actor was discarded while its event waited");
  };
  /** The id of one of the actor's open sockets; anything else is the actor's error. */
  const openSocket = (connection: bigint): number => {
    const id = Number(connection);
    if (!actor.sockets.has(id)) fail(`no WebSocket ${connection} is open on this actor`);
    return id;
  };
  return {
    exec: (sql, params) => {
      alive();
      try {
        return runtime.db(path).exec(sql, params);
      } catch (error) {
        if (error instanceof GuestError) throw error;
        throw new GuestError(toSqlError(error));
      }
    },
    execDurable: async (sql, params) => {
      alive();
      const db = runtime.db(path);
      if (db.inTransaction && !COMMIT_STATEMENT.test(sql)) {
        fail({
          code: "WASMKEEP_DURABLE_IN_TRANSACTION",
          message: "inside a transaction exec-durable takes only the COMMIT: " +
            "nothing is durable before it; run the other statements with exec",
        });
      }
      const { result, durable } = actor.store.execDurable(db, () => {
        try {
          return db.exec(sql, params);
        } catch (error) {
          throw new GuestError(toSqlError(error));
        }
      });
      if (durable) {
        await runtime.suspend(actor.seq, durable);
        alive();
      }
      return result;
    },
    inTransaction: () => runtime.peek(path)?.inTransaction ?? false,
    deleteSelf: () => {
      alive();
      const db = runtime.db(path);
      if (db.inTransaction) {
        fail({
          code: "WASMKEEP_DELETE_IN_TRANSACTION",
          message: "delete-self cannot run inside a transaction; commit or roll it back first",
        });
      }
      // Replicated, what committed before the delete takes its own TXID,
      // then the delete takes the next one; the marker is uploaded in that
      // order. Local, the wipe is the whole delete.
      actor.store.committed(db);
      runtime.wipe(path);
      actor.alarm.wiped();
      // A new instance over the emptied database for the next event, and
      // on-init runs again.
      actor.dropInstance();
      actor.store.deleted();
    },
    self: () => ({ tenant: key.tenant, class: key.class, name: key.name }),
    call: async (className, name, request) => {
      alive();
      const target = { tenant: key.tenant, class: className, name };
      const result = await runtime.call(actor, target, request);
      alive();
      if (!result.ok) return fail(result.error);
      return result.response;
    },
    // Drafts of the event, stored with its commit (src/alarms/actor_alarm.ts).
    alarmSet: (atMs) => {
      alive();
      if (atMs > BigInt(MAX_ALARM_DUE_MS)) {
        fail(`an alarm's time is at most ${MAX_ALARM_DUE_MS} ms since the epoch, not ${atMs}`);
      }
      actor.alarm.set(Number(atMs));
    },
    alarmGet: () => {
      const due = actor.alarm.get();
      return due === undefined ? undefined : BigInt(due);
    },
    alarmDelete: () => {
      alive();
      actor.alarm.delete();
    },
    wsSend: (connection, message) => {
      alive();
      const id = openSocket(connection);
      const sent = message.tag === "text" ? { text: message.val } : { binary: message.val };
      const max = runtime.maxSocketMessageBytes;
      const size = sizeOverLimit(sent, max);
      if (size !== undefined) fail(`the message is ${size} bytes, over the limit of ${max}`);
      runtime.socketSend(actor, id, sent);
    },
    wsClose: (connection, code, reason) => {
      alive();
      const id = openSocket(connection);
      if (!isApplicationCloseCode(code)) {
        fail(`an actor closes a WebSocket with 1000 or a code from 3000 to 4999, not ${code}`);
      }
      if (utf8.encode(reason).length > MAX_CLOSE_REASON_BYTES) {
        fail(`a close reason is at most ${MAX_CLOSE_REASON_BYTES} bytes of UTF-8`);
      }
      actor.sockets.delete(id);
      runtime.socketClose(actor, id, code, reason);
    },
    wsConnections: () => [...actor.sockets].map(BigInt),
    configGet: (name) => Object.hasOwn(spec.config, name) ? spec.config[name] : undefined,
    log: (level: LogLevel, message) => log[level](message.slice(0, MAX_ACTOR_LOG_CHARS)),
  };
}
