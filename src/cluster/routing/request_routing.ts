/**
 * Where a node sends an actor's request: run here, forwarded once to the
 * node that holds the actor, kept for a takeover (the spec's failover wait),
 * or answered 503. One place for client requests and actors.call, used by
 * `src/node/assemble.ts` for every node, the simulator's included (`sim/`).
 *
 * @module
 */

import type { ActorKey } from "../../actors/key.ts";
import type { ActorRequest, AlarmFiring, EventOutcome } from "../../actors/protocol.ts";
import type { FireResult } from "../../alarms/alarm_timers.ts";
import { ALARM_FIRED_STATUS } from "../../alarms/alarm_event.ts";
import type { CallNotRun } from "../../actors/call_router.ts";
import type { Logger } from "../../log.ts";
import { FORWARDED_BY_HEADER } from "../../net/headers.ts";
import type { ClusterPlane } from "../cluster_plane.ts";
import type { FailoverWaits } from "../failover_wait.ts";
import { MalformedRecord } from "../ownership.ts";
import type { Route } from "./router.ts";
import type { UnreadBody } from "../../http/unread_body.ts";

/** What {@linkcode RequestRouting} needs of the node. */
export interface RequestRoutingOptions {
  /** The cluster side; `undefined` on a standalone node. Not valid before it started. */
  plane: ClusterPlane | undefined;
  /** Whether this node holds the actor now (ActorHost.holds). */
  holdsHere: (actor: ActorKey) => boolean;
  /** Runs an event here (ActorHost.dispatch): takes the actor if it must. */
  dispatch: (key: ActorKey, request: ActorRequest, special?: AlarmFiring) => Promise<EventOutcome>;
  /** The node's kept requests. */
  waits: FailoverWaits;
  log: Logger;
}

/**
 * The answer to an ownership record that could not be read while routing:
 * 503 (retry) when the bucket did not answer, 500 for a record that cannot
 * be decoded.
 *
 * @example
 * ```ts
 * import { lookupFailure } from "./request_routing.ts";
 * declare const error: unknown;
 * const { status, message } = lookupFailure(error);
 * ```
 */
export function lookupFailure(error: unknown): { status: number; message: string } {
  return error instanceof MalformedRecord
    ? { status: 500, message: error.message }
    : { status: 503, message: "the bucket did not answer while looking up the actor; retry" };
}

/**
 * What `work` resolves to, or `undefined` once it rejects or `signal`
 * aborts first (the work goes on, its result unread).
 */
function untilAborted<T>(work: Promise<T>, signal: AbortSignal): Promise<T | undefined> {
  if (signal.aborted) {
    work.catch(() => {});
    return Promise.resolve(undefined);
  }
  return new Promise((resolve) => {
    const onAbort = () => resolve(undefined);
    signal.addEventListener("abort", onAbort, { once: true });
    work.then(resolve, () => resolve(undefined)).finally(() =>
      signal.removeEventListener("abort", onAbort)
    );
  });
}

/** The answer to a forwarded request for an actor this node does not hold: nothing ran. */
function notHeld(holder: string): EventOutcome {
  return {
    kind: "failed",
    status: 421,
    message: `this node does not hold the actor; its record names node ${holder}`,
    notHeld: holder,
  };
}

/** Two nodes in a row said they do not hold the actor: it is moving; the client retries. */
function movedMeanwhile(holder: string): EventOutcome & { kind: "failed" } {
  return {
    kind: "failed",
    status: 503,
    message: `the actor moved while this request was routed (last to node ${holder}); retry`,
  };
}

/** What an alarm's event carries as its request: nothing (the executor runs on-alarm). */
/**
 * How many times a request routed here is run when each take finds the
 * actor held while the record, read again, still routes it here: a second
 * take sees the record the race left, a third would only add load.
 */
const RUN_HERE_TRIES = 2;

const ALARM_REQUEST: ActorRequest = {
  method: "POST",
  path: "/",
  query: "",
  headers: [],
  body: new Uint8Array(0),
};

/** How an alarm's event ended, for the node's timer. */
function alarmResult(outcome: EventOutcome): FireResult {
  if (outcome.kind !== "response") return "failed";
  return outcome.response.status === ALARM_FIRED_STATUS ? "fired" : "not-due";
}

/** The 503 of a kept request that was not served in time. */
function notReachable(): EventOutcome {
  return { kind: "failed", status: 503, message: "the actor's node is not reachable; retry" };
}

/**
 * Routes a node's actor requests and calls.
 *
 * @example
 * ```ts
 * import { RequestRouting, type RequestRoutingOptions } from "./request_routing.ts";
 * import type { ActorRequest } from "../../actors/protocol.ts";
 * declare const o: RequestRoutingOptions;
 * declare const request: ActorRequest;
 * declare const signal: AbortSignal;
 * const { plane, holdsHere, dispatch, waits, log } = o;
 * const key = { tenant: "default", class: "counter", name: "a" };
 * const routing = new RequestRouting({ plane, holdsHere, dispatch, waits, log });
 * const outcome = await routing.route(key, request, { signal });
 * ```
 */
export class RequestRouting {
  readonly #o: RequestRoutingOptions;

  constructor(options: RequestRoutingOptions) {
    this.#o = options;
  }

  /**
   * A client's request (or one another node forwarded here, which carries
   * {@linkcode FORWARDED_BY_HEADER}): its outcome. `client.signal` aborts
   * when the client leaves; read only by a failover wait.
   */
  async route(
    key: ActorKey,
    request: ActorRequest,
    client?: { readonly signal: AbortSignal; readonly body?: UnreadBody },
  ): Promise<EventOutcome> {
    const cluster = this.#o.plane;
    // A body left unread until the route is known: read where the actor
    // runs, sent on as it is read where it is forwarded.
    let unread = client?.body;
    const inHand = async (): Promise<ActorRequest | EventOutcome> => {
      if (!unread) return request;
      const body = await unread.read();
      unread = undefined;
      if (!(body instanceof Uint8Array)) return body;
      return request = { ...request, body };
    };
    if (!cluster) {
      const whole = await inHand();
      return "kind" in whole ? whole : await this.#o.dispatch(key, whole);
    }
    if (!cluster.valid()) {
      return { kind: "failed", status: 503, message: "this node's lease is not valid; retry" };
    }
    const forwarded = request.headers.some(([name]) => name === FORWARDED_BY_HEADER);
    let where;
    try {
      // A streamed body cannot be sent twice: the record decides, not the memory.
      where = await cluster.route(key, forwarded, this.#o.holdsHere, unread !== undefined);
    } catch (error) {
      this.#o.log.warn("could not read the actor's ownership record", {
        actor: `${key.tenant}/${key.class}/${key.name}`,
        error: String(error),
      });
      return { kind: "failed", ...lookupFailure(error) };
    }
    for (let sent = 0;; sent++) {
      if (where.kind === "local") {
        const whole = await inHand();
        if ("kind" in whole) return whole;
        const ran = await this.#runHere(cluster, key, whole, forwarded);
        if (ran.kind === "response" || ran.kind === "failed") return ran;
        where = ran;
      }
      if (where.kind === "not-held") return notHeld(where.node);
      if (where.kind !== "forward") break;
      const outcome = await cluster.peers.forward(
        where.address,
        where.node,
        key,
        request,
        client?.signal,
        unread?.streamed(),
      );
      // A remembered holder that could not be reached read nothing (it may
      // have just stopped): the record decides, as it would have at once.
      const unsentToMemory = outcome.kind === "failed" && outcome.unsent === true &&
        where.remembered === true;
      if (outcome.kind !== "not-held" && !unsentToMemory) return outcome;
      // Nothing ran there: routed again from the record as it is now, once,
      // and only with its body whole (part of a streamed one is gone).
      if (sent > 0 || unread?.started) {
        return outcome.kind === "not-held" ? movedMeanwhile(outcome.holder) : outcome;
      }
      const tried = where.node;
      try {
        where = await cluster.route(key, false, this.#o.holdsHere, true);
      } catch (error) {
        return { kind: "failed", ...lookupFailure(error) };
      }
      // Its record names the node that could not be reached: its 503, not a
      // second try, nor a wait (the spec's "the request that finds it out
      // gets the 503"; the ones after it are kept).
      const sameNode = (where.kind === "forward" || where.kind === "unavailable") &&
        where.node === tried;
      if (unsentToMemory && sameNode) return outcome;
    }
    // Only what cannot have run yet and does no harm late is kept: a GET
    // or HEAD without a body that came from outside.
    const keepable = where.ownerDown && !forwarded && request.body.length === 0 && !unread &&
      (request.method === "GET" || request.method === "HEAD");
    if (!keepable) return { kind: "failed", status: 503, message: where.message };
    const kept = await this.keepUntilTaken<EventOutcome>(key, where.node, client?.signal, {
      here: async () => {
        const served = await this.#o.dispatch(key, request);
        // Another node took it first: its next look forwards there.
        return served.kind === "failed" && served.heldBy !== undefined ? "taken" : served;
      },
      there: async (next) => {
        const sent = await cluster.peers.forward(
          next.address,
          next.node,
          key,
          request,
          client?.signal,
        );
        // Nothing ran there, and it is forgotten: the next look reads the record.
        return sent.kind === "not-held" ? "not-held" : sent;
      },
      refused: (message) => ({ kind: "failed", status: 503, message }),
      notReachable,
    });
    return kept ?? notReachable();
  }

  /**
   * Keeps a request for `key`, whose holder `holder` is gone or going,
   * until the actor is free (the spec's failover wait): about once a second
   * while the holder is gone or freed, without a bucket request while it is
   * only stale, the route is looked up again; `here` serves it once it routes
   * here (`"taken"`: another node won the actor, look again), `there` sends
   * it to the node that took it (`"not-held"`: look again). Undefined when
   * the client left (`signal`); `notReachable` when the wait ends unserved.
   * A GET, a HEAD and a WebSocket upgrade from outside are kept this way.
   */
  async keepUntilTaken<T>(
    key: ActorKey,
    holder: string,
    signal: AbortSignal | undefined,
    serve: {
      here: () => Promise<T | "taken">;
      there: (where: Extract<Route, { kind: "forward" }>) => Promise<T | "not-held">;
      refused: (message: string) => T;
      notReachable: () => T;
    },
  ): Promise<T | undefined> {
    const cluster = this.#o.plane!;
    return await this.#o.waits.keep<T>(
      `${key.tenant}/${key.class}/${key.name}`,
      signal,
      async (waitEnds) => {
        if (!cluster.valid()) {
          return { wait: false, outcome: "lease_lost", value: serve.notReachable() };
        }
        // While the holder's heartbeat is only stale, no bucket request:
        // the fence (this node's or a peer's, seen at a listing) frees it.
        const view = cluster.membership;
        if (!view.isGone(holder) && !view.isLive(holder)) return { wait: true };
        // Freed, or live again, or live but suspected (it refused this
        // node's connections): the record is read, about once a second.
        const next = await untilAborted(cluster.route(key, false, this.#o.holdsHere), waitEnds);
        if (!next || (next.kind === "unavailable" && next.ownerDown)) return { wait: true };
        if (next.kind === "local") {
          const served = await serve.here();
          if (served === "taken") return { wait: true };
          return { wait: false, outcome: "served", value: served };
        }
        if (next.kind === "forward") {
          const sent = await serve.there(next);
          if (sent === "not-held") return { wait: true };
          return { wait: false, outcome: "forwarded", value: sent };
        }
        if (next.kind === "not-held") return { wait: true };
        return { wait: false, outcome: "forwarded", value: serve.refused(next.message) };
      },
      serve.notReachable,
    );
  }

  /**
   * An actors.call's event: run here, or sent signed to the holder, once.
   * A call is never kept for a takeover: its caller gets the error.
   */
  async routeCall(
    target: ActorKey,
    request: ActorRequest,
    call: { caller: string; chain: readonly string[] },
  ): Promise<EventOutcome | CallNotRun> {
    const cluster = this.#o.plane;
    if (!cluster) return await this.#o.dispatch(target, request);
    if (!cluster.valid()) {
      return { kind: "not-run", error: "this node's lease is not valid; retry" };
    }
    let where;
    try {
      where = await cluster.route(target, false, this.#o.holdsHere);
    } catch (error) {
      return { kind: "not-run", error: lookupFailure(error).message };
    }
    for (let sent = 0;; sent++) {
      if (where.kind === "local") {
        const ran = await this.#runHere(cluster, target, request, false);
        if (ran.kind === "response" || ran.kind === "failed") return ran;
        where = ran;
      }
      if (where.kind === "not-held") {
        return { kind: "not-run", error: `the actor is held by node ${where.node}; retry` };
      }
      if (where.kind !== "forward") return { kind: "not-run", error: where.message };
      const outcome = await cluster.peers.forwardCall(
        where.address,
        where.node,
        target,
        request,
        call,
      );
      if (outcome.kind !== "not-held") return outcome;
      // Nothing ran there: routed again from the record as it is now, once.
      if (sent > 0) return { kind: "not-run", error: movedMeanwhile(outcome.holder).message };
      try {
        where = await cluster.route(target, false, this.#o.holdsHere, true);
      } catch (error) {
        return { kind: "not-run", error: lookupFailure(error).message };
      }
    }
  }

  /**
   * An alarm's event for `key`, from the entry (or timer) due at `due`:
   * run here, taking the actor if it is free, as a request would be; left
   * to the node that holds it (`elsewhere`: that node armed the alarm when
   * it took the actor). An alarm is never forwarded nor kept for a takeover.
   */
  async routeAlarm(key: ActorKey, due: number): Promise<FireResult> {
    const alarm = { kind: "alarm", due } as const;
    const cluster = this.#o.plane;
    if (!cluster) return alarmResult(await this.#o.dispatch(key, ALARM_REQUEST, alarm));
    if (!cluster.valid()) return "later";
    let where;
    try {
      where = await cluster.route(key, false, this.#o.holdsHere);
    } catch {
      return "later";
    }
    if (where.kind === "forward" || where.kind === "not-held") return "elsewhere";
    if (where.kind !== "local") return "later";
    const outcome = await this.#o.dispatch(key, ALARM_REQUEST, alarm);
    // Another node won the actor meanwhile: it fires the alarm.
    if (outcome.kind === "failed" && outcome.heldBy !== undefined) return "elsewhere";
    return alarmResult(outcome);
  }

  /**
   * Runs a request routed here. A take that found the actor held (another
   * node won the race for it, or its holder is not gone as the process the
   * record names) routes it again on the record as it is now: the outcome,
   * or where it goes instead (never here). When the record routes it here
   * again (the take lost its races, or read a heartbeat the route read
   * newer), it is run once more; a record that cannot be read then is the
   * bucket's 503, not "held by another node".
   */
  async #runHere(
    cluster: ClusterPlane,
    key: ActorKey,
    request: ActorRequest,
    forwarded: boolean,
  ): Promise<EventOutcome | Exclude<Route, { kind: "local" }>> {
    let outcome = await this.#o.dispatch(key, request);
    for (let tries = 1;; tries++) {
      if (outcome.kind !== "failed" || outcome.heldBy === undefined) return outcome;
      let again;
      try {
        again = await cluster.route(key, forwarded, this.#o.holdsHere);
      } catch (error) {
        return { kind: "failed", ...lookupFailure(error) };
      }
      if (again.kind !== "local") return again;
      if (tries === RUN_HERE_TRIES) return outcome;
      outcome = await this.#o.dispatch(key, request);
    }
  }
}
