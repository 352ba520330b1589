/**
 * The relays a node holds open to its peers (an upgrade it sent on to the
 * node that owns the actor, joined to its client by src/net/relay.ts), so
 * they can be cut together: a peer this node no longer trusts (its
 * heartbeat fenced, released, gone, expired or naming a new key) loses its
 * relays at the node's next trust sweep, the spec's "relayed WebSockets are
 * cut within 500 ms"; a node that stops cuts them all ("a WebSocket this
 * node relays to another node is cut when the node stops").
 *
 * @module
 */

import type { ByteConn } from "../net/h1/connection.ts";
import { relay, type RelayEnd } from "../net/relay.ts";
import { MAX_RELAYS } from "../limits.ts";

/** The peer a relay goes to. */
export interface RelayPeer {
  /** Its node id. */
  readonly node: string;
  /** Its certificate's fingerprint, for a relay over its cluster listener. */
  readonly fingerprint?: string;
}

interface Open {
  peer: RelayPeer;
  /** Ends the relay: trust in the peer ended, or the node stops. */
  cut: (reason: Error) => void;
  ended: Promise<unknown>;
}

/**
 * The node's open relays, at most {@linkcode MAX_RELAYS}.
 *
 * @example
 * ```ts
 * import { Relays } from "./relays.ts";
 * import type { ByteConn, UpgradeResult } from "../http/forward.ts";
 * declare const client: ByteConn;
 * declare const up: Extract<UpgradeResult, { kind: "switched" }>;
 * declare const fingerprint: string;
 * declare const trusted: Set<string>;
 * const relays = new Relays();
 * const peer = { node: "b", fingerprint };
 * const ended = relays.join(peer, client, up.conn, { fromPeer: up.leftover });
 * relays.revoke((peer) => trusted.has(peer.fingerprint!)); // after each listing
 * ```
 */
export class Relays {
  readonly #open = new Set<Open>();
  readonly #max: number;

  constructor(max = MAX_RELAYS) {
    this.#max = max;
  }

  /** Whether {@linkcode MAX_RELAYS} are open: another would be refused. */
  get full(): boolean {
    return this.#open.size >= this.#max;
  }

  /** Relays open now. */
  get size(): number {
    return this.#open.size;
  }

  /**
   * Joins `client` to `peerConn` (switched to the peer's protocol) until
   * either closes or the relay is cut; undefined, both closed, when
   * {@linkcode MAX_RELAYS} are open already.
   */
  join(
    peer: RelayPeer,
    client: ByteConn,
    peerConn: ByteConn,
    leftovers: { fromClient?: Uint8Array; fromPeer?: Uint8Array } = {},
  ): Promise<RelayEnd> | undefined {
    if (this.full) {
      client.close();
      peerConn.close();
      return undefined;
    }
    const cut = new AbortController();
    const ended = relay(client, peerConn, {
      cut: cut.signal,
      fromA: leftovers.fromClient,
      fromB: leftovers.fromPeer,
    });
    this.hold(peer, ended, (reason) => cut.abort(reason));
    return ended;
  }

  /**
   * Holds a relay made elsewhere (a WebSocket relayed message by message,
   * `src/websockets/socket_relay.ts`) until `ended`; `cut` ends it when the
   * peer is no longer trusted or the node stops. False, and nothing held,
   * when {@linkcode MAX_RELAYS} are open already.
   */
  hold(peer: RelayPeer, ended: Promise<unknown>, cut: (reason: Error) => void): boolean {
    if (this.full) return false;
    const open: Open = { peer, cut, ended };
    this.#open.add(open);
    ended.finally(() => this.#open.delete(open)).catch(() => {});
    return true;
  }

  /** Cuts the relays to every peer `trusted` says no to; how many. One call per relay. */
  revoke(trusted: (peer: RelayPeer) => boolean): number {
    let cut = 0;
    for (const open of this.#open) {
      let keep = false;
      try {
        keep = trusted(open.peer);
      } catch {
        keep = false;
      }
      if (keep) continue;
      open.cut(new Error(`node ${open.peer.node} is no longer trusted`));
      this.#open.delete(open);
      cut++;
    }
    return cut;
  }

  /** Cuts every relay (the node stops); resolves once all ended. */
  async closeAll(): Promise<void> {
    const ending = [...this.#open].map((open) => {
      open.cut(new Error("the node stops"));
      return open.ended;
    });
    this.#open.clear();
    await Promise.all(ending);
  }
}
