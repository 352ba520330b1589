/**
 * The network between simulated machines: TCP-like connections whose bytes
 * arrive in order after a one-way delay, as events of the receiving process
 * (a paused process reads them on resume, as its kernel kept them; a crashed
 * one never does), and partitions between two machines, one way or both:
 * `refuse` (a firewall that rejects: connects are refused, a byte sent on an
 * open connection resets it) or `silent` (packets vanish: connects hang until
 * their caller gives up, bytes on an open connection arrive once the
 * partition ends, as TCP would resend them).
 *
 * The client side is the real forwarder's connection seam
 * (`Connect` and `ByteConn` of `src/http/forward.ts`); the server side hands
 * each accepted connection to `sim/http_server.ts`.
 *
 * @module
 */

import type { ByteConn, Connect } from "../src/http/forward.ts";
import type { Owner, Scheduler } from "./scheduler.ts";

/** The path from one machine to another, now. */
export type LinkState = { state: "up" } | { state: "refuse" } | {
  state: "silent";
  /** When the partition ends (true time, ms): held bytes arrive after it. */
  until: number;
};

/** What the network needs of the world. */
export interface NetworkOptions {
  sched: Scheduler;
  /** A one-way delay, ms, drawn for each packet sent from `from` to `to`. */
  latencyMs: (from: string, to: string) => number;
  /** The path from machine `from` to machine `to` now. */
  link: (from: string, to: string) => LinkState;
}

/** One end of the network: a process on a machine. */
export interface Endpoint {
  owner: Owner;
  machine: string;
}

interface Listener {
  endpoint: Endpoint;
  accept: (conn: ByteConn) => void;
}

/** A connection error as Deno names them, so the forwarder reads it as it would a socket's. */
function networkError(kind: "ConnectionRefused" | "ConnectionReset" | "BadResource", what: string) {
  return new Deno.errors[kind](what);
}

/** One end of a simulated TCP connection. */
class SimConn implements ByteConn {
  peer!: SimConn;
  readonly #chunks: Uint8Array[] = [];
  #eof = false;
  #reset = false;
  #closed = false;
  #pending:
    | { p: Uint8Array; resolve: (n: number | null) => void; reject: (e: unknown) => void }
    | undefined;
  /** When the last packet sent to this end arrives: packets keep their order. */
  lastArrival = -Infinity;

  constructor(readonly net: SimNetwork, readonly endpoint: Endpoint) {}

  get closed(): boolean {
    return this.#closed;
  }

  read(p: Uint8Array): Promise<number | null> {
    if (this.#closed) {
      return Promise.reject(networkError("BadResource", "the connection is closed"));
    }
    if (this.#chunks.length > 0) return Promise.resolve(this.#copyInto(p));
    if (this.#reset) {
      return Promise.reject(networkError("ConnectionReset", "connection reset by peer"));
    }
    if (this.#eof) return Promise.resolve(null);
    if (this.#pending) return Promise.reject(new Error("two reads at once on one connection"));
    return new Promise((resolve, reject) => this.#pending = { p, resolve, reject });
  }

  write(p: Uint8Array): Promise<number> {
    if (this.#closed) {
      return Promise.reject(networkError("BadResource", "the connection is closed"));
    }
    if (this.#reset) {
      return Promise.reject(networkError("ConnectionReset", "connection reset by peer"));
    }
    if (p.length > 0) this.net.send(this, { data: p.slice() });
    return Promise.resolve(p.length);
  }

  close(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.net.untrack(this);
    this.#pending?.resolve(null);
    this.#pending = undefined;
    // Unread bytes make the kernel answer with a reset rather than a FIN.
    this.net.send(this, this.#chunks.length > 0 ? { reset: true } : { fin: true });
    this.#chunks.length = 0;
  }

  /** The process is gone: its kernel ends the connection, no event of it runs. */
  abandon(): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#pending = undefined;
    this.net.send(this, { reset: true });
  }

  /** A packet arrived (an event of this end's process). */
  arrive(packet: Packet): void {
    if (this.#closed || this.#reset) {
      // The kernel answers bytes for a closed socket with a reset.
      if (packet.data) this.net.send(this, { reset: true });
      return;
    }
    if (packet.data) {
      this.#chunks.push(packet.data);
      const pending = this.#pending;
      if (pending) {
        this.#pending = undefined;
        pending.resolve(this.#copyInto(pending.p));
      }
    } else if (packet.fin) {
      this.#eof = true;
      this.#pending?.resolve(null);
      this.#pending = undefined;
    } else if (packet.reset) {
      this.#reset = true;
      this.#chunks.length = 0;
      this.#pending?.reject(networkError("ConnectionReset", "connection reset by peer"));
      this.#pending = undefined;
    }
  }

  #copyInto(p: Uint8Array): number {
    let n = 0;
    while (n < p.length && this.#chunks.length > 0) {
      const chunk = this.#chunks[0];
      const take = Math.min(chunk.length, p.length - n);
      p.set(chunk.subarray(0, take), n);
      n += take;
      if (take === chunk.length) this.#chunks.shift();
      else this.#chunks[0] = chunk.subarray(take);
    }
    return n;
  }
}

interface Packet {
  data?: Uint8Array;
  fin?: boolean;
  reset?: boolean;
}

/**
 * The simulated network.
 *
 * @example
 * ```ts ignore
 * const net = new SimNetwork({ sched, latencyMs: () => 1, link: () => ({ state: "up" }) });
 * net.listen("b.sim:8080", { owner: b, machine: "b" }, (conn) => serve(conn));
 * const conn = await net.connector({ owner: a, machine: "a" })("b.sim", 8080, signal);
 * ```
 */
export class SimNetwork {
  readonly #o: NetworkOptions;
  readonly #listeners = new Map<string, Listener>();
  readonly #conns = new Map<Owner, Set<SimConn>>();

  constructor(options: NetworkOptions) {
    this.#o = options;
  }

  /** Accepts connections to `address` (`host:port`) until the returned function is called. */
  listen(address: string, endpoint: Endpoint, accept: (conn: ByteConn) => void): () => void {
    const listener = { endpoint, accept };
    this.#listeners.set(address, listener);
    return () => {
      if (this.#listeners.get(address) === listener) this.#listeners.delete(address);
    };
  }

  /** The real forwarder's connection seam, for a process. */
  connector(endpoint: Endpoint): Connect {
    return (host, port, signal) => this.#connect(endpoint, `${host}:${port}`, signal);
  }

  /**
   * The process crashed or exited: every connection of it ends (its peers
   * see a reset) and its listeners are gone.
   */
  kill(owner: Owner): void {
    for (const [address, listener] of this.#listeners) {
      if (listener.endpoint.owner === owner) this.#listeners.delete(address);
    }
    const conns = this.#conns.get(owner);
    this.#conns.delete(owner);
    for (const conn of conns ?? []) conn.abandon();
  }

  #connect(from: Endpoint, address: string, signal: AbortSignal): Promise<ByteConn> {
    const { sched } = this.#o;
    return new Promise<ByteConn>((resolve, reject) => {
      let settled = false;
      const settle = (conn: SimConn | undefined, error?: unknown) => {
        if (settled) {
          conn?.close();
          return;
        }
        settled = true;
        signal.removeEventListener("abort", onAbort);
        if (conn) resolve(conn);
        else reject(error);
      };
      const onAbort = () => settle(undefined, signal.reason);
      if (signal.aborted) return onAbort();
      signal.addEventListener("abort", onAbort, { once: true });
      const listener = this.#listeners.get(address);
      const toMachine = listener?.endpoint.machine ?? address;
      const refused = () =>
        settle(undefined, networkError("ConnectionRefused", `connection refused: ${address}`));
      const out = this.#o.link(from.machine, toMachine);
      // Silent: the SYN vanishes and the caller's own timeout ends the wait.
      if (out.state === "silent") return;
      const there = this.#o.latencyMs(from.machine, toMachine);
      if (out.state === "refuse") {
        sched.after(2 * there, refused, from.owner);
        return;
      }
      sched.after(there, () => {
        // The listener's kernel answers the SYN, even for a paused process.
        const now = this.#listeners.get(address);
        const back = this.#o.link(toMachine, from.machine);
        if (back.state === "silent") return;
        const again = this.#o.latencyMs(toMachine, from.machine);
        if (!now || now.endpoint.owner.dead || back.state === "refuse") {
          sched.after(again, refused, from.owner);
          return;
        }
        const client = new SimConn(this, from);
        const server = new SimConn(this, now.endpoint);
        client.peer = server;
        server.peer = client;
        this.#track(client);
        this.#track(server);
        sched.after(0, () => now.accept(server), now.endpoint.owner);
        sched.after(again, () => settle(client), from.owner);
      });
    });
  }

  /** A connection its process closed. */
  untrack(conn: SimConn): void {
    this.#conns.get(conn.endpoint.owner)?.delete(conn);
  }

  #track(conn: SimConn): void {
    const owner = conn.endpoint.owner;
    let set = this.#conns.get(owner);
    if (!set) this.#conns.set(owner, set = new Set());
    set.add(conn);
  }

  /** Sends a packet from `from` to its peer, as the path between their machines allows. */
  send(from: SimConn, packet: Packet): void {
    const to = from.peer;
    const { sched } = this.#o;
    const link = this.#o.link(from.endpoint.machine, to.endpoint.machine);
    if (link.state === "refuse") {
      // Rejected: the sender's connection is reset.
      if (!packet.reset && !from.closed) {
        const back = this.#o.latencyMs(to.endpoint.machine, from.endpoint.machine);
        sched.after(back, () => from.arrive({ reset: true }), from.endpoint.owner);
      }
      return;
    }
    const start = link.state === "silent" ? Math.max(sched.now, link.until) : sched.now;
    const arrival = Math.max(
      to.lastArrival,
      start + this.#o.latencyMs(from.endpoint.machine, to.endpoint.machine),
    );
    to.lastArrival = arrival;
    sched.at(arrival, () => to.arrive(packet), to.endpoint.owner);
  }
}
