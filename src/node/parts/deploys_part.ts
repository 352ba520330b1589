/**
 * What the app's versions decide for the node: whether it is ready (a
 * version it cannot apply), whether it knows its classes yet, which events
 * wait for a required value, and which actors exist (for classes open only
 * to existing ones).
 *
 * @module
 */

import type { ActorKey } from "../../actors/key.ts";
import type { EventOutcome } from "../../actors/protocol.ts";
import type { ClassCatalog } from "../../deploy/class_catalog.ts";
import { ExistingActors } from "../../deploy/existing_actors.ts";
import type { ActorPart } from "./actor_part.ts";
import type { BucketPart } from "./bucket_part.ts";
import type { ClusterPart } from "./cluster_part.ts";
import { Readiness } from "./readiness.ts";
import type { NodeInput } from "./seams.ts";

/** The node's readiness and its classes' gates. */
export interface DeploysPart {
  /** Why the node is not ready; the lifecycle sets its own reasons. */
  readiness: Readiness;
  /** Whether the node knows the classes it serves (its app's first version applied). */
  classesKnown: () => boolean;
  /** The 503 of an event whose class lacks a required value (`--requires`), or `undefined`. */
  unsetRequired: (key: ActorKey) => Promise<EventOutcome> | undefined;
  existing: ExistingActors;
}

/** The 503 of an event whose class lacks a required value (`--requires`), or `undefined`. */
function unsetRequired(catalog: ClassCatalog, key: ActorKey): Promise<EventOutcome> | undefined {
  const missing = catalog.missing(key.class);
  if (!missing) return undefined;
  return Promise.resolve({
    kind: "failed",
    status: 503,
    message: `class '${key.class}' is missing required values (${
      missing.join(", ")
    }): it runs once they are set; retry`,
  });
}

/**
 * Builds the deploys part: a node that applied a version serves it while
 * it cannot apply the next.
 *
 * @example
 * ```ts
 * import { deploysPart } from "./deploys_part.ts";
 * import type { NodeInput } from "./seams.ts";
 * import type { BucketPart } from "./bucket_part.ts";
 * import type { ClusterPart } from "./cluster_part.ts";
 * import type { ActorPart } from "./actor_part.ts";
 * declare const input: NodeInput;
 * declare const store: BucketPart;
 * declare const cluster: ClusterPart;
 * declare const actors: ActorPart;
 * const { readiness, unsetRequired } = deploysPart(input, { store, cluster, actors });
 * ```
 */
export function deploysPart(
  { catalog, follower }: NodeInput,
  { store, cluster, actors }: { store: BucketPart; cluster: ClusterPart; actors: ActorPart },
): DeploysPart {
  const { plane } = cluster;
  const { host } = actors;
  const readiness = new Readiness(plane, () => {
    const reason = follower?.notReady();
    // A node that applied a version serves it while it cannot apply the next.
    return reason === undefined ? undefined : { reason, servesRequests: !!follower!.applied };
  });
  const existing = new ExistingActors({
    held: (key) => host.holds(key),
    hasRecord: async (key) => (await store.ownership.read(key)) !== undefined,
  });
  return {
    readiness,
    classesKnown: () => !follower || follower.applied !== undefined,
    unsetRequired: (key) => unsetRequired(catalog, key),
    existing,
  };
}
