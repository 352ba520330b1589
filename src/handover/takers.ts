/**
 * Which nodes may take actors handed over by a drain or a move: a pure
 * decision over heartbeats (the spec: "another live node serving the same
 * app"; a move's target must be "live, serve the same app, not be draining
 * or blocked, and run a version that takes actors (heartbeat line 11,
 * take)"). The same rule names why a node is not one, for the warnings of
 * `wasmkeep actor move` and the log. A clean stop's alarms keep to the
 * same app too, on both sides: the peers it tries, and what a peer arms
 * (two tenants may share a bucket prefix, and their nodes see each other).
 *
 * @module
 */

import type { ActorKey } from "../actor_key.ts";
import { actorKeyString, DEFAULT_TENANT } from "../actors/key.ts";
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
  const notSameApp = whyNotSameApp(heartbeat, live, from);
  if (notSameApp) return notSameApp;
  if (heartbeat.state !== "serving") return `it is ${heartbeat.state}`;
  if (!heartbeat.takesMoved) return "its version does not take moved actors";
  return undefined;
}

/**
 * The first half of {@linkcode whyNotTaker}: why the node of `heartbeat` is
 * not another live node serving the same app as `from`, whatever its
 * state and version (what a clean stop's alarms need of a peer).
 *
 * @example
 * ```ts
 * import { whyNotSameApp } from "./takers.ts";
 * import type { Heartbeat } from "../cluster/heartbeat.ts";
 * declare const heartbeat: Heartbeat;
 * whyNotSameApp(heartbeat, true, { nodeId: "a", app: "acme/shop" }); // undefined, or a reason
 * ```
 */
export function whyNotSameApp(
  heartbeat: Heartbeat,
  live: boolean,
  from: HandingNode,
): string | undefined {
  if (heartbeat.nodeId === from.nodeId) return "it is this node";
  if (!live || heartbeat.lease !== "live") return "it is not live";
  if (heartbeat.app === from.app) return undefined;
  return tenantOf(heartbeat.app) === tenantOf(from.app)
    ? `it serves ${served(heartbeat.app)}, not ${served(from.app)}`
    : `it serves another tenant (${tenantOf(heartbeat.app)})`;
}

/** The tenant of a node serving `app` (`--actor` classes are the default tenant's). */
const tenantOf = (app: string | undefined) => app?.split("/")[0] ?? DEFAULT_TENANT;

const served = (app: string | undefined) => app ?? "--actor classes";

/**
 * The peers a clean stop hands its alarms to, in the order to try them:
 * the live nodes serving the same app as `from`, those serving first. A
 * draining, drained or stuck one comes after them, still better than the
 * sweep's late firing: it sends what it fires to the actor's taker.
 *
 * @example
 * ```ts
 * import { alarmTakers } from "./takers.ts";
 * import type { ReadablePeerView } from "../cluster/membership.ts";
 * declare const live: ReadablePeerView[];
 * alarmTakers(live, { nodeId: "a", app: "acme/shop" }).map((view) => view.nodeId);
 * ```
 */
export function alarmTakers<T extends { readonly heartbeat: Heartbeat }>(
  live: readonly T[],
  from: HandingNode,
): T[] {
  const same = live.filter((view) => whyNotSameApp(view.heartbeat, true, from) === undefined);
  return [
    ...same.filter((view) => view.heartbeat.state === "serving"),
    ...same.filter((view) => view.heartbeat.state !== "serving"),
  ];
}

/**
 * Why a node serving `app` (undefined for `--actor` classes) refuses alarms
 * a peer handed over, arming none, or undefined when it arms them: an
 * alarm of another tenant than its own, or a sender serving another app
 * (`sender`: the sender's `tenant/app`, null for `--actor` classes,
 * undefined when its version did not say).
 *
 * @example
 * ```ts
 * import { whyRefuseAlarms } from "./takers.ts";
 * const key = { tenant: "acme", class: "reminder", name: "ann" };
 * whyRefuseAlarms([key], "acme/shop", "globex/shop");
 * // "this node serves tenant globex, not acme: no alarm armed"
 * ```
 */
export function whyRefuseAlarms(
  keys: readonly ActorKey[],
  sender: string | null | undefined,
  app: string | undefined,
): string | undefined {
  const tenant = tenantOf(app);
  const foreign = keys.find((key) => key.tenant !== tenant);
  if (foreign) return `this node serves tenant ${tenant}, not ${foreign.tenant}: no alarm armed`;
  const from = sender ?? undefined;
  if (sender === undefined || from === app) return undefined;
  return `this node serves ${served(app)}, not ${served(from)}: no alarm armed`;
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
