/**
 * Which nodes may take actors handed over by a drain or a move: a pure
 * decision over heartbeats (the spec: "another live node serving the same
 * app"; a move's target must be "live, serve the same app, not be draining
 * or blocked, and run a version that takes actors (heartbeat line 11,
 * take)"). The same rule names why a node is not one, for the warnings of
 * `wasmkeep actor move` and the log.
 *
 * @module
 */

import type { ActorKey } from "../actor_key.ts";
import { actorKeyString } from "../actors/key.ts";
import type { Heartbeat } from "../cluster/heartbeat.ts";

/** The node handing actors over, as the rule compares others with it. */
export interface HandingNode {
  nodeId: string;
  /** `tenant/app` it serves, undefined for a node serving `--actor` classes. */
  app: string | undefined;
}

/**
 * Why the node of `heartbeat` may not take actors from `from`, or undefined
 * when it may. `live` is whether its heartbeat is live by the cluster's rule
 * (the caller's view decides that).
 *
 * @example
 * ```ts
 * import { whyNotTaker } from "./takers.ts";
 * import type { Heartbeat } from "../cluster/heartbeat.ts";
 * declare const heartbeat: Heartbeat;
 * whyNotTaker(heartbeat, true, { nodeId: "a", app: "acme/shop" }); // undefined, or a reason
 * ```
 */
export function whyNotTaker(
  heartbeat: Heartbeat,
  live: boolean,
  from: HandingNode,
): string | undefined {
  if (heartbeat.nodeId === from.nodeId) return "it is this node";
  if (!live || heartbeat.lease !== "live") return "it is not live";
  if (heartbeat.app !== from.app) {
    const tenant = (app: string | undefined) => app?.split("/")[0] ?? "default";
    return tenant(heartbeat.app) === tenant(from.app)
      ? `it serves ${heartbeat.app ?? "--actor classes"}, not ${from.app ?? "--actor classes"}`
      : `it serves another tenant (${tenant(heartbeat.app)})`;
  }
  if (heartbeat.state !== "serving") return `it is ${heartbeat.state}`;
  if (!heartbeat.takesMoved) return "its version does not take moved actors";
  return undefined;
}

/** A node that may take actors, and where to reach it. */
export interface Taker {
  node: string;
  address: string;
}

/**
 * The node that takes `actor` among `takers`, skipping `skipped` (peers that
 * failed to take an event lately): by rendezvous hashing, so that each
 * actor goes to one node, the same one for its alarm and its requests, and
 * a node that joins or leaves moves only its share. Undefined when none is
 * left (a drain is then stuck).
 *
 * @example
 * ```ts
 * import { pickTaker } from "./takers.ts";
 * const actor = { tenant: "default", class: "counter", name: "a" };
 * const takers = [{ node: "b", address: "http://b" }, { node: "c", address: "http://c" }];
 * pickTaker(takers, actor, new Set(["b"]))?.node; // "c"
 * ```
 */
export function pickTaker(
  takers: readonly Taker[],
  actor: ActorKey,
  skipped: ReadonlySet<string> = new Set(),
): Taker | undefined {
  const id = actorKeyString(actor);
  let best: Taker | undefined;
  let bestScore = -1;
  for (const taker of takers) {
    if (skipped.has(taker.node)) continue;
    const score = fnv1a(`${taker.node}\n${id}`);
    if (score > bestScore || (score === bestScore && taker.node < best!.node)) {
      best = taker;
      bestScore = score;
    }
  }
  return best;
}

/** FNV-1a, 32 bits: spreads actors over nodes; not a secret. */
function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return hash;
}
