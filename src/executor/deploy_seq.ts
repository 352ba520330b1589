/**
 * The deploy seq an actor ran (ADR 0008): recorded in its WasmKeep table
 * with the first event it runs under a version, so it follows the actor
 * from node to node in its history. An executor whose version is older
 * than the one an actor already ran refuses the actor's events: an actor
 * never runs older code than it already ran.
 *
 * @module
 */

import type { ActorDatabase } from "../sqlite/actor_database.ts";
import { EventFailure } from "./event_failure.ts";

/** The meta key holding the highest deploy seq the actor ran. */
export const DEPLOY_SEQ_KEY = "deploy_seq";

/** Raised for an actor that ran a later version than this executor has. */
export class BehindActor extends EventFailure {
  /**
   * @example
   * ```ts
   * import { BehindActor } from "./deploy_seq.ts";
   * new BehindActor(3, 2).status; // 503
   * ```
   */
  constructor(readonly actorSeq: number, nodeSeq: number) {
    super(
      503,
      `this node has the app's version seq ${nodeSeq}, older than the seq ${actorSeq} this actor ran; it is updating; retry`,
    );
    this.name = "BehindActor";
  }
}

/**
 * The seq the actor ran, 0 if none was recorded (an actor of a node that
 * follows no app, or one that never ran under a deploy).
 *
 * @example
 * ```ts ignore
 * actorDeploySeq(db); // 2
 * ```
 */
export function actorDeploySeq(db: ActorDatabase): number {
  const value = Number(db.getMeta(DEPLOY_SEQ_KEY) ?? 0);
  return Number.isSafeInteger(value) && value > 0 ? value : 0;
}

/**
 * Before an actor's code runs under `nodeSeq`: throws {@linkcode BehindActor}
 * when the actor ran a later seq; records `nodeSeq` when it is later than
 * the actor's (an autocommitted write, captured with the event's commit)
 * and answers `true`, so the event's answer waits until it landed. A node
 * that follows no app (`nodeSeq` 0) checks nothing. `servesBehind` is the
 * simulator's planted bug (sim/variants.ts): an actor that ran a later seq
 * is served anyway, its record left as it is. Never set in `serve`.
 *
 * @example
 * ```ts ignore
 * if (enterDeploySeq(db, 3)) actor.seqToLand = true;
 * ```
 */
export function enterDeploySeq(
  db: ActorDatabase,
  nodeSeq: number,
  servesBehind = false,
): boolean {
  if (nodeSeq === 0) return false;
  const ran = actorDeploySeq(db);
  if (ran > nodeSeq && servesBehind) return false;
  if (ran > nodeSeq) throw new BehindActor(ran, nodeSeq);
  if (ran === nodeSeq) return false;
  db.setMeta(DEPLOY_SEQ_KEY, String(nodeSeq));
  return true;
}
