/**
 * The decisions a node makes about its own requests and actors, each a
 * named function or a small object that the assembly (assemble.ts) wires
 * once: which holder's actors this node may take, how many client requests
 * it serves at once, how it signs and checks calls between nodes, and how
 * the lease's end is given to executors.
 *
 * @module
 */

import type { Clock, Random } from "../time/clock.ts";
import type { Logger } from "../log.ts";
import type { ActorKey } from "../actors/key.ts";
import type { ActorHolds } from "../actors/actor_host.ts";
import type { FailedOutcome } from "../actors/protocol.ts";
import {
  HeldElsewhere,
  type Hold,
  MalformedRecord,
  type OwnerRecord,
  type OwnershipRecords,
} from "../cluster/ownership.ts";
import type { CallSigner, ClusterPlane } from "../cluster/cluster_plane.ts";
import type { ClusterSecret } from "../security/cluster_secret.ts";
import { SIGNATURE_HEADER, signCall, verifyCall } from "../security/call_signature.ts";
import { NonceCache } from "../security/nonce_cache.ts";
import type { CallVerdict, SignedRequest } from "../http/port_context.ts";

/**
 * Whether an actor whose record names `record.node` is free for this node
 * to take.
 */
export type TakeRule = (record: OwnerRecord, actor: ActorKey) => boolean | Promise<boolean>;

/**
 * The cluster's rule (ADR 0004): another node's actors are free once its
 * heartbeat says released, or fenced long enough ago, in this node's view or
 * read fresh from the bucket when the view says no. A node merely not live
 * keeps its actors.
 *
 * @example
 * ```ts
 * import { freedByHeartbeat } from "./policies.ts";
 * import type { ClusterPlane } from "../cluster/cluster_plane.ts";
 * import type { OwnerRecord } from "../cluster/ownership.ts";
 * declare const plane: ClusterPlane;
 * declare const record: OwnerRecord;
 * const actor = { tenant: "default", class: "counter", name: "a" };
 * const rule = freedByHeartbeat(plane);
 * await rule(record, actor); // false while the holder renews its lease
 * ```
 */
export function freedByHeartbeat(plane: ClusterPlane): TakeRule {
  return (record) => plane.canTakeFromFresh(record);
}

/**
 * A standalone node on its own bucket: a record naming another id was
 * written under an earlier `--node-id` or host name, and is taken (logged).
 *
 * @example
 * ```ts
 * import { takenFromAnyId } from "./policies.ts";
 * import { createLogger } from "../log.ts";
 * const rule = takenFromAnyId(createLogger());
 * ```
 */
export function takenFromAnyId(log: Logger): TakeRule {
  return (record, actor) => {
    log.warn("taking an actor whose record names another node id", {
      actor: `${actor.tenant}/${actor.class}/${actor.name}`,
      holder: record.node,
    });
    return true;
  };
}

/**
 * The answer to the events waiting on a take that failed: 503 naming the
 * holder when another node holds the actor (the caller may be sent there),
 * 500 for a record that cannot be read, 503 for anything else the take met
 * (the bucket did not answer, the lease was not valid).
 *
 * @example
 * ```ts
 * import { takeFailure } from "./policies.ts";
 * import { HeldElsewhere, type OwnerRecord } from "../cluster/ownership.ts";
 * declare const record: OwnerRecord;
 * const key = "default/counter/a";
 * takeFailure(new HeldElsewhere(key, record)); // { status: 503, heldBy: record.node, ... }
 * ```
 */
export function takeFailure(error: unknown): FailedOutcome {
  if (error instanceof HeldElsewhere) {
    return {
      kind: "failed",
      status: 503,
      message: `the actor is held by another node: ${error.message}; retry`,
      heldBy: error.record.node,
    };
  }
  if (error instanceof MalformedRecord) {
    return { kind: "failed", status: 500, message: error.message };
  }
  return {
    kind: "failed",
    status: 503,
    message: "the bucket did not answer while taking the actor; retry",
  };
}

/**
 * The holds of an actor host over the ownership records: a take by `rule`,
 * and no record written unless `mayWrite` (the lease is valid); a failed
 * take answered by {@linkcode takeFailure}.
 *
 * @example
 * ```ts
 * import { freedByHeartbeat, ownershipHolds } from "./policies.ts";
 * import type { ClusterPlane } from "../cluster/cluster_plane.ts";
 * import type { OwnershipRecords } from "../cluster/ownership.ts";
 * declare const plane: ClusterPlane;
 * declare const ownership: OwnershipRecords;
 * const holds = ownershipHolds(ownership, freedByHeartbeat(plane), () => plane.valid());
 * ```
 */
export function ownershipHolds(
  ownership: OwnershipRecords,
  rule: TakeRule,
  mayWrite: () => boolean,
  onTake?: (hold: Hold) => void,
): ActorHolds<Hold> {
  return {
    take: async (actor) => {
      const hold = await ownership.take(actor, {
        canTakeFrom: (record) => rule(record, actor),
        mayWrite,
      });
      // Before any event is sent under the hold.
      onTake?.(hold);
      return hold;
    },
    takeFailure,
    release: (hold) => ownership.release(hold),
    stillHolds: (hold) => ownership.stillHolds(hold),
  };
}

/**
 * The client requests a node serves at once (`--max-connections`, lowered
 * to fit the open-file limit): a request takes its place before its body
 * is read and gives it back when answered.
 *
 * @example
 * ```ts
 * import { Admission } from "./policies.ts";
 * const admission = new Admission(1);
 * const release = admission.admit();
 * console.log(typeof admission.admit()); // "string": the 503's message
 * if (typeof release === "function") release();
 * ```
 */
export class Admission {
  #underWay = 0;

  constructor(readonly max: number) {}

  /** The place's release, or the 503's message when every place is taken. */
  admit(): (() => void) | string {
    if (this.#underWay >= this.max) {
      return `this node serves ${this.max} requests at once (--max-connections); retry`;
    }
    this.#underWay++;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.#underWay--;
    };
  }

  /** Requests holding a place now. */
  get underWay(): number {
    return this.#underWay;
  }
}

/**
 * Signed calls between nodes: the cluster secret once read signs this
 * node's calls and checks its peers', each accepted once (its nonce).
 *
 * @example
 * ```ts
 * import { CallSecurity } from "./policies.ts";
 * import type { SignedRequest } from "../http/port_context.ts";
 * import { loadClusterSecret } from "../security/cluster_secret.ts";
 * import type { Bucket } from "../bucket/bucket.ts";
 * import { systemClock as clock, systemRandom as random } from "../time/clock.ts";
 * import { createLogger } from "../log.ts";
 * declare const bucket: Bucket;
 * declare const request: SignedRequest;
 * const log = createLogger();
 * const calls = new CallSecurity({ nodeId: "a", clock, random, log });
 * calls.secret = await loadClusterSecret(bucket, { random, log });
 * const verdict = calls.verify(request);
 * ```
 */
export class CallSecurity {
  /** The cluster secret, once read; calls between nodes wait for it. */
  secret: ClusterSecret | undefined;
  readonly #nodeId: string;
  readonly #clock: Clock;
  readonly #random: Random;
  readonly #log: Logger;
  readonly #nonces: NonceCache;

  constructor(options: { nodeId: string; clock: Clock; random: Random; log: Logger }) {
    this.#nodeId = options.nodeId;
    this.#clock = options.clock;
    this.#random = options.random;
    this.#log = options.log;
    this.#nonces = new NonceCache({ clock: options.clock });
  }

  /** Signs a call to another node; throws while the secret is not read. */
  readonly sign: CallSigner = (call) => {
    if (!this.secret) throw new Error("the cluster secret is not read yet");
    return signCall(this.secret, call, { clock: this.#clock, random: this.#random });
  };

  /** Checks a request's call signature; `undefined` for a request without one. */
  verify(request: SignedRequest): CallVerdict | undefined {
    if (!request.headers.has(SIGNATURE_HEADER)) return undefined;
    if (!this.secret) {
      return {
        ok: false,
        status: 503,
        reason: "this node has not read the cluster secret yet; retry",
      };
    }
    const verified = verifyCall(this.secret, { thisNode: this.#nodeId, ...request }, {
      clock: this.#clock,
      nonces: this.#nonces,
    });
    if (verified.ok) return verified;
    this.#log.warn("refused a signed call", { reason: verified.reason });
    // A full nonce cache or a malformed secret says nothing against the call.
    return { ok: false, status: verified.kind === "bad" ? 403 : 503, reason: verified.reason };
  }
}

/**
 * The wall-clock time of `monotonic` on `clock`: how the lease's end is
 * given to executors, which read the wall clock.
 *
 * @example
 * ```ts
 * import { wallClockOf } from "./policies.ts";
 * import { systemClock } from "../time/clock.ts";
 * wallClockOf(systemClock, systemClock.monotonic() + 1000); // about Date.now() + 1000
 * ```
 */
export function wallClockOf(clock: Clock, monotonic: number): number {
  return clock.now() + (monotonic - clock.monotonic());
}
