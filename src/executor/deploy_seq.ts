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
import { EventFailure } from "../actors/event_failure.ts";

/** The meta key holding the highest deploy seq the actor ran. */
export const DEPLOY_SEQ_KEY = "deploy_seq";

/** The meta key holding the line that seq counts in (manifest.ts `AppVersion.line`). */
export const DEPLOY_LINE_KEY = "deploy_line";

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
 * ```ts
 * import { actorDeploySeq } from "./deploy_seq.ts";
 * import type { ActorDatabase } from "../sqlite/actor_database.ts";
 * declare const db: ActorDatabase;
 * actorDeploySeq(db); // 2
 * ```
 */
export function actorDeploySeq(db: ActorDatabase): number {
  const value = Number(db.getMeta(DEPLOY_SEQ_KEY) ?? 0);
  return Number.isSafeInteger(value) && value > 0 ? value : 0;
}

/**
 * Before an actor's code runs under the version `nodeSeq` of the line
 * `nodeLine`: throws {@linkcode BehindActor} when the actor ran a later
 * seq of that line; records the version when it is later than the actor's,
 * or of another line (a new app of the tenant, or the app deployed anew
 * after its `current` was deleted: its seqs start again), as autocommitted
 * writes captured with the event's commit, and answers `true`, so the
 * event's answer waits until they landed. A node that follows no app
 * (`nodeSeq` 0) checks nothing. `servesBehind` is the simulator's planted
 * bug (sim/variants.ts): an actor that ran a later seq is served anyway,
 * its record left as it is. Never set in `serve`.
 *
 * @example
 * ```ts
 * import { enterDeploySeq } from "./deploy_seq.ts";
 * import type { ActorDatabase } from "../sqlite/actor_database.ts";
 * declare const db: ActorDatabase;
 * declare const actor: { seqToLand: boolean };
 * if (enterDeploySeq(db, 3, "0123456789abcdef")) actor.seqToLand = true;
 * ```
 */
export function enterDeploySeq(
  db: ActorDatabase,
  nodeSeq: number,
  nodeLine: string,
  servesBehind = false,
): boolean {
  if (nodeSeq === 0) return false;
  const ran = actorDeploySeq(db);
  const ranLine = db.getMeta(DEPLOY_LINE_KEY) ?? "";
  // Seqs compare within a line; another line's is taken whatever it is.
  if (ran === 0 || ranLine === nodeLine) {
    if (ran > nodeSeq && servesBehind) return false;
    if (ran > nodeSeq) throw new BehindActor(ran, nodeSeq);
    if (ran === nodeSeq) return false;
  }
  // The seq first: torn after it, the line still differs and is taken again.
  db.setMeta(DEPLOY_SEQ_KEY, String(nodeSeq));
  if (ranLine !== nodeLine) db.setMeta(DEPLOY_LINE_KEY, nodeLine);
  return true;
}
