/**
 * The heartbeat object `nodes/<id>`: a node's lease and what the cluster
 * knows of it, in numbered text lines (docs/adr/0004-node-leases.md; the
 * spec names line 10, secrets, and line 11, take).
 *
 * @module
 */

import { isNodeId } from "../node_id.ts";

/** Line 1 of a heartbeat with node leases. */
export const HEARTBEAT_MAGIC = "wasmkeep-heartbeat 2";

/** Line 1 of a heartbeat from before node leases (read, never written). */
export const LEGACY_HEARTBEAT_MAGIC = "wasmkeep-heartbeat 1";

/** Whether the lease is held, given back, or taken by a peer. */
export type LeaseState = "live" | "released" | "fenced";

/** Whether a node takes actors (the spec's STATE column). */
export type ServingState = "serving" | "draining" | "drained" | "stuck";

/** A decoded heartbeat. */
export interface Heartbeat {
  /** 2 with node leases, 1 from before them. */
  format: 1 | 2;
  nodeId: string;
  /** A token new at every start of the process. */
  process: string;
  /** The node's last live write, in ms since the epoch on its own clock; a fence and a release keep it. */
  at: number;
  lease: LeaseState;
  /** The node that wrote the fence, for `fenced`. */
  fencedBy?: string;
  /** The URL other nodes forward client requests to (`--advertise`). */
  address: string;
  /** `https://HOST:PORT` of the cluster listener, if any. */
  clusterAddress?: string;
  /** SHA-256 fingerprint of the node's certificate, when it publishes a TLS pin. */
  fingerprint?: string;
  /** `tenant/app` the node serves, if any. */
  app?: string;
  /** Line 10: whether the node reads its app's secrets. */
  readsSecrets: boolean;
  /** Line 11: whether the node takes moved actors. */
  takesMoved: boolean;
  /** The WasmKeep version it runs. */
  version: string;
  state: ServingState;
}

/** A heartbeat object that cannot be read. */
export class MalformedHeartbeat extends Error {
  /**
   * @example
   * ```ts
   * import { MalformedHeartbeat } from "./heartbeat.ts";
   * new MalformedHeartbeat("nodes/a", "line 4 is not a time").message;
   * ```
   */
  constructor(readonly key: string, readonly problem: string) {
    super(`heartbeat ${key} cannot be read: ${problem}`);
    this.name = "MalformedHeartbeat";
  }
}

const dash = (value: string | undefined) => value === undefined || value === "" ? "-" : value;
const undash = (value: string) => value === "-" ? undefined : value;

/**
 * Encodes a heartbeat (format 2).
 *
 * @example
 * ```ts
 * import { encodeHeartbeat } from "./heartbeat.ts";
 * encodeHeartbeat({ format: 2, nodeId: "a", process: "0123456789abcdef", at: 1, lease: "live",
 *   address: "http://a:8080", readsSecrets: false, takesMoved: false, version: "0.1.0",
 *   state: "serving" });
 * ```
 */
export function encodeHeartbeat(heartbeat: Heartbeat): Uint8Array {
  const lease = heartbeat.lease === "fenced"
    ? `fenced ${heartbeat.fencedBy ?? "-"}`
    : heartbeat.lease;
  const lines = [
    HEARTBEAT_MAGIC,
    heartbeat.nodeId,
    heartbeat.process,
    String(heartbeat.at),
    lease,
    heartbeat.address,
    dash(heartbeat.clusterAddress),
    dash(heartbeat.fingerprint),
    dash(heartbeat.app),
    heartbeat.readsSecrets ? "secrets" : "no-secrets",
    heartbeat.takesMoved ? "take" : "-",
    heartbeat.version,
    heartbeat.state,
  ];
  for (const line of lines) {
    if (line.includes("\n")) {
      throw new RangeError(`a heartbeat line cannot hold a newline: ${line}`);
    }
  }
  return new TextEncoder().encode(lines.join("\n") + "\n");
}

/**
 * Decodes a heartbeat of either format; `key` names it in errors. A format-1
 * heartbeat has lines 1 to 4 (magic, id, process, time) and is always `live`
 * by its lines: only its age tells.
 *
 * @example
 * ```ts
 * import { decodeHeartbeat, encodeHeartbeat } from "./heartbeat.ts";
 * const bytes = encodeHeartbeat({ format: 2, nodeId: "a", process: "p", at: 1, lease: "live",
 *   address: "http://a:8080", readsSecrets: false, takesMoved: false, version: "0.1.0",
 *   state: "serving" });
 * decodeHeartbeat(bytes, "nodes/a").nodeId; // "a"
 * ```
 */
export function decodeHeartbeat(bytes: Uint8Array, key: string): Heartbeat {
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(bytes);
  } catch {
    throw new MalformedHeartbeat(key, "not UTF-8");
  }
  const lines = text.replace(/\n$/, "").split("\n");
  const at = Number(lines[3]);
  if (lines[0] === LEGACY_HEARTBEAT_MAGIC) {
    if (lines.length < 4 || !Number.isFinite(at)) {
      throw new MalformedHeartbeat(key, "a format-1 heartbeat needs an id, a process and a time");
    }
    return {
      format: 1,
      nodeId: lines[1],
      process: lines[2],
      at,
      lease: "live",
      address: undash(lines[4] ?? "-") ?? "",
      readsSecrets: false,
      takesMoved: false,
      version: lines[5] ?? "-",
      state: "serving",
    };
  }
  if (lines[0] !== HEARTBEAT_MAGIC) {
    throw new MalformedHeartbeat(key, `line 1 is ${JSON.stringify(lines[0])}, not a heartbeat`);
  }
  if (lines.length < 13) throw new MalformedHeartbeat(key, `${lines.length} lines, not 13`);
  if (!isNodeId(lines[1])) throw new MalformedHeartbeat(key, "line 2 is not a node id");
  if (!Number.isSafeInteger(at) || at < 0) {
    throw new MalformedHeartbeat(key, "line 4 is not a time");
  }
  const [lease, fencedBy] = lines[4].split(" ");
  if (lease !== "live" && lease !== "released" && lease !== "fenced") {
    throw new MalformedHeartbeat(key, `line 5 is ${JSON.stringify(lines[4])}, not a lease state`);
  }
  const state = lines[12];
  if (!["serving", "draining", "drained", "stuck"].includes(state)) {
    throw new MalformedHeartbeat(key, `line 13 is ${JSON.stringify(state)}, not a state`);
  }
  return {
    format: 2,
    nodeId: lines[1],
    process: lines[2],
    at,
    lease,
    fencedBy: lease === "fenced" ? undash(fencedBy ?? "-") : undefined,
    address: lines[5],
    clusterAddress: undash(lines[6]),
    fingerprint: undash(lines[7]),
    app: undash(lines[8]),
    readsSecrets: lines[9] === "secrets",
    takesMoved: lines[10] === "take",
    version: lines[11],
    state: state as ServingState,
  };
}

/**
 * Whether a reader counts the node live: a `live` lease written within the
 * ttl, on the reader's clock (`now`). Released and fenced heartbeats never
 * are, whatever their age.
 *
 * @example
 * ```ts
 * import { isLive } from "./heartbeat.ts";
 * isLive({ lease: "live", at: 1000 }, 5000, 10_000); // true
 * ```
 */
export function isLive(
  heartbeat: Pick<Heartbeat, "lease" | "at">,
  now: number,
  ttlMs: number,
): boolean {
  return heartbeat.lease === "live" && now - heartbeat.at < ttlMs;
}
