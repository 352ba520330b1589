/**
 * What `wasmkeep actor move` does in the bucket (the spec's "Moving one
 * actor"): checks the target as `cluster status` counts nodes and as the
 * hand-over picks takers, then writes the move request. An id no live node
 * has is refused unless forced; a live target that may not take the actor
 * now (draining, too old to take moved actors, serving another tenant) gets
 * a warning and the request is written: the owner keeps the actor until the
 * target may take it or the request expires.
 *
 * @module
 */

import type { ActorKey } from "../actor_key.ts";
import type { Bucket } from "../bucket/bucket.ts";
import { moveKey } from "../bucket/keys.ts";
import { actorKeyString, actorNameProblem, classNameProblem } from "../actors/key.ts";
import { DEPLOYED_APP_NAME } from "../deploy/app_name.ts";
import type { Heartbeat } from "../cluster/heartbeat.ts";
import { ClusterToolRefusal } from "../cluster/fence_forget.ts";
import {
  type ClusterToolOptions,
  type NodeStatus,
  readNodeStatus,
  whyNotLive,
} from "../cluster/status.ts";
import { assertNodeId } from "../node_id.ts";
import { type MoveRequest, MoveRequests } from "./move_request.ts";
import { whyNotTaker } from "./takers.ts";

/**
 * Parses `TENANT/CLASS/NAME` as `wasmkeep actor move` takes it; throws a
 * `RangeError` saying what is wrong (the tenant's, the class's or the actor
 * name's rule).
 *
 * @example
 * ```ts
 * import { parseActorPath } from "./move_command.ts";
 * parseActorPath("acme/room/lobby"); // { tenant: "acme", class: "room", name: "lobby" }
 * ```
 */
export function parseActorPath(text: string): ActorKey {
  const parts = text.split("/");
  if (parts.length !== 3) {
    throw new RangeError(
      `'${text}' is not TENANT/CLASS/NAME (an actor's name holds no '/'; served with --actor, ` +
        `the tenant is default)`,
    );
  }
  const [tenant, className, name] = parts;
  if (!DEPLOYED_APP_NAME.test(tenant)) {
    throw new RangeError(
      `'${text}': the tenant '${tenant}' is not a tenant's name (lower-case letters, digits, ` +
        `'-' and '_', at most 64)`,
    );
  }
  const problem = classNameProblem(className) ?? actorNameProblem(name);
  if (problem !== undefined) throw new RangeError(`'${text}': ${problem}`);
  return { tenant, class: className, name };
}

/** Options of {@linkcode moveActor}. */
export interface MoveCommandOptions extends ClusterToolOptions {
  /** Write the request even when no live node has the target's id. */
  force?: boolean;
}

/** What {@linkcode moveActor} wrote, and what the operator should know of it. */
export interface MoveOutcome {
  /** The request written. */
  request: MoveRequest;
  /** Its object, `moves/<tenant>/<class>/<name>`. */
  key: string;
  /** The target's heartbeat as read, `null` when it has none. */
  target: NodeStatus | null;
  /** Why the target may not take the actor now, each in a sentence; empty when it may. */
  warnings: string[];
}

/**
 * Why the node of `heartbeat` may not take `actor` now, by the hand-over's
 * own rule ({@linkcode whyNotTaker}), compared by tenant: the actor names
 * its tenant, not its app, and a tenant has one app on a prefix.
 */
function whyNotTarget(heartbeat: Heartbeat, actor: ActorKey): string | undefined {
  const tenantOf = (app: string | undefined) => app?.split("/")[0] ?? "default";
  const app = tenantOf(heartbeat.app) === actor.tenant
    ? heartbeat.app
    : actor.tenant === "default"
    ? undefined
    : `${actor.tenant}/*`;
  // No node hands this actor over here: the id compared with the target's is none.
  return whyNotTaker(heartbeat, true, { nodeId: "", app });
}

/**
 * Asks `actor`'s owner to hand it to node `to` (`wasmkeep actor move`):
 * writes `moves/<tenant>/<class>/<name>`, expiring in five minutes. Refuses
 * with {@linkcode ClusterToolRefusal} a target no live node has, unless
 * `force`; a target that may not take the actor now gets a warning in the
 * outcome, and the request is written.
 *
 * @example
 * ```ts
 * import { moveActor } from "./move_command.ts";
 * import { MemoryBucket } from "../bucket/memory.ts";
 * const actor = { tenant: "acme", class: "room", name: "lobby" };
 * (await moveActor(new MemoryBucket(), actor, "node-c", { force: true })).warnings;
 * // ["node node-c is not live (no heartbeat nodes/node-c): ..."]
 * ```
 */
export async function moveActor(
  bucket: Bucket,
  actor: ActorKey,
  to: string,
  options: MoveCommandOptions = {},
): Promise<MoveOutcome> {
  assertNodeId(to, "the node to move the actor to");
  const clock = options.now ?? Date.now;
  const target = await readNodeStatus(bucket, to, options);
  const notLive = whyNotLive(target, to);
  if (notLive !== undefined && !options.force) {
    throw new ClusterToolRefusal(
      `no live node has the id ${to} (${notLive}); check the id with wasmkeep cluster status, ` +
        `or give --force to write the request anyway (for a node about to start)`,
    );
  }
  const waits = `the request is written, and the owner keeps ${
    actorKeyString(actor)
  } until node ${to} may take it or the request expires`;
  const warnings: string[] = [];
  if (notLive !== undefined) {
    warnings.push(`node ${to} is not live (${notLive}): ${waits}`);
  } else {
    const why = whyNotTarget(target!.heartbeat!, actor);
    if (why !== undefined) {
      warnings.push(`node ${to} may not take ${actorKeyString(actor)} now: ${why}; ${waits}`);
    }
  }
  const request = await new MoveRequests(bucket).request(actor, to, clock());
  return { request, key: moveKey(actor), target, warnings };
}
