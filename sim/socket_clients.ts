/**
 * The WebSocket clients of a run: each opens a socket to a random room (an
 * actor of the run) through a random node, over the simulated network, as a
 * browser would (the upgrade, then RFC 6455 frames, `wire_socket.ts` in the
 * client's role); sends messages at random, which the room echoes; and,
 * once its socket closed (its node lost the room, stopped or died, or the
 * client left), opens another after a random delay. What the node does with
 * each socket is the real code's; the invariant is `Invariants.socketEvent`.
 *
 * @module
 */

import type { Connect } from "../src/http/forward.ts";
import { type ByteConn, writeAll } from "../src/net/h1/connection.ts";
import { MAX_SOCKET_MESSAGE_BYTES } from "../src/limits.ts";
import { WireSocket } from "../src/websockets/wire_socket.ts";
import { describeError } from "../src/describe_error.ts";
import { between } from "./bucket.ts";
import { TrueClock } from "./clocks.ts";
import { exp, type SimActor, type SimContext } from "./context.ts";
import type { SimNode } from "./processes.ts";
import type { Owner } from "./scheduler.ts";

/** Longest wait for an upgrade's answer before the client gives up on it. */
const ANSWER_WAIT_MS = 60_000;
/** Most bytes of an answer's head the client reads. */
const MAX_HEAD_BYTES = 16 * 1024;

/** The clients' side of the network: never paused, never dead. */
const CLIENTS: Owner = { dead: false, paused: false, deferred: [] };

const utf8 = new TextEncoder();
const latin1 = new TextDecoder("latin1");

/**
 * The socket clients of one run.
 *
 * @example
 * ```ts ignore
 * const clients = new SocketClients(ctx, network.connector({ owner, machine: "clients/0" }), stopAt);
 * clients.start();
 * ```
 */
export class SocketClients {
  readonly #ctx: SimContext;
  readonly #connect: Connect;
  readonly #stopAt: number;
  readonly #clock: TrueClock;

  readonly #readVia: (node: SimNode, room: SimActor) => void;

  /** `readVia` sends a read of a room through a node (the workload's request). */
  constructor(
    ctx: SimContext,
    connect: (owner: Owner) => Connect,
    stopAt: number,
    readVia: (node: SimNode, room: SimActor) => void,
  ) {
    this.#ctx = ctx;
    this.#connect = connect(CLIENTS);
    this.#stopAt = stopAt;
    this.#clock = new TrueClock(ctx.sched);
    this.#readVia = readVia;
  }

  /** Starts the run's clients, a little apart. */
  start(): void {
    const r = this.#ctx.draws.sockets;
    for (let i = 0; i < this.#ctx.swarm.sockets.clients; i++) {
      this.#ctx.sched.after(between(r, 500, 10_000), () => void this.#client(i), CLIENTS);
    }
  }

  /** One client: a socket, and after it closed, another. */
  async #client(index: number): Promise<void> {
    const ctx = this.#ctx;
    if (ctx.violation || ctx.sched.now >= this.#stopAt) return;
    const r = ctx.draws.sockets;
    const actor = ctx.rooms[Math.floor(r.next() * ctx.rooms.length)];
    const node = ctx.nodes[Math.floor(r.next() * ctx.nodes.length)];
    const proc = node.current;
    const again = (ms: number) =>
      ctx.sched.after(between(r, ms / 2, ms), () => void this.#client(index), CLIENTS);
    if (!proc || proc.dead || proc.state !== "serving") return void again(2_000);
    const socket = await this.#open(proc.authority, actor);
    if (!socket) {
      ctx.stats.socketsRefused++;
      return void again(3_000);
    }
    ctx.stats.socketsOpened++;
    const tag = `socket client ${index} (${actor.short} via ${proc.name})`;
    ctx.log("sim", `${tag}: open`);
    let sent = 0;
    let open = true;
    const step = () => {
      if (!open || ctx.violation) return;
      if (r.next() < 0.05 || ctx.sched.now >= this.#stopAt) {
        socket.close(1000, "the client leaves");
        return;
      }
      socket.send({ text: `m${index}-${++sent}` });
      ctx.stats.socketMessagesSent++;
      wait();
    };
    /**
     * The next message after a gap. A long gap (the room hibernates) has a
     * look at the room through any node in its middle, as the room's page
     * would: it takes the room there, which lets it go again before the
     * socket's next message finds it moved; a short one, now and then.
     */
    const wait = () => {
      const idleMs = ctx.swarm.idleMs;
      const long = r.next() < 0.5;
      const gap = long ? between(r, 2 * idleMs + 2_000, 3 * idleMs + 10_000) : this.#gap();
      ctx.sched.after(gap, step, CLIENTS);
      if (!long && r.next() > 0.3) return;
      const via = ctx.nodes[Math.floor(r.next() * ctx.nodes.length)];
      const at = long ? between(r, idleMs + 1_000, gap - idleMs - 1_000) : between(r, 0, gap);
      ctx.sched.after(at, () => this.#readVia(via, actor), CLIENTS);
    };
    socket.listen({
      open: wait,
      message: () => void ctx.stats.socketEchoes++,
      close: (code) => {
        open = false;
        ctx.stats.socketCloses[code] = (ctx.stats.socketCloses[code] ?? 0) + 1;
        ctx.log("sim", `${tag}: closed ${code} after ${sent} messages`);
        // Reconnecting after a random delay, as the spec asks of clients on 1012.
        again(5_000);
      },
    });
  }

  /** A short wait before a client's next message: the run's mean gap. */
  #gap(): number {
    return exp(this.#ctx.draws.sockets, this.#ctx.swarm.sockets.messageGapMs);
  }

  /** Opens a socket to `actor` at `authority`; undefined when the upgrade was not answered 101. */
  async #open(authority: string, actor: SimActor): Promise<WireSocket | undefined> {
    const [host, port] = authority.split(":");
    const gaveUp = new AbortController();
    let conn: ByteConn | undefined;
    // A connection that hangs (a silent partition) is closed: its read ends.
    const timer = this.#clock.setTimer(ANSWER_WAIT_MS, () => {
      gaveUp.abort();
      conn?.close();
    });
    try {
      conn = await this.#connect(host, Number(port), gaveUp.signal);
      const key = btoa(String.fromCharCode(...this.#ctx.draws.sockets.fill(new Uint8Array(16))));
      await writeAll(
        conn,
        utf8.encode(
          `GET /actor/${actor.key.class}/${actor.key.name} HTTP/1.1\r\nhost: ${authority}\r\n` +
            `upgrade: websocket\r\nconnection: upgrade\r\nsec-websocket-key: ${key}\r\n` +
            `sec-websocket-version: 13\r\n\r\n`,
        ),
      );
      const head = await readHead(conn);
      if (!head || !head.text.startsWith("HTTP/1.1 101")) {
        conn.close();
        const answer = head
          ? `${head.text.split("\r\n")[0]}: ${latin1.decode(head.leftover).trim().slice(0, 120)}`
          : "no answer";
        this.#ctx.log("sim", `socket upgrade for ${actor.short} via ${authority}: ${answer}`);
        // A refusal is a 4xx, or a 503 to retry: anything else is the node failing.
        if (head && /^HTTP\/1\.1 5(?!03)/.test(head.text)) {
          this.#ctx.fail("socket-upgrade-failed", `an upgrade via ${authority} got ${answer}`);
        }
        return undefined;
      }
      return new WireSocket(conn, {
        role: "client",
        maxMessageBytes: MAX_SOCKET_MESSAGE_BYTES,
        clock: this.#clock,
        random: this.#ctx.draws.sockets,
        leftover: head.leftover,
      });
    } catch (error) {
      conn?.close();
      this.#ctx.log(
        "sim",
        `socket upgrade for ${actor.short} via ${authority}: ${describeError(error)}`,
      );
      return undefined;
    } finally {
      timer.cancel();
    }
  }
}

/** The answer's head and the bytes read past it; undefined when the connection ended first. */
async function readHead(
  conn: ByteConn,
): Promise<{ text: string; leftover: Uint8Array } | undefined> {
  let buffered = new Uint8Array(0);
  const chunk = new Uint8Array(4096);
  while (buffered.length < MAX_HEAD_BYTES) {
    const n = await conn.read(chunk);
    if (n === null) return undefined;
    const joined = new Uint8Array(buffered.length + n);
    joined.set(buffered);
    joined.set(chunk.subarray(0, n), buffered.length);
    buffered = joined;
    const end = latin1.decode(buffered).indexOf("\r\n\r\n");
    if (end >= 0) {
      return { text: latin1.decode(buffered.subarray(0, end)), leftover: buffered.slice(end + 4) };
    }
  }
  return undefined;
}
