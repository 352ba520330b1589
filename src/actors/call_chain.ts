/**
 * Who is waiting on an event: the calling actor and the chain of actors
 * waiting on it, as the node hands them to an event in two request headers
 * (anything a client or an actor put in those headers is removed first), so
 * that a call back into any actor of the chain is refused instead of waiting
 * on itself.
 *
 * @module
 */

import type { ActorKey } from "./key.ts";
import { CALLER_HEADER, CHAIN_HEADER } from "../security/call_signature.ts";

/**
 * The most actors waiting on one another in one chain of calls: a call that
 * would make a longer chain is refused (each waits up to the 30 s call
 * limit, and each holds its executor's event slot while it waits).
 */
export const MAX_CALL_DEPTH = 16;

/**
 * An actor in a header: tenant, class and the percent-encoded name (names
 * may hold commas, slashes are refused, and header values are bytes).
 *
 * @example
 * ```ts
 * import { actorRef } from "./call_chain.ts";
 * actorRef({ tenant: "default", class: "room", name: "a,b" }); // "default/room/a%2Cb"
 * ```
 */
export function actorRef(key: ActorKey): string {
  return `${key.tenant}/${key.class}/${encodeURIComponent(key.name)}`;
}

/**
 * The actors waiting on an event whose request carried `headers` (set by
 * the node): the chain, then the caller. Empty for a client's request.
 *
 * @example
 * ```ts
 * import { waitingChain } from "./call_chain.ts";
 * waitingChain([["x-wasmkeep-chain", "default/a/1"], ["x-wasmkeep-caller", "default/b/2"]]);
 * // ["default/a/1", "default/b/2"]
 * ```
 */
export function waitingChain(headers: readonly (readonly [string, string])[]): string[] {
  let caller: string | undefined;
  let chain: string[] = [];
  for (const [name, value] of headers) {
    if (name === CALLER_HEADER) caller = value;
    else if (name === CHAIN_HEADER && value !== "") chain = value.split(",");
  }
  return caller === undefined ? [] : [...chain, caller];
}

/**
 * Why a call from `caller` (with `chain` waiting on it) to `target` must be
 * refused, or `undefined` when it may go: a call into an actor that waits
 * on this call would wait for itself.
 *
 * @example
 * ```ts
 * import { callRefusal } from "./call_chain.ts";
 * callRefusal("default/t/b", ["default/t/a"], "default/t/a");
 * // "call cycle refused: default/t/a -> default/t/b -> default/t/a (...)"
 * ```
 */
export function callRefusal(
  caller: string,
  chain: readonly string[],
  target: string,
): string | undefined {
  if (target === caller || chain.includes(target)) {
    const path = [...chain, caller, target].join(" -> ");
    return `call cycle refused: ${path} (the target is waiting on this call: a reentrant call ` +
      `would wait for itself)`;
  }
  if (chain.length + 1 >= MAX_CALL_DEPTH) {
    return `call chain too deep: ${
      chain.length + 2
    } actors (at most ${MAX_CALL_DEPTH} may wait on one another)`;
  }
  return undefined;
}

/**
 * The request headers an event gets: the request's own, without any
 * caller or chain header, then the node's.
 *
 * @example
 * ```ts
 * import { withCallHeaders } from "./call_chain.ts";
 * withCallHeaders([["x-wasmkeep-caller", "forged"]], "default/t/a", []);
 * // [["x-wasmkeep-caller", "default/t/a"]]
 * ```
 */
export function withCallHeaders(
  headers: readonly [string, string][],
  caller: string,
  chain: readonly string[],
): [string, string][] {
  const kept = headers.filter(([name]) => name !== CALLER_HEADER && name !== CHAIN_HEADER);
  kept.push([CALLER_HEADER, caller]);
  if (chain.length > 0) kept.push([CHAIN_HEADER, chain.join(",")]);
  return kept;
}
