/**
 * How many connections the node takes, cut to its open-file limit: the
 * client listener's places, the cluster listener's and the relays'.
 *
 * @module
 */

import type { Logger } from "../../log.ts";
import { maxClientConnections, maxClusterConnections, maxRelays } from "../../limits.ts";
import { NODE_DEFAULTS, type NodeOptions } from "../options.ts";
import { Admission } from "../policies.ts";

/** The node's connection bounds. */
export interface BoundsPart {
  /** The client requests served at once. */
  admission: Admission;
  /** Cluster listener connections at most (0 without one). */
  clusterConnections: number;
  /** Relayed sockets at most (0 on a standalone node). */
  relayConnections: number;
}

/**
 * Builds the bounds: `--max-connections` lowered, with a warning, where the
 * open-file limit cannot hold it beside the cluster's connections.
 *
 * @example
 * ```ts
 * import { boundsPart } from "./bounds_part.ts";
 * import type { NodeOptions } from "../options.ts";
 * import { openFileLimit } from "../../limits.ts";
 * import { createLogger } from "../../log.ts";
 * declare const options: NodeOptions;
 * const { admission } = boundsPart(options, openFileLimit(), createLogger());
 * ```
 */
export function boundsPart(options: NodeOptions, fileLimit: number, log: Logger): BoundsPart {
  const clusterConnections = options.cluster?.listener ? maxClusterConnections(fileLimit) : 0;
  // A relay's connection to the owner is its own file; its client's holds a place.
  const relayConnections = options.cluster ? maxRelays(fileLimit) : 0;
  const requested = options.maxConnections ?? NODE_DEFAULTS.maxConnections;
  const admission = new Admission(
    maxClientConnections(requested, fileLimit, clusterConnections + relayConnections),
  );
  if (admission.max < requested) {
    log.warn("--max-connections lowered to fit the open-file limit", {
      requested,
      max_connections: admission.max,
      open_file_limit: fileLimit,
    });
  }
  return { admission, clusterConnections, relayConnections };
}
