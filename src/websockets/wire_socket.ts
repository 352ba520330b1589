/**
 * A WebSocket this node speaks itself over a connection whose upgrade is
 * done (RFC 6455 framing, `frames.ts`): the relaying node's side of a
 * socket relayed to the actor's owner is the client (its frames masked),
 * the owner's the server. Fragmented messages are put together, pings
 * answered, a close answered and the connection closed after it.
 *
 * Bounded: a message (its fragments together) of at most `maxMessageBytes`
 * (past it the socket fails with 1009), a close this side sent answered
 * within {@linkcode CLOSE_ANSWER_MS} (or the connection is closed anyway),
 * and `bufferedAmount` says what was sent and is not written yet, so its
 * user can stop a peer that does not read.
 *
 * @module
 */

import type { SocketMessage } from "../actors/protocol.ts";
import { type ByteConn, writeAll } from "../net/h1/connection.ts";
import { CLOSE_ANSWER_MS } from "../limits.ts";
import type { Clock, Random, Timer } from "../time/clock.ts";
import {
  closePayload,
  decodeText,
  encodeFrame,
  FrameError,
  FrameReader,
  OPCODE,
  readClose,
} from "./frames.ts";
import type { SocketHandlers, SocketLike } from "./socket_like.ts";

/** Read size from the connection. */
const READ_BYTES = 64 * 1024;

const utf8 = new TextEncoder();

/** What a {@linkcode WireSocket} works with. */
export interface WireSocketOptions {
  /** `client`: this side masks its frames and reads unmasked ones; `server` the other way. */
  role: "client" | "server";
  /** Largest message either way. */
  maxMessageBytes: number;
  /** Times the wait for a close's answer. */
  clock: Clock;
  /** The masks of a client's frames. */
  random: Random;
  /** Bytes of the socket already read with the upgrade's head. */
  leftover?: Uint8Array;
}

/**
 * A WebSocket over `conn`.
 *
 * @example
 * ```ts
 * import { WireSocket } from "./wire_socket.ts";
 * import type { Forwarder } from "../http/forward.ts";
 * import { systemClock as clock, systemRandom as random } from "../time/clock.ts";
 * declare const forwarder: Forwarder;
 * declare const owner: string;
 * declare const path: string;
 * declare const headers: [string, string][];
 * declare const client: WebSocket;
 * const maxMessageBytes = 1024 * 1024;
 * const up = await forwarder.upgrade(owner, { path, headers, protocol: "websocket" });
 * if (up.kind === "switched") {
 *   const socket = new WireSocket(up.conn, { role: "client", maxMessageBytes, clock, random,
 *     leftover: up.leftover });
 *   socket.listen({
 *     open() {},
 *     message: (m) => client.send("text" in m ? m.text : m.binary),
 *     close: (code, reason) => client.close(code, reason),
 *   });
 * }
 * ```
 */
export class WireSocket implements SocketLike {
  readonly #conn: ByteConn;
  readonly #o: WireSocketOptions;
  readonly #reader: FrameReader;
  #handlers: SocketHandlers | undefined;
  #state: "open" | "closing" | "closed" = "open";
  #buffered = 0;
  #writing: Promise<void> = Promise.resolve();
  #closeTimer: Timer | undefined;
  /** The message being put together from its fragments. */
  #fragments: { opcode: number; pieces: Uint8Array[]; length: number } | undefined;

  /** Speaks over `conn`; nothing is read until {@linkcode WireSocket.listen}. */
  constructor(conn: ByteConn, options: WireSocketOptions) {
    this.#conn = conn;
    this.#o = options;
    this.#reader = new FrameReader({
      masked: options.role === "server",
      // A frame's payload is at most a message; control frames are checked on their own.
      maxPayload: options.maxMessageBytes,
    });
  }

  get open(): boolean {
    return this.#state === "open";
  }

  get bufferedAmount(): number {
    return this.#buffered;
  }

  listen(handlers: SocketHandlers): void {
    this.#handlers = handlers;
    queueMicrotask(() => {
      handlers.open();
      void this.#readLoop();
    });
  }

  send(message: SocketMessage): void {
    if (this.#state !== "open") return;
    const payload = "text" in message ? utf8.encode(message.text) : message.binary;
    if (payload.length > this.#o.maxMessageBytes) {
      throw new RangeError(
        `a message of ${payload.length} bytes is over ${this.#o.maxMessageBytes}`,
      );
    }
    this.#write("text" in message ? OPCODE.text : OPCODE.binary, payload);
  }

  close(code: number, reason: string): void {
    if (this.#state !== "open") return;
    this.#state = "closing";
    this.#write(OPCODE.close, closePayload(code, reason));
    this.#closeTimer = this.#o.clock.setTimer(CLOSE_ANSWER_MS, () => this.#end(code, reason));
  }

  #write(opcode: number, payload: Uint8Array): void {
    const mask = this.#o.role === "client" ? this.#o.random.fill(new Uint8Array(4)) : undefined;
    const frame = encodeFrame(opcode, payload, mask);
    this.#buffered += frame.length;
    this.#writing = this.#writing.then(async () => {
      try {
        await writeAll(this.#conn, frame);
      } catch {
        this.#end(1006, "");
      } finally {
        this.#buffered -= frame.length;
      }
    });
  }

  async #readLoop(): Promise<void> {
    const leftover = this.#o.leftover;
    if (leftover && leftover.length > 0) this.#reader.push(leftover);
    const buffer = new Uint8Array(READ_BYTES);
    try {
      while (!this.#ended()) {
        for (let frame; (frame = this.#reader.next()) !== undefined;) {
          this.#frame(frame.fin, frame.opcode, frame.payload);
          if (this.#ended()) return;
        }
        const n = await this.#conn.read(buffer);
        if (n === null) break;
        this.#reader.push(buffer.subarray(0, n));
      }
    } catch (error) {
      if (error instanceof FrameError) {
        this.#fail(error.code, error.message);
        return;
      }
    }
    this.#end(1006, "");
  }

  /** Whether the socket closed (a frame's handling can close it). */
  #ended(): boolean {
    return this.#state === "closed";
  }

  #frame(fin: boolean, opcode: number, payload: Uint8Array): void {
    switch (opcode) {
      case OPCODE.ping:
        if (this.#state === "open") this.#write(OPCODE.pong, payload);
        return;
      case OPCODE.pong:
        return;
      case OPCODE.close: {
        const { code, reason } = readClose(payload);
        if (this.#state === "open") {
          // Answered with the same code, then the connection closes.
          this.#state = "closing";
          this.#write(OPCODE.close, closePayload(code, reason));
        }
        this.#end(code, reason);
        return;
      }
    }
    if (opcode !== OPCODE.continuation) {
      if (this.#fragments) throw new FrameError(1002, "a message began inside another");
      if (fin) return this.#message(opcode, payload);
      this.#fragments = { opcode, pieces: [payload], length: payload.length };
      return;
    }
    const fragments = this.#fragments;
    if (!fragments) throw new FrameError(1002, "a continuation frame without a message");
    fragments.length += payload.length;
    if (fragments.length > this.#o.maxMessageBytes) {
      throw new FrameError(1009, `a message is longer than ${this.#o.maxMessageBytes} bytes`);
    }
    fragments.pieces.push(payload);
    if (!fin) return;
    this.#fragments = undefined;
    const whole = new Uint8Array(fragments.length);
    let at = 0;
    for (const piece of fragments.pieces) {
      whole.set(piece, at);
      at += piece.length;
    }
    this.#message(fragments.opcode, whole);
  }

  #message(opcode: number, payload: Uint8Array): void {
    if (this.#state !== "open") return;
    this.#handlers?.message(
      opcode === OPCODE.text ? { text: decodeText(payload) } : { binary: payload },
    );
  }

  /** The peer broke the protocol: a close with `code`, then the end. */
  #fail(code: number, reason: string): void {
    if (this.#state === "open") {
      this.#state = "closing";
      this.#write(OPCODE.close, closePayload(code, reason.slice(0, 120)));
    }
    this.#end(code, reason);
  }

  /**
   * Closes the connection once what was written went out (or after
   * {@linkcode CLOSE_ANSWER_MS}, for a peer that does not read), and tells
   * the handlers, once.
   */
  #end(code: number, reason: string): void {
    if (this.#state === "closed") return;
    this.#state = "closed";
    this.#closeTimer?.cancel();
    const stuck = this.#o.clock.setTimer(CLOSE_ANSWER_MS, () => this.#conn.close());
    void this.#writing.then(() => {
      stuck.cancel();
      this.#conn.close();
    });
    this.#handlers?.close(code, reason);
  }
}
