/**
 * The WebSockets of the actors this node serves (the spec's "WebSockets"):
 * the node holds each socket, and what happens on it becomes an event of
 * its actor, queued with the actor's requests in arrival order: `open`
 * when it opened (with the upgrade request), `message` per message, `close`
 * when the client closed it. From any event the actor sends on its sockets
 * and closes them (`websockets.send`, `websockets.close`), which reach
 * this node as its executor's frames, in order.
 *
 * What an event's failure does to its socket:
 *
 * - a trap, or an error of the actor, costs the event only: the socket
 *   stays open unless the actor closes it;
 * - an `open` or `message` event that could not run at all (the actor's
 *   queue full, its node not ready) closes the socket with 1013 (try again
 *   later), so that no message is lost unannounced;
 * - a message for an actor another node took meanwhile closes the actor's
 *   sockets with 1012 (the actor moved), and no `close` event runs for them
 *   here. Three things tell: its record names another node, asked before
 *   the event runs when this node does not hold the actor (a read, which
 *   spares a take when it says so); an event refused because another node
 *   holds it; and, exactly, every take of the actor by this node while its
 *   sockets are open ({@linkcode ActorSockets.took}): one that replaced
 *   another process's record means that process held the actor since, so
 *   the sockets that had an event here close before any event is sent
 *   under the new hold.
 *
 * Bounds: sockets per actor and per node (each an open file), a message's
 * size either way (`--max-socket-message-bytes`, by default
 * {@linkcode MAX_SOCKET_MESSAGE_BYTES}: a larger one from the client closes
 * its socket with 1009), and what a socket may have buffered unsent (four
 * of the largest messages, {@linkcode bufferedBytesFor}: a client that does
 * not read is closed with 1013 rather than growing the node's memory).
 *
 * Connection ids are unique per actor and stable while the socket is open:
 * one counter for the node, started from its clock (ms × 1024), so a node
 * that restarts does not give out an id its previous process gave.
 *
 * @module
 */

import { type ActorKey, actorKeyString } from "../actors/key.ts";
import type {
  ActorRequest,
  EventOutcome,
  FromExecutor,
  SocketEvent,
  SocketMessage,
} from "../actors/protocol.ts";
import {
  CLOSE_ANSWER_MS,
  MAX_NODE_SOCKETS,
  MAX_SOCKET_MESSAGE_BYTES,
  MAX_SOCKETS_PER_ACTOR,
} from "../limits.ts";
import type { Logger } from "../log.ts";
import type { Clock, Timer } from "../time/clock.ts";
import { sizeOverLimit } from "./message_size.ts";
import type { SocketLike } from "./socket_like.ts";

/**
 * Most bytes a socket may have queued to its client unsent, when messages
 * are at most `maxMessageBytes`; past it the socket is closed with 1013
 * (four of the largest messages: 4 MiB by default).
 *
 * @example
 * ```ts
 * import { bufferedBytesFor } from "./actor_sockets.ts";
 * bufferedBytesFor(1024 * 1024); // 4194304
 * ```
 */
export function bufferedBytesFor(maxMessageBytes: number): number {
  return 4 * maxMessageBytes;
}

/** The close codes this node sends of its own (RFC 6455, section 7.4.1). */
export const CLOSE = {
  /** A message over the size limit. */
  tooBig: 1009,
  /** The node cannot serve the socket now (the client may reconnect). */
  tryAgainLater: 1013,
  /** The actor moved to another node, or this node stops (the client reconnects). */
  serviceRestart: 1012,
  /** The class is no longer reachable from outside (made internal by a deploy). */
  policyViolation: 1008,
  /** The class cannot run: a required value is unset. */
  internalError: 1011,
} as const;

/** What {@linkcode ActorSockets} works with. */
export interface ActorSocketsOptions {
  /**
   * Why a socket of `key` closes at its next message instead of running it
   * (the version served now made its class internal, or left a required
   * value unset): the close code and reason. Unset: never.
   */
  refusal?(key: ActorKey): { code: number; reason: string } | undefined;
  /**
   * Runs a socket event on its actor, queued with its requests;
   * `stillWanted`, asked as it is sent (after any take), calls it off.
   */
  dispatch(
    key: ActorKey,
    request: ActorRequest,
    socket: SocketEvent,
    stillWanted?: () => boolean,
  ): Promise<EventOutcome>;
  /** This process's token in the ownership records: a take from another process is a move. */
  processToken?: string;
  log: Logger;
  /** Starts the connection ids. */
  clock: Clock;
  /** Default {@linkcode MAX_SOCKETS_PER_ACTOR}. */
  maxPerActor?: number;
  /** Default {@linkcode MAX_NODE_SOCKETS}. */
  maxSockets?: number;
  /** `--max-socket-message-bytes`; default {@linkcode MAX_SOCKET_MESSAGE_BYTES}. */
  maxMessageBytes?: number;
  /** Counts messages each way and closes by code (the node's metrics). */
  counters?: {
    socketMessage(direction: "in" | "out"): void;
    socketClosed(code: number): void;
  };
  /**
   * Whether another node took the actor since this node held it (a cluster
   * node: its record names another node), asked before a message's event
   * runs: its sockets here then close with 1012, unannounced. Unset on a
   * standalone node.
   */
  movedAway?: (key: ActorKey) => Promise<boolean>;
  /** The generation of this node's hold on the actor now, if it holds it (ActorHost.holdOf). */
  heldGeneration?: (key: ActorKey) => bigint | undefined;
}

/** One open socket. */
interface OpenSocket {
  id: number;
  key: ActorKey;
  actorId: string;
  socket: SocketLike;
  /** Closed by the actor or the node: its client's close is no event. */
  closedHere: boolean;
  /** An event of it was sent to the actor here: a move since closes it. */
  served: boolean;
  /** Resolves when the socket closed (the client answered the close, or the connection ended). */
  ended: Promise<void>;
  end: () => void;
}

/** The reason of a 1012 close when the actor is handed to another node. */
export const HANDED_OVER_REASON = "the actor moved to another node";

const EMPTY_REQUEST: ActorRequest = {
  method: "GET",
  path: "/",
  query: "",
  headers: [],
  body: new Uint8Array(0),
};

/**
 * The sockets of this node's actors.
 *
 * @example
 * ```ts
 * import { ActorSockets } from "./actor_sockets.ts";
 * import { webSocketOf } from "./socket_like.ts";
 * import type { ActorHost } from "../actors/actor_host.ts";
 * import type { ActorRequest } from "../actors/protocol.ts";
 * import { systemClock as clock } from "../time/clock.ts";
 * import { createLogger } from "../log.ts";
 * declare const host: ActorHost;
 * declare const request: Request;
 * declare const upgradeRequest: ActorRequest;
 * const key = { tenant: "default", class: "chat", name: "lobby" };
 * const sockets = new ActorSockets({
 *   dispatch: (key, request, socket) => host.dispatch(key, request, socket),
 *   log: createLogger(),
 *   clock,
 * });
 * const { socket, response } = Deno.upgradeWebSocket(request);
 * sockets.accept(key, upgradeRequest, webSocketOf(socket, clock));
 * ```
 */
export class ActorSockets {
  readonly #o: ActorSocketsOptions;
  readonly #byActor = new Map<string, Map<number, OpenSocket>>();
  /** Per actor, the last event waiting for {@linkcode ActorSocketsOptions.movedAway}. */
  readonly #checks = new Map<string, Promise<void>>();
  /** Per actor with sockets, the generation its last socket event ran at here. */
  readonly #lastHeld = new Map<string, bigint>();
  #count = 0;
  #nextId: number;
  readonly #maxMessageBytes: number;

  /** No socket open yet. */
  constructor(options: ActorSocketsOptions) {
    this.#o = options;
    this.#maxMessageBytes = options.maxMessageBytes ?? MAX_SOCKET_MESSAGE_BYTES;
    this.#nextId = Math.floor(options.clock.now()) * 1024;
  }

  /** Largest message either way (`--max-socket-message-bytes`). */
  get maxMessageBytes(): number {
    return this.#maxMessageBytes;
  }

  /** Sockets open on this node. */
  get count(): number {
    return this.#count;
  }

  /** Why another socket of `key` cannot open now (the 503's line), or undefined. */
  refusal(key: ActorKey): string | undefined {
    const maxSockets = this.#o.maxSockets ?? MAX_NODE_SOCKETS;
    if (this.#count >= maxSockets) {
      return `this node has its maximum of ${maxSockets} WebSockets open; retry`;
    }
    const maxPerActor = this.#o.maxPerActor ?? MAX_SOCKETS_PER_ACTOR;
    if ((this.#byActor.get(actorKeyString(key))?.size ?? 0) >= maxPerActor) {
      return `the actor has its maximum of ${maxPerActor} WebSockets open; retry`;
    }
    return undefined;
  }

  /**
   * Takes a socket of `key` (a client's, or one relayed from another node):
   * its `open` event runs once it opened, with `request` (the upgrade's).
   * Returns its id.
   */
  accept(key: ActorKey, request: ActorRequest, socket: SocketLike): number {
    const id = this.#nextId++;
    const actorId = actorKeyString(key);
    const { promise: ended, resolve: end } = Promise.withResolvers<void>();
    const entry: OpenSocket = {
      id,
      key,
      actorId,
      socket,
      closedHere: false,
      served: false,
      ended,
      end,
    };
    let sockets = this.#byActor.get(actorId);
    if (!sockets) this.#byActor.set(actorId, sockets = new Map());
    sockets.set(id, entry);
    this.#count++;
    socket.listen({
      open: () => this.#event(entry, request, { kind: "open", connection: id }),
      message: (message) => this.#message(entry, message),
      close: (code, reason) => {
        entry.end();
        this.#closed(entry, code, reason);
      },
    });
    return id;
  }

  /**
   * The generation of this node's hold the actor's last socket event ran
   * at; undefined before one ran here. A record of another node at a later
   * generation means the actor moved while its sockets were here.
   */
  lastHeld(key: ActorKey): bigint | undefined {
    return this.#lastHeld.get(actorKeyString(key));
  }

  /** The ids of `key`'s open sockets: what its next event lists. */
  connections(key: ActorKey): number[] {
    const sockets = this.#byActor.get(actorKeyString(key));
    return sockets ? [...sockets.keys()] : [];
  }

  /** An actor's `websockets.send` or `websockets.close`, from its executor. */
  output(message: Extract<FromExecutor, { type: "ws-send" } | { type: "ws-close" }>): void {
    const entry = this.#byActor.get(actorKeyString(message.actor))?.get(message.connection);
    // Closed since the event listed it: what it sent goes nowhere.
    if (!entry || !entry.socket.open) return;
    if (message.type === "ws-close") {
      this.#closeHere(entry, message.code, message.reason);
      return;
    }
    this.#send(entry, message.message);
  }

  /** The actors with sockets open here, each once. */
  actors(): ActorKey[] {
    return [...this.#byActor.values()].map((sockets) => sockets.values().next().value!.key);
  }

  /**
   * This node took `key` at `hold.generation` (before any event is sent
   * under the hold). A take that replaced another process's record means
   * that process held the actor since this node's last hold: the sockets
   * that had an event here close with 1012, with no `close` event, and no
   * event of theirs is sent; sockets not served yet (their `open` waits for
   * this take) stay.
   */
  took(
    key: ActorKey,
    hold: { generation: bigint; previous?: { process: string } },
  ): void {
    const id = actorKeyString(key);
    const sockets = this.#byActor.get(id);
    if (!sockets) return;
    const previous = hold.previous;
    if (previous !== undefined && previous.process !== this.#o.processToken) {
      for (const entry of [...sockets.values()]) {
        if (entry.served) {
          this.#closeHere(entry, CLOSE.serviceRestart, "the actor moved to another node");
        }
      }
    }
    if (this.#byActor.has(id)) this.#lastHeld.set(id, hold.generation);
  }

  /**
   * Closes the sockets of `key` with 1012, with no `close` event: another
   * node holds the actor now. How many were closed.
   */
  closeMoved(key: ActorKey): number {
    const sockets = this.#byActor.get(actorKeyString(key));
    if (!sockets) return 0;
    const entries = [...sockets.values()];
    for (const entry of entries) {
      this.#closeHere(entry, CLOSE.serviceRestart, "the actor moved to another node");
    }
    return entries.length;
  }

  /**
   * Closes the sockets of `key` with 1012: the actor is handed to another
   * node (a drain or a move, src/handover/). With `closeEvents` the actor
   * hears each close (a move, a drain of an actor held here); without, it
   * does not (a drained room that hibernated: this node does not take it
   * back to run them). Resolves once those close events are with the host,
   * so that a hand-over after it waits for them. How many were closed.
   */
  async closeHandedOver(key: ActorKey, closeEvents: boolean): Promise<number> {
    const id = actorKeyString(key);
    const sockets = this.#byActor.get(id);
    if (!sockets) return 0;
    const entries = [...sockets.values()];
    for (const entry of entries) {
      if (closeEvents) this.#closeByNode(entry, CLOSE.serviceRestart, HANDED_OVER_REASON);
      else this.#closeHere(entry, CLOSE.serviceRestart, HANDED_OVER_REASON);
    }
    await this.#checks.get(id);
    return entries.length;
  }

  /**
   * Closes every socket with `code` (1012 when the node stops), with no
   * `close` event for them; resolves once every client answered its close,
   * or after {@linkcode CLOSE_ANSWER_MS}.
   */
  async closeAll(code: number, reason: string): Promise<void> {
    const ended: Promise<void>[] = [];
    for (const sockets of [...this.#byActor.values()]) {
      for (const entry of [...sockets.values()]) {
        this.#closeHere(entry, code, reason);
        ended.push(entry.ended);
      }
    }
    if (ended.length === 0) return;
    let timer: Timer | undefined;
    const late = new Promise<void>((resolve) => {
      timer = this.#o.clock.setTimer(CLOSE_ANSWER_MS, resolve);
    });
    await Promise.race([Promise.all(ended), late]);
    timer?.cancel();
  }

  #send(entry: OpenSocket, message: SocketMessage): void {
    const { socket } = entry;
    if (socket.bufferedAmount > bufferedBytesFor(this.#maxMessageBytes)) {
      this.#o.log.warn("closing a WebSocket whose client does not read", {
        actor: entry.actorId,
        connection: entry.id,
        buffered: socket.bufferedAmount,
      });
      this.#closeByNode(entry, CLOSE.tryAgainLater, "the client does not read its messages");
      return;
    }
    socket.send(message);
    this.#o.counters?.socketMessage("out");
  }

  #message(entry: OpenSocket, message: SocketMessage): void {
    // Closed here (by the actor or the node): what its client still sends is dropped.
    if (entry.closedHere) return;
    if (sizeOverLimit(message, this.#maxMessageBytes) !== undefined) {
      this.#closeByNode(entry, CLOSE.tooBig, `messages are at most ${this.#maxMessageBytes} bytes`);
      return;
    }
    this.#o.counters?.socketMessage("in");
    this.#event(entry, EMPTY_REQUEST, { kind: "message", connection: entry.id, message });
  }

  #closed(entry: OpenSocket, code: number, reason: string): void {
    if (!this.#forget(entry) || entry.closedHere) return;
    this.#o.counters?.socketClosed(code);
    this.#event(entry, EMPTY_REQUEST, { kind: "close", connection: entry.id, code, reason });
  }

  /** Closed by the actor or by the node: no `close` event follows. */
  #closeHere(entry: OpenSocket, code: number, reason: string): void {
    if (entry.closedHere) return;
    entry.closedHere = true;
    this.#forget(entry);
    this.#o.counters?.socketClosed(code);
    entry.socket.close(code, reason);
  }

  /** Closed by the node for its client's doing (too big, not reading): the actor is told. */
  #closeByNode(entry: OpenSocket, code: number, reason: string): void {
    this.#closeHere(entry, code, reason);
    this.#event(entry, EMPTY_REQUEST, { kind: "close", connection: entry.id, code, reason });
  }

  /** Removes `entry`; false when it was removed before. */
  #forget(entry: OpenSocket): boolean {
    const sockets = this.#byActor.get(entry.actorId);
    if (!sockets?.delete(entry.id)) return false;
    if (sockets.size === 0) {
      this.#byActor.delete(entry.actorId);
      this.#lastHeld.delete(entry.actorId);
    }
    this.#count--;
    return true;
  }

  #event(entry: OpenSocket, request: ActorRequest, socket: SocketEvent): void {
    const refusal = socket.kind === "message" ? this.#o.refusal?.(entry.key) : undefined;
    if (refusal) {
      // An internal class still runs (and hears the close); one lacking a required value does not.
      if (refusal.code === CLOSE.policyViolation) {
        this.#closeByNode(entry, refusal.code, refusal.reason);
      } else this.#closeHere(entry, refusal.code, refusal.reason);
      return;
    }
    const id = entry.actorId;
    const earlier = this.#checks.get(id);
    const check = socket.kind === "message" ? this.#o.movedAway : undefined;
    if (!check && !earlier) return this.#dispatch(entry, request, socket);
    // Queued behind the checks before it, so the actor's events keep their order.
    const queued = (earlier ?? Promise.resolve()).then(async () => {
      if (check && await check(entry.key).catch(() => false)) {
        this.closeMoved(entry.key);
        return;
      }
      // Closed meanwhile (moved, or by its client): nothing to run.
      if (!this.#byActor.get(id)?.has(entry.id) && socket.kind !== "close") return;
      this.#dispatch(entry, request, socket);
    });
    this.#checks.set(id, queued);
    queued.finally(() => {
      if (this.#checks.get(id) === queued) this.#checks.delete(id);
    });
  }

  #dispatch(entry: OpenSocket, request: ActorRequest, socket: SocketEvent): void {
    // A client's close is the actor's to hear wherever it runs now; an open
    // or a message only while its socket is still served here.
    const stillWanted = socket.kind === "close" ? undefined : () => {
      if (this.#byActor.get(entry.actorId)?.get(entry.id) !== entry) return false;
      entry.served = true;
      return true;
    };
    this.#o.dispatch(entry.key, request, socket, stillWanted).then((outcome) => {
      if (outcome.kind === "failed" && outcome.status === 409) return; // Called off: closed here.
      if (outcome.kind !== "failed") {
        const generation = this.#o.heldGeneration?.(entry.key);
        if (generation !== undefined && this.#byActor.has(entry.actorId)) {
          this.#lastHeld.set(entry.actorId, generation);
        }
        return;
      }
      if (outcome.heldBy !== undefined) {
        // Another node took the actor: this node's sockets of it close, unannounced here.
        this.closeMoved(entry.key);
        return;
      }
      this.#o.log.warn("a WebSocket event failed", {
        actor: entry.actorId,
        connection: entry.id,
        event: socket.kind,
        status: outcome.status,
        reason: outcome.message,
      });
      // Not run (the actor's queue is full, its node not ready): a message
      // is not dropped silently, its socket closes so that its client knows.
      if ((socket.kind === "open" || socket.kind === "message") && outcome.status === 503) {
        this.#closeHere(entry, CLOSE.tryAgainLater, "the actor could not be run; retry");
      }
    }, (error) => {
      this.#o.log.error("a WebSocket event could not be dispatched", {
        actor: entry.actorId,
        error: String(error),
      });
    });
  }
}
