/**
 * A WasmKeep node: its options (options.ts), its assembly from options and
 * seams (assemble.ts), the decisions it wires (policies.ts) and its life
 * from start to stop (node.ts).
 *
 * @module
 */

export type { ActorClassOption } from "../deploy/served_classes.ts";
export { type ClusterOptions, NODE_DEFAULTS, type NodeOptions, NodeStartError } from "./options.ts";
export {
  CLUSTER_SECRET_RETRY_MS,
  type NodeDependencies,
  SERVER_SHUTDOWN_MS,
  TRUST_SWEEP_MS,
  WasmKeepNode,
} from "./node.ts";
export {
  assembleNode,
  type NodeInput,
  type NodeParts,
  type NodeSeams,
  Readiness,
} from "./assemble.ts";
export { type ClientListen, type ClientListener, denoListen } from "./listen.ts";
export { freedByHeartbeat, takenFromAnyId, type TakeRule } from "./policies.ts";
export { identityHosts, isPublicAddress } from "./addresses.ts";
