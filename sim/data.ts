/**
 * The data invariants of a simulated cluster, on what clients were told and
 * what the bucket applied:
 *
 * - `durable-write-lost`: every acknowledged durable write is in every later
 *   read of its actor and after every restore, unless a delete of the actor
 *   ran after it committed;
 * - `txid-backwards`: a read or a restore never stands at a TXID below an
 *   acknowledged durable write's; each generation's uploads go on from its
 *   base without going back or skipping; a higher generation's base never
 *   starts below a lower one's;
 * - `event-generation-backwards`: an actor's events never run at a lower
 *   generation than an earlier event of it;
 * - `upload-wrong-generation`: every object under `wal/<g>/` (and every
 *   delete marker of generation g) is written by the process that took
 *   generation g.
 *
 * The chain checks (the history restores to the owner's database) are in
 * world.ts, with sim/chain.ts.
 *
 * @module
 */

import { decodeBase, decodeDeleted } from "../src/replication/history.ts";
import type { Op } from "./executor_host.ts";

/** Reports a violation: its kind and what happened. */
export type Fail = (kind: string, message: string) => void;

/** A durable write that was acknowledged. */
interface Acked {
  txid: bigint;
  /** Virtual time it committed at the owner (before its upload). */
  committedAt: number;
  ackedAt: number;
}

/** What clients were told about one actor, and what ran on it. */
interface Ledger {
  acked: Map<number, Acked>;
  /** Commit times of durable writes not acknowledged yet, by id. */
  committing: Map<number, number>;
  /** Virtual times deletes of the actor ran at. */
  deletes: number[];
  lastGeneration: number;
  /** Generation → token of the process whose take wrote it. */
  takers: Map<bigint, string>;
  /** Base TXIDs, by generation. */
  bases: Map<bigint, bigint>;
  /** Generations anything was applied at. */
  written: Set<bigint>;
  /** Per generation: the last TXID its holder's uploads reached as sent, and the keys sent. */
  sent: Map<bigint, { last: bigint | undefined; keys: Set<string> }>;
}

const WAL = /^actors\/(.+)\/wal\/([0-9a-f]{16})\/(base|([0-9a-f]{16})-([0-9a-f]{16})\.ltx)$/;
const DELETED = /^actors\/(.+)\/deleted$/;

/**
 * The ledger of every actor and the checks on it.
 *
 * @example
 * ```ts ignore
 * const checks = new DataChecks((kind, message) => console.log(kind, message), () => now);
 * checks.acked("default/counter/x0", { kind: "durable", id: 3 }, 7n);
 * checks.saw("default/counter/x0", "a#1 (gen 2)", "in a read", new Set([3]), 7n);
 * ```
 */
export class DataChecks {
  readonly #ledgers = new Map<string, Ledger>();
  /** When each object under `actors/` was last written, virtual ms. */
  readonly #writtenAt = new Map<string, number>();
  readonly #fail: Fail;
  readonly #now: () => number;

  /** `now`: virtual ms, for the records and messages. */
  constructor(fail: Fail, now: () => number) {
    this.#fail = fail;
    this.#now = now;
  }

  #ledger(actor: string): Ledger {
    let ledger = this.#ledgers.get(actor);
    if (!ledger) {
      ledger = {
        acked: new Map(),
        committing: new Map(),
        deletes: [],
        lastGeneration: 0,
        takers: new Map(),
        bases: new Map(),
        written: new Set(),
        sent: new Map(),
      };
      this.#ledgers.set(actor, ledger);
    }
    return ledger;
  }

  /** A write committed at its owner (a durable one before its upload). */
  committed(actor: string, op: Op): void {
    if (op.kind === "durable") this.#ledger(actor).committing.set(op.id, this.#now());
  }

  /** A durable write was acknowledged to its client, at `txid`. */
  acked(actor: string, op: Op, txid: bigint): void {
    const ledger = this.#ledger(actor);
    const committedAt = ledger.committing.get(op.id);
    if (committedAt === undefined) {
      throw new Error(`durable write ${op.id} acknowledged without having committed`);
    }
    ledger.committing.delete(op.id);
    ledger.acked.set(op.id, { txid, committedAt, ackedAt: this.#now() });
  }

  /** Acknowledged durable writes of `actor`. */
  ackedCount(actor: string): number {
    return this.#ledger(actor).acked.size;
  }

  /** A delete of the actor ran. */
  deleted(actor: string): void {
    this.#ledger(actor).deletes.push(this.#now());
  }

  /**
   * `who` saw the actor's database `where` (in a read, after its restore, in
   * the bucket's chain): it holds `ids`, at `txid`. With `since`, only the
   * writes acknowledged before that virtual time count (a restore reads the
   * history as it was when it began).
   */
  saw(
    actor: string,
    who: string,
    where: string,
    ids: Set<number>,
    txid: bigint,
    since = Infinity,
  ): boolean {
    const ledger = this.#ledger(actor);
    const lastDelete = ledger.deletes.length > 0 ? ledger.deletes[ledger.deletes.length - 1] : -1;
    let maxTxid = 0n;
    for (const [id, w] of ledger.acked) {
      if (w.ackedAt >= since) continue;
      if (w.txid > maxTxid) maxTxid = w.txid;
      if (ids.has(id) || lastDelete > w.committedAt) continue;
      this.#fail(
        "durable-write-lost",
        `${who} ${where}: durable write ${id} (TXID ${w.txid}, acknowledged at ` +
          `${seconds(w.ackedAt)} s) is missing`,
      );
      return false;
    }
    if (txid < maxTxid) {
      this.#fail(
        "txid-backwards",
        `${who} ${where} stands at TXID ${txid}, below the acknowledged durable TXID ${maxTxid}`,
      );
      return false;
    }
    return true;
  }

  /** An event of the actor is sent at `generation`. */
  eventRuns(actor: string, generation: number, who: string): void {
    const ledger = this.#ledger(actor);
    if (generation < ledger.lastGeneration) {
      this.#fail(
        "event-generation-backwards",
        `${who} runs an event of ${actor} at generation ${generation} after one ran at ` +
          `${ledger.lastGeneration}`,
      );
      return;
    }
    ledger.lastGeneration = generation;
  }

  /** A take of generation `generation` by process `token` landed. */
  took(actor: string, generation: bigint, token: string): void {
    this.#ledger(actor).takers.set(generation, token);
  }

  /** The processes (tokens) whose takes of the actor landed at generations `low` to `high`. */
  takersBetween(actor: string, low: bigint, high: bigint): string[] {
    const takers: string[] = [];
    for (const [generation, token] of this.#ledger(actor).takers) {
      if (generation >= low && generation <= high) takers.push(token);
    }
    return takers;
  }

  /** Whether anything (a base, a file, a marker) was applied at the actor's generation. */
  wroteAt(actor: string, generation: bigint): boolean {
    return this.#ledger(actor).written.has(generation);
  }

  /** When the object at `key` was last written (virtual ms), if it was. */
  writtenAt(key: string): number | undefined {
    return this.#writtenAt.get(key);
  }

  /** The process that took the actor's generation, if known. */
  takerOf(actor: string, generation: bigint): string | undefined {
    return this.#ledger(actor).takers.get(generation);
  }

  /**
   * A write under `actors/` the store applied (`body` null: a delete, by a
   * collection or an erasure, which changes nothing here). `writer` names
   * the process, `token` is its process token; `names` finds the name of a
   * token for the message. Each is fenced by its generation; bases never go
   * back as generations go up.
   */
  applied(
    key: string,
    body: Uint8Array | null,
    writer: string,
    token: string | undefined,
    names: (token: string | undefined) => string,
  ): void {
    if (body === null) return;
    this.#writtenAt.set(key, this.#now());
    const marker = DELETED.exec(key);
    if (marker) {
      const { generation } = decodeDeleted(body, key);
      if (this.#fenced(marker[1], generation, key, writer, token, names)) {
        this.#ledger(marker[1]).written.add(generation);
      }
      return;
    }
    const wal = WAL.exec(key);
    if (!wal) return;
    const actor = wal[1];
    const generation = BigInt(`0x${wal[2]}`);
    if (!this.#fenced(actor, generation, key, writer, token, names)) return;
    const ledger = this.#ledger(actor);
    ledger.written.add(generation);
    if (wal[3] !== "base") return;
    const { txid } = decodeBase(body, key);
    for (const [g, t] of ledger.bases) {
      if ((g < generation && t > txid) || (g > generation && t < txid)) {
        this.#fail(
          "txid-backwards",
          `${writer} wrote the base of generation ${generation} of ${actor} at TXID ${txid}; ` +
            `generation ${g}'s is at ${t}`,
        );
        return;
      }
    }
    ledger.bases.set(generation, txid);
  }

  /**
   * An upload a process sent (retries included; the store may apply them
   * late and out of order): each hold's go on from its base, a file right
   * after the last, a snapshot at the last TXID or past it, a delete marker
   * past it.
   */
  sent(key: string, body: Uint8Array, writer: string): void {
    let actor: string, generation: bigint, first: bigint, last: bigint, kind: string;
    const marker = DELETED.exec(key);
    const wal = WAL.exec(key);
    if (marker) {
      const deleted = decodeDeleted(body, key);
      [actor, generation, first, last, kind] = [
        marker[1],
        deleted.generation,
        deleted.txid,
        deleted.txid,
        "marker",
      ];
    } else if (wal && wal[3] === "base") {
      const { txid } = decodeBase(body, key);
      [actor, generation, first, last, kind] = [wal[1], BigInt(`0x${wal[2]}`), txid, txid, "base"];
    } else if (wal) {
      const min = BigInt(`0x${wal[4]}`);
      [actor, generation, first, last] = [
        wal[1],
        BigInt(`0x${wal[2]}`),
        min,
        BigInt(`0x${wal[5]}`),
      ];
      kind = min === 1n ? "snapshot" : "file";
    } else return;
    const ledger = this.#ledger(actor);
    let sent = ledger.sent.get(generation);
    if (!sent) {
      sent = { last: undefined, keys: new Set() };
      ledger.sent.set(generation, sent);
    }
    const once = kind === "marker" ? `${key} ${last}` : key;
    if (sent.keys.has(once)) return;
    sent.keys.add(once);
    const before = sent.last;
    const ok = before === undefined
      // The first upload of a hold is its base (or, with no base stored, anything).
      ? true
      : kind === "file"
      ? first === before + 1n
      : kind === "snapshot"
      ? last >= before
      : kind === "marker"
      ? last > before
      : false;
    if (!ok) {
      this.#fail(
        "txid-backwards",
        `${writer} sent ${actor}'s ${kind} ${first}-${last} at generation ${generation}, ` +
          `whose uploads had reached ${before}`,
      );
      return;
    }
    sent.last = last;
  }

  #fenced(
    actor: string,
    generation: bigint,
    key: string,
    writer: string,
    token: string | undefined,
    names: (token: string | undefined) => string,
  ): boolean {
    const taker = this.#ledger(actor).takers.get(generation);
    if (token !== undefined && taker === token) return true;
    this.#fail(
      "upload-wrong-generation",
      `${writer} wrote ${key.slice("actors/".length)}, but generation ${generation} was taken ` +
        `by ${taker === undefined ? "no process" : names(taker)}`,
    );
    return false;
  }
}

function seconds(ms: number): string {
  return (ms / 1000).toFixed(3);
}
