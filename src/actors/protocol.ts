/**
 * Messages between the control plane (main thread) and an executor process.
 * Small and explicit: run this event, event done, drop this actor.
 *
 * @module
 */

import { actorFileStem, type ActorKey } from "./key.ts";
import type { Plain } from "./codec.ts";

/** An HTTP request as the actor interface carries it (`types.http-request`). */
export interface ActorRequest {
  method: string;
  path: string;
  query: string;
  headers: [string, string][];
  body: Uint8Array;
}

/** An actor's HTTP answer (`types.http-response`). */
export interface ActorResponse {
  status: number;
  headers: [string, string][];
  body: Uint8Array;
}

/**
 * A WebSocket event of an actor (the spec's "WebSockets"): a socket opened
 * (the event's `request` is the upgrade request), a message on it, or the
 * client's close. `connection` is the socket's id, unique per actor.
 */
export type SocketEvent =
  | { kind: "open"; connection: number }
  | { kind: "message"; connection: number; message: SocketMessage }
  | { kind: "close"; connection: number; code: number; reason: string };

/**
 * An alarm's event, where the node passes a WebSocket event: the due time
 * of the index entry or timer that fired it (the `alarm` of the `event`
 * message).
 */
export interface AlarmFiring {
  kind: "alarm";
  due: number;
}

/** What an event is when it is not a request: a WebSocket's or an alarm's. */
export type SpecialEvent = SocketEvent | AlarmFiring;

/** A WebSocket message (`types.ws-message`). */
export type SocketMessage = { text: string } | { binary: Uint8Array };

/** How an actors.call ended: the callee's answer, or the error the caller gets. */
export type CallAnswer =
  | { ok: true; response: ActorResponse }
  | { ok: false; error: string };

/** How an event ended. */
export type EventOutcome =
  /** `node`: the node that ran it, when another one did (a forwarded request). */
  | {
    kind: "response";
    response: ActorResponse;
    node?: string;
    /**
     * The answer's body as another node sends it, when it ran there and
     * its body is long (`response.body` is then empty): read as the client
     * takes it.
     */
    stream?: ReadableStream<Uint8Array>;
  }
  | FailedOutcome;

/**
 * An event that did not run to an answer: the status and message the
 * caller gets.
 *
 * @example
 * ```ts
 * import type { FailedOutcome } from "./protocol.ts";
 * const outcome: FailedOutcome = { kind: "failed", status: 503, message: "retry" };
 * ```
 */
export interface FailedOutcome {
  kind: "failed";
  status: number;
  message: string;
  /** The node holding the actor, when the take found it held (nothing ran). */
  heldBy?: string;
  /**
   * A request another node forwarded for an actor this node does not hold:
   * the node its record names. Answered "not held" (nothing ran), so that
   * the sender routes it again.
   */
  notHeld?: string;
}

/** A class as an executor needs it. */
export interface ExecutorClass {
  className: string;
  hash: string;
  glue: string;
  coreModules: Record<string, Uint8Array>;
  /**
   * The core module to instantiate with the direct bindings (abi/direct.ts),
   * or `undefined` to use jco's glue.
   */
  directModule?: string;
  config: Record<string, string>;
}

/** The first message an executor gets. */
export interface ExecutorInit {
  type: "init";
  dataDir: string;
  /** Databases the executor keeps open at once. */
  maxOpenDatabases: number;
  /** A database unused this long is closed (its actor may stay resident). */
  databaseIdleMs: number;
  /**
   * The wall-clock limit of one event; the executor applies it to events
   * that wait on the bucket (the node to the one running).
   */
  eventTimeoutMs: number;
  classes: ExecutorClass[];
  /**
   * The seq of the app's version the classes are (ADR 0008), 0 for a node
   * that follows no app: an actor that ran a higher one is refused.
   */
  deploySeq: number;
  /** The line `deploySeq` counts in (manifest.ts `AppVersion.line`); "" without one. */
  deployLine: string;
  logLevel: string;
  /**
   * Whether actors' databases are replicated to the bucket (cluster mode);
   * `false` on a standalone node, whose databases are kept on the local disk
   * only (ADR 0005).
   */
  replicate: boolean;
  /** The bucket actors replicate to (the executor opens its own client when `replicate`). */
  bucketUrl: string;
  /** This node's id, written into the `base` of each hold. */
  nodeId: string;
  /** `--history-retention-secs`, in ms. */
  historyRetentionMs: number;
  /** This executor's share of the node's concurrent restore reads. */
  restoreReads: number;
  /** This executor's share of the node's restore bytes read at once. */
  restoreBytes: number;
  /** Largest message an actor may send on a WebSocket (`--max-socket-message-bytes`). */
  maxSocketMessageBytes: number;
}

/** Main thread to executor. */
export type ToExecutor =
  | ExecutorInit
  | {
    type: "event";
    seq: number;
    actor: ActorKey;
    /** The generation of the node's hold on the actor. */
    generation: number;
    /**
     * The end of the node's lease, in ms since the epoch on the machine's
     * wall clock (both processes read it); 0 for a node without one. The
     * executor runs nothing of the event past it: a node frozen with its
     * executors may resume them before it sends `discard-all`.
     */
    until: number;
    request: ActorRequest;
    /** Set for a WebSocket event (its `request` is the upgrade's, or empty). */
    socket?: SocketEvent;
    /** The actor's open sockets when the event was sent: what `websockets.connections` lists. */
    connections?: number[];
    /**
     * Set for an alarm's event: the due time of the index entry (or timer)
     * that fired it. The actor's `on-alarm` runs if its own alarm is due;
     * an entry that is not its alarm is deleted.
     */
    alarm?: number;
  }
  | { type: "drop"; actor: ActorKey; generation: number }
  | { type: "abandon"; seq: number; actor: ActorKey }
  /** Drop every actor at once, uploads not waited for (the node lease ran out). */
  | { type: "discard-all" }
  /**
   * The node's lease was renewed: valid until `until` (wall-clock ms), later
   * than the end its events carry. A `discard-all` comes first after every
   * lapse the node noticed; one it did not notice (its event loop held up)
   * ended without a fence, since the renewing write was conditioned on the
   * lease's ETag.
   */
  | { type: "lease"; until: number }
  /** The answer to a `check-hold`. */
  | { type: "hold"; id: number; ok: boolean }
  /** The answer to a `call`. */
  | { type: "call-answer"; id: number; answer: CallAnswer }
  /**
   * The app's version `seq` is applied: its classes replace the executor's
   * from the next event on, each resident actor switching at its own.
   */
  | { type: "classes"; seq: number; line: string; classes: ExecutorClass[] }
  | { type: "shutdown" };

/** Executor to main thread. */
export type FromExecutor =
  | { type: "ready" }
  /** `alarm`: the actor's alarm after the event (null: none), when the actor was open. */
  | { type: "done"; seq: number; response: ActorResponse; alarm?: number | null }
  | { type: "failed"; seq: number; status: number; message: string; alarm?: number | null }
  | { type: "abandoned"; seq: number }
  /** The event waits on the bucket; the executor runs others meanwhile. */
  | { type: "suspended"; seq: number }
  /** The event goes on after its wait; no other event runs until it ends or waits again. */
  | { type: "resumed"; seq: number }
  /**
   * An actor's actors.call (its event is suspended meanwhile): `chain` are
   * the actors waiting on the calling event, outermost first.
   */
  | {
    type: "call";
    id: number;
    seq: number;
    caller: ActorKey;
    chain: string[];
    target: ActorKey;
    request: ActorRequest;
  }
  /** Does the node still hold the actor at this generation? (A durable write landed.) */
  | { type: "check-hold"; id: number; actor: ActorKey; generation: number }
  /** An upload failed, or an event was abandoned: the node gives the actor up. */
  | { type: "give-up"; actor: ActorKey; generation: number }
  /** A drop finished: `landed` tells whether every upload reached the bucket. */
  | { type: "dropped"; actor: ActorKey; generation: number; landed: boolean }
  /** Adds `by` to the counter `name`. */
  | { type: "count"; name: string; by: number }
  /** The executor's bucket requests since its last such message, by `op area` (bucket/counted.ts). */
  | { type: "bucket-requests"; counts: Record<string, number> }
  /** An actor's `websockets.send`, sent as it is made. */
  | { type: "ws-send"; actor: ActorKey; connection: number; message: SocketMessage }
  /** An actor's `websockets.close`. */
  | { type: "ws-close"; actor: ActorKey; connection: number; code: number; reason: string }
  /** An actor ran the app's version `seq`, later than this executor's: the node checks for it at once. */
  | { type: "behind"; seq: number }
  | { type: "closed" };

/** The folder of the data directory that holds the actors' databases. */
export const ACTORS_DIR = "actors";

/**
 * Path of an actor's database under the data directory.
 *
 * @example
 * ```ts
 * import { actorDatabasePath } from "./protocol.ts";
 * actorDatabasePath("/d", { tenant: "default", class: "counter", name: "alice" });
 * // "/d/actors/default/counter/alice.db"
 * ```
 */
export function actorDatabasePath(dataDir: string, actor: ActorKey): string {
  return `${dataDir}/${ACTORS_DIR}/${actor.tenant}/${actor.class}/${actorFileStem(actor.name)}.db`;
}

/** A message across the process boundary that is not of the protocol's shape. */
export class ProtocolError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "ProtocolError";
  }
}

type Fields = { [key: string]: Plain };

function fields(value: Plain, what: string): Fields {
  if (
    value === null || typeof value !== "object" || Array.isArray(value) ||
    value instanceof Uint8Array
  ) {
    throw new ProtocolError(`${what} is not a record`);
  }
  return value;
}

function int(record: Fields, name: string): number {
  const value = record[name];
  if (typeof value !== "number" || !Number.isSafeInteger(value)) {
    throw new ProtocolError(`${name} is not an integer`);
  }
  return value;
}

function finite(record: Fields, name: string): number {
  const value = record[name];
  if (typeof value !== "number" || !Number.isFinite(value)) {
    throw new ProtocolError(`${name} is not a number`);
  }
  return value;
}

function text(record: Fields, name: string): string {
  const value = record[name];
  if (typeof value !== "string") throw new ProtocolError(`${name} is not a string`);
  return value;
}

function flag(record: Fields, name: string): boolean {
  const value = record[name];
  if (typeof value !== "boolean") throw new ProtocolError(`${name} is not a boolean`);
  return value;
}

function bytes(record: Fields, name: string): Uint8Array {
  const value = record[name];
  if (!(value instanceof Uint8Array)) throw new ProtocolError(`${name} is not bytes`);
  return value;
}

function strings(record: Fields, name: string): string[] {
  const value = record[name];
  if (!Array.isArray(value) || !value.every((v) => typeof v === "string")) {
    throw new ProtocolError(`${name} is not a list of strings`);
  }
  return value as string[];
}

function headers(record: Fields, name: string): [string, string][] {
  const value = record[name];
  if (
    !Array.isArray(value) ||
    !value.every((h) =>
      Array.isArray(h) && h.length === 2 && typeof h[0] === "string" && typeof h[1] === "string"
    )
  ) {
    throw new ProtocolError(`${name} is not a list of header pairs`);
  }
  return value as [string, string][];
}

function actorKey(record: Fields, name: string): ActorKey {
  const key = fields(record[name], name);
  return { tenant: text(key, "tenant"), class: text(key, "class"), name: text(key, "name") };
}

function request(record: Fields, name: string): ActorRequest {
  const r = fields(record[name], name);
  return {
    method: text(r, "method"),
    path: text(r, "path"),
    query: text(r, "query"),
    headers: headers(r, "headers"),
    body: bytes(r, "body"),
  };
}

function response(record: Fields, name: string): ActorResponse {
  const r = fields(record[name], name);
  return { status: int(r, "status"), headers: headers(r, "headers"), body: bytes(r, "body") };
}

function ints(record: Fields, name: string): number[] {
  const value = record[name];
  if (
    !Array.isArray(value) || !value.every((v) => typeof v === "number" && Number.isSafeInteger(v))
  ) {
    throw new ProtocolError(`${name} is not a list of integers`);
  }
  return value as number[];
}

function socketMessage(record: Fields, name: string): SocketMessage {
  const m = fields(record[name], name);
  if (typeof m.text === "string") return { text: m.text };
  return { binary: bytes(m, "binary") };
}

function socketEvent(record: Fields, name: string): SocketEvent {
  const e = fields(record[name], name);
  const kind = text(e, "kind");
  const connection = int(e, "connection");
  switch (kind) {
    case "open":
      return { kind, connection };
    case "message":
      return { kind, connection, message: socketMessage(e, "message") };
    case "close":
      return { kind, connection, code: int(e, "code"), reason: text(e, "reason") };
  }
  throw new ProtocolError(`unknown socket event '${kind}'`);
}

/** The optional `alarm` of a `done` or `failed`: a due time, or null for none. */
function alarmAfter(record: Fields): { alarm?: number | null } {
  if (record.alarm === undefined) return {};
  return { alarm: record.alarm === null ? null : int(record, "alarm") };
}

function callAnswer(record: Fields, name: string): CallAnswer {
  const answer = fields(record[name], name);
  if (flag(answer, "ok")) return { ok: true, response: response(answer, "response") };
  return { ok: false, error: text(answer, "error") };
}

function executorClass(value: Plain): ExecutorClass {
  const c = fields(value, "a class");
  const modules = fields(c.coreModules, "coreModules");
  for (const [name, module] of Object.entries(modules)) {
    if (!(module instanceof Uint8Array)) {
      throw new ProtocolError(`core module ${name} is not bytes`);
    }
  }
  const config = fields(c.config, "config");
  for (const [name, value] of Object.entries(config)) {
    if (typeof value !== "string") throw new ProtocolError(`config ${name} is not a string`);
  }
  const direct = c.directModule;
  if (direct !== undefined && typeof direct !== "string") {
    throw new ProtocolError("directModule is not a string");
  }
  return {
    className: text(c, "className"),
    hash: text(c, "hash"),
    glue: text(c, "glue"),
    coreModules: modules as Record<string, Uint8Array>,
    directModule: direct,
    config: config as Record<string, string>,
  };
}

/**
 * A frame from the node as an executor's message, checked field by field:
 * a frame of another shape (another version's, or a bug) is refused with a
 * {@linkcode ProtocolError} instead of being taken for a message.
 *
 * @example
 * ```ts
 * import { toExecutorMessage } from "./protocol.ts";
 * toExecutorMessage({ type: "lease", until: 1700000000000 }); // { type: "lease", until: 1700000000000 }
 * ```
 */
export function toExecutorMessage(frame: Plain): ToExecutor {
  const m = fields(frame, "a message");
  const type = text(m, "type");
  switch (type) {
    case "init": {
      const classes = m.classes;
      if (!Array.isArray(classes)) throw new ProtocolError("classes is not a list");
      return {
        type,
        dataDir: text(m, "dataDir"),
        maxOpenDatabases: int(m, "maxOpenDatabases"),
        databaseIdleMs: finite(m, "databaseIdleMs"),
        eventTimeoutMs: finite(m, "eventTimeoutMs"),
        classes: classes.map(executorClass),
        deploySeq: int(m, "deploySeq"),
        deployLine: text(m, "deployLine"),
        logLevel: text(m, "logLevel"),
        replicate: flag(m, "replicate"),
        bucketUrl: text(m, "bucketUrl"),
        nodeId: text(m, "nodeId"),
        historyRetentionMs: finite(m, "historyRetentionMs"),
        restoreReads: int(m, "restoreReads"),
        restoreBytes: int(m, "restoreBytes"),
        maxSocketMessageBytes: int(m, "maxSocketMessageBytes"),
      };
    }
    case "event":
      return {
        type,
        seq: int(m, "seq"),
        actor: actorKey(m, "actor"),
        generation: int(m, "generation"),
        until: finite(m, "until"),
        request: request(m, "request"),
        ...(m.socket === undefined ? {} : { socket: socketEvent(m, "socket") }),
        ...(m.connections === undefined ? {} : { connections: ints(m, "connections") }),
        ...(m.alarm === undefined ? {} : { alarm: int(m, "alarm") }),
      };
    case "drop":
      return { type, actor: actorKey(m, "actor"), generation: int(m, "generation") };
    case "abandon":
      return { type, seq: int(m, "seq"), actor: actorKey(m, "actor") };
    case "discard-all":
    case "shutdown":
      return { type };
    case "lease":
      return { type, until: finite(m, "until") };
    case "hold":
      return { type, id: int(m, "id"), ok: flag(m, "ok") };
    case "call-answer":
      return { type, id: int(m, "id"), answer: callAnswer(m, "answer") };
    case "classes": {
      const classes = m.classes;
      if (!Array.isArray(classes)) throw new ProtocolError("classes is not a list");
      return {
        type,
        seq: int(m, "seq"),
        line: text(m, "line"),
        classes: classes.map(executorClass),
      };
    }
  }
  throw new ProtocolError(`unknown message type '${type}' to an executor`);
}

/**
 * A frame from an executor as a message to the node, checked field by field
 * (see {@linkcode toExecutorMessage}).
 *
 * @example
 * ```ts
 * import { fromExecutorMessage } from "./protocol.ts";
 * fromExecutorMessage({ type: "abandoned", seq: 3 }); // { type: "abandoned", seq: 3 }
 * ```
 */
export function fromExecutorMessage(frame: Plain): FromExecutor {
  const m = fields(frame, "a message");
  const type = text(m, "type");
  switch (type) {
    case "ready":
    case "closed":
      return { type };
    case "done":
      return {
        type,
        seq: int(m, "seq"),
        response: response(m, "response"),
        ...alarmAfter(m),
      };
    case "failed":
      return {
        type,
        seq: int(m, "seq"),
        status: int(m, "status"),
        message: text(m, "message"),
        ...alarmAfter(m),
      };
    case "abandoned":
    case "suspended":
    case "resumed":
      return { type, seq: int(m, "seq") };
    case "call":
      return {
        type,
        id: int(m, "id"),
        seq: int(m, "seq"),
        caller: actorKey(m, "caller"),
        chain: strings(m, "chain"),
        target: actorKey(m, "target"),
        request: request(m, "request"),
      };
    case "check-hold":
      return {
        type,
        id: int(m, "id"),
        actor: actorKey(m, "actor"),
        generation: int(m, "generation"),
      };
    case "give-up":
      return { type, actor: actorKey(m, "actor"), generation: int(m, "generation") };
    case "dropped":
      return {
        type,
        actor: actorKey(m, "actor"),
        generation: int(m, "generation"),
        landed: flag(m, "landed"),
      };
    case "count":
      return { type, name: text(m, "name"), by: finite(m, "by") };
    case "behind":
      return { type, seq: int(m, "seq") };
    case "bucket-requests": {
      const counts = fields(m.counts, "counts");
      for (const [id, by] of Object.entries(counts)) {
        if (typeof by !== "number" || !Number.isSafeInteger(by) || by < 0) {
          throw new ProtocolError(`the count of ${id} is not a count`);
        }
      }
      return { type, counts: counts as Record<string, number> };
    }
    case "ws-send":
      return {
        type,
        actor: actorKey(m, "actor"),
        connection: int(m, "connection"),
        message: socketMessage(m, "message"),
      };
    case "ws-close":
      return {
        type,
        actor: actorKey(m, "actor"),
        connection: int(m, "connection"),
        code: int(m, "code"),
        reason: text(m, "reason"),
      };
  }
  throw new ProtocolError(`unknown message type '${type}' from an executor`);
}
