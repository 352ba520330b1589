/**
 * Move requests: the object `moves/<tenant>/<class>/<name>` that asks the
 * actor's owner to hand it to one node (the spec's "Moving one actor", ADR
 * 0017). `wasmkeep actor move` writes it with a deadline five minutes on;
 * the owner (or, when no node holds the actor, the target itself) acts on it
 * at its heartbeats and deletes it once the target holds the actor. A
 * request past its deadline is deleted unacted on.
 *
 * @module
 */

import type { ActorKey } from "../actor_key.ts";
import { type Bucket, PreconditionFailed } from "../bucket/bucket.ts";
import { moveKey, MOVES_PREFIX } from "../bucket/keys.ts";
import { isNodeId } from "../node_id.ts";

/** The format of a move request, in its `version` field. */
export const MOVE_REQUEST_VERSION = 1;

/** How long a move request is tried before it expires (the spec's 5 minutes). */
export const MOVE_REQUEST_TTL_MS = 5 * 60_000;

/** A decoded move request. */
export interface MoveRequest {
  version: typeof MOVE_REQUEST_VERSION;
  /** The actor to move. */
  actor: ActorKey;
  /** The node to move it to. */
  to: string;
  /** When it was written, in ms since the epoch on the writer's clock. */
  at: number;
  /** When it expires, in ms since the epoch on the writer's clock. */
  expires: number;
}

/** A move request object that cannot be read. */
export class MalformedMoveRequest extends Error {
  /**
   * @example
   * ```ts
   * import { MalformedMoveRequest } from "./move_request.ts";
   * new MalformedMoveRequest("moves/acme/room/lobby", "not JSON").message;
   * ```
   */
  constructor(readonly key: string, readonly problem: string) {
    super(`move request ${key} cannot be read: ${problem}`);
    this.name = "MalformedMoveRequest";
  }
}

/**
 * Encodes a move request as one line of JSON.
 *
 * @example
 * ```ts
 * import { encodeMoveRequest } from "./move_request.ts";
 * encodeMoveRequest({ version: 1, actor: { tenant: "acme", class: "room", name: "lobby" },
 *   to: "c", at: 0, expires: 300_000 });
 * ```
 */
export function encodeMoveRequest(request: MoveRequest): Uint8Array {
  if (!isNodeId(request.to)) throw new TypeError(`not a node id: ${request.to}`);
  return new TextEncoder().encode(JSON.stringify(request) + "\n");
}

/**
 * Decodes a move request; `key` names it in errors.
 *
 * @example
 * ```ts
 * import { decodeMoveRequest, encodeMoveRequest } from "./move_request.ts";
 * const actor = { tenant: "acme", class: "room", name: "lobby" };
 * const bytes = encodeMoveRequest({ version: 1, actor, to: "c", at: 0, expires: 1 });
 * decodeMoveRequest(bytes, "moves/acme/room/lobby").to; // "c"
 * ```
 */
export function decodeMoveRequest(bytes: Uint8Array, key: string): MoveRequest {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch {
    throw new MalformedMoveRequest(key, "not UTF-8 JSON");
  }
  const fields = (typeof value === "object" && value !== null ? value : {}) as Record<
    string,
    unknown
  >;
  if (fields.version !== MOVE_REQUEST_VERSION) {
    throw new MalformedMoveRequest(key, `version ${JSON.stringify(fields.version)}`);
  }
  const actor = fields.actor as Record<string, unknown> | undefined;
  const text = (v: unknown) => typeof v === "string" && v !== "";
  if (!actor || !text(actor.tenant) || !text(actor.class) || !text(actor.name)) {
    throw new MalformedMoveRequest(key, "no tenant/class/name");
  }
  if (!isNodeId(fields.to)) throw new MalformedMoveRequest(key, "no target node id");
  const time = (v: unknown) => typeof v === "number" && Number.isFinite(v);
  if (!time(fields.at) || !time(fields.expires)) throw new MalformedMoveRequest(key, "no times");
  if (moveKey(actor as unknown as ActorKey) !== key) {
    throw new MalformedMoveRequest(key, "its actor is not the one its key names");
  }
  return {
    version: MOVE_REQUEST_VERSION,
    actor: {
      tenant: actor.tenant as string,
      class: actor.class as string,
      name: actor.name as string,
    },
    to: fields.to,
    at: fields.at as number,
    expires: fields.expires as number,
  };
}

/** A move request as listed: the request, and the ETag to delete it by. */
export interface ListedMove {
  request: MoveRequest;
  etag: string;
}

/**
 * The move requests in the bucket, as `wasmkeep actor move` and the nodes
 * read and write them.
 *
 * @example
 * ```ts
 * import { MoveRequests } from "./move_request.ts";
 * import { MemoryBucket } from "../bucket/memory.ts";
 * const requests = new MoveRequests(new MemoryBucket());
 * const actor = { tenant: "acme", class: "room", name: "lobby" };
 * await requests.request(actor, "c", Date.now());
 * (await requests.list()).length; // 1
 * ```
 */
export class MoveRequests {
  constructor(readonly bucket: Bucket) {}

  /** Writes the request that `actor` move to `to`, expiring in {@linkcode MOVE_REQUEST_TTL_MS}. */
  async request(actor: ActorKey, to: string, now: number): Promise<MoveRequest> {
    const request: MoveRequest = {
      version: MOVE_REQUEST_VERSION,
      actor: { tenant: actor.tenant, class: actor.class, name: actor.name },
      to,
      at: now,
      expires: now + MOVE_REQUEST_TTL_MS,
    };
    await this.bucket.put(moveKey(actor), encodeMoveRequest(request));
    return request;
  }

  /**
   * Deletes a request once acted on (or expired), only if it is still the
   * one read (`etag`): a newer request for the actor stays.
   */
  async done(move: ListedMove): Promise<void> {
    try {
      await this.bucket.delete(moveKey(move.request.actor), { ifMatch: move.etag });
    } catch (error) {
      if (!(error instanceof PreconditionFailed)) throw error;
    }
  }

  /**
   * Every request in the bucket, read whole, `max` at most (a bound on one
   * heartbeat's work; the rest wait for the next). Unreadable ones are
   * skipped.
   */
  async list(max = MOVE_REQUESTS_PER_LISTING, signal?: AbortSignal): Promise<ListedMove[]> {
    const found: ListedMove[] = [];
    let continuationToken: string | undefined;
    do {
      const page = await this.bucket.list(MOVES_PREFIX, { continuationToken, signal });
      for (const info of page.objects) {
        if (found.length >= max) return found;
        const object = await this.bucket.get(info.key, { signal });
        if (!object) continue;
        try {
          found.push({ request: decodeMoveRequest(object.body, info.key), etag: object.etag });
        } catch (error) {
          if (!(error instanceof MalformedMoveRequest)) throw error;
        }
      }
      continuationToken = page.continuationToken;
    } while (continuationToken);
    return found;
  }
}

/** Most move requests one listing reads (one heartbeat's work). */
export const MOVE_REQUESTS_PER_LISTING = 256;
