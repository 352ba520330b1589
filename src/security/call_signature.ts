/**
 * Signed calls between nodes (the spec's "Calls between nodes"): a node
 * proves that a call comes from the cluster with HMAC-SHA256 under the
 * cluster secret, over the node the call is for, the method, path and query,
 * the body, the calling actor, the chain of actors waiting, a timestamp and a
 * nonce unique to each send. A call is valid for a minute either side of the
 * receiving node's clock, and accepted once. Only a signed call's caller and
 * chain are believed: a node removes these headers from every request it did
 * not verify ({@linkcode stripCallHeaders}).
 *
 * The signed input is canonical and unambiguous: each field as its length,
 * `:`, then the field, in a fixed order after a tag naming this format; the
 * body enters as its SHA-256, so the input stays small whatever the body.
 * Every field is printable ASCII (actors are percent-encoded in their
 * headers), so lengths in characters are lengths in bytes.
 *
 * @module
 */

import { hash } from "node:crypto";
import type { Clock, Random } from "../time/clock.ts";
import type { ClusterSecret } from "./cluster_secret.ts";
import type { NonceCache } from "./nonce_cache.ts";

/**
 * The calling actor, `tenant/class/name` with each part percent-encoded.
 *
 * @example
 * ```ts
 * import { CALLER_HEADER } from "./call_signature.ts";
 * console.log(CALLER_HEADER); // "x-wasmkeep-caller"
 * ```
 */
export const CALLER_HEADER = "x-wasmkeep-caller";

/**
 * The actors waiting on the caller, outermost first, comma separated, each
 * as in {@linkcode CALLER_HEADER}; absent when none waits.
 *
 * @example
 * ```ts
 * import { CHAIN_HEADER } from "./call_signature.ts";
 * console.log(CHAIN_HEADER); // "x-wasmkeep-chain"
 * ```
 */
export const CHAIN_HEADER = "x-wasmkeep-chain";

/**
 * When the call was signed, in ms since the epoch on the caller's clock.
 *
 * @example
 * ```ts
 * import { CALL_TIME_HEADER } from "./call_signature.ts";
 * console.log(CALL_TIME_HEADER); // "x-wasmkeep-call-time"
 * ```
 */
export const CALL_TIME_HEADER = "x-wasmkeep-call-time";

/**
 * 128 random bits, 32 lowercase hex digits, new for each send.
 *
 * @example
 * ```ts
 * import { CALL_NONCE_HEADER } from "./call_signature.ts";
 * console.log(CALL_NONCE_HEADER); // "x-wasmkeep-call-nonce"
 * ```
 */
export const CALL_NONCE_HEADER = "x-wasmkeep-call-nonce";

/**
 * The id of the node the call is for. It is signed as any other field; sent
 * as well so that a node can say a call was meant for another node (a peer
 * that restarted under another id at the same address) instead of only that
 * the signature does not match.
 *
 * @example
 * ```ts
 * import { CALL_NODE_HEADER } from "./call_signature.ts";
 * console.log(CALL_NODE_HEADER); // "x-wasmkeep-call-node"
 * ```
 */
export const CALL_NODE_HEADER = "x-wasmkeep-call-node";

/**
 * `v1=` and the HMAC-SHA256, 64 lowercase hex digits.
 *
 * @example
 * ```ts
 * import { SIGNATURE_HEADER } from "./call_signature.ts";
 * console.log(SIGNATURE_HEADER); // "x-wasmkeep-signature"
 * ```
 */
export const SIGNATURE_HEADER = "x-wasmkeep-signature";

/**
 * Every header of a signed call: a node deletes them from requests it did not
 * verify, so that a client cannot pass for an actor.
 *
 * @example
 * ```ts
 * import { CALL_HEADERS } from "./call_signature.ts";
 * console.log(CALL_HEADERS.length); // 6
 * ```
 */
export const CALL_HEADERS: readonly string[] = Object.freeze([
  CALLER_HEADER,
  CHAIN_HEADER,
  CALL_TIME_HEADER,
  CALL_NONCE_HEADER,
  CALL_NODE_HEADER,
  SIGNATURE_HEADER,
]);

/**
 * The version of the signature format, before `=` in {@linkcode SIGNATURE_HEADER}.
 * A signature of another version is refused as from a node of another version.
 *
 * @example
 * ```ts
 * import { SIGNATURE_VERSION } from "./call_signature.ts";
 * console.log(SIGNATURE_VERSION); // "v1"
 * ```
 */
export const SIGNATURE_VERSION = "v1";

/**
 * How far a call's time may be from the receiving node's clock, either way
 * (60 s): "valid for a minute". It also absorbs clock skew between nodes.
 *
 * @example
 * ```ts
 * import { CALL_VALIDITY_MS } from "./call_signature.ts";
 * console.log(CALL_VALIDITY_MS); // 60000
 * ```
 */
export const CALL_VALIDITY_MS = 60_000;

/**
 * Kept on top of {@linkcode CALL_VALIDITY_MS} before a call's nonce is
 * forgotten (1 s, the clock skew the cluster's timings allow): a node whose
 * own clock steps back by less than this still refuses a replay.
 *
 * @example
 * ```ts
 * import { NONCE_CLOCK_MARGIN_MS } from "./call_signature.ts";
 * console.log(NONCE_CLOCK_MARGIN_MS); // 1000
 * ```
 */
export const NONCE_CLOCK_MARGIN_MS = 1_000;

/**
 * Most actors in a call's chain (32). Each costs up to about 850 bytes of
 * header (a 256-byte name percent-encoded), so the chain header stays under
 * 28 KB; a deeper call is refused when signed and when verified.
 *
 * @example
 * ```ts
 * import { MAX_CALL_CHAIN } from "./call_signature.ts";
 * console.log(MAX_CALL_CHAIN); // 32
 * ```
 */
export const MAX_CALL_CHAIN = 32;

/** Bytes of a call's nonce (128 bits). */
const NONCE_BYTES = 16;

/** Tags the signed input, so a MAC of this format is never valid for another use of the key. */
const FORMAT_TAG = "wasmkeep-call-v1";

/** Why every refusal of a signature starts alike: the spec's log message. */
const BAD = "bad, expired or misaddressed signature";

const PRINTABLE = /^[\x21-\x7e]+$/;
const SIGNATURE_PATTERN = /^v1=[0-9a-f]{64}$/;
const TIME_PATTERN = /^(0|[1-9][0-9]{0,14})$/;
const NONCE_PATTERN = /^[0-9a-f]{32}$/;
/** One actor in a header: three parts of encodeURIComponent's output. */
const ACTOR_PATTERN = /^[A-Za-z0-9\-_.!~*'()%]+\/[A-Za-z0-9\-_.!~*'()%]+\/[A-Za-z0-9\-_.!~*'()%]+$/;

/** Methods fetch sends in upper case whatever case they were given in (Fetch, "normalize"). */
const NORMALIZED_METHODS = new Set(["DELETE", "GET", "HEAD", "OPTIONS", "POST", "PUT"]);

/** A call about to be sent to another node. */
export interface CallToSign {
  /** The id of the node it is sent to. */
  targetNode: string;
  /** The HTTP method. */
  method: string;
  /** The path and query as the receiver will see them: {@linkcode callPath} of the URL. */
  path: string;
  /** The whole body (empty for none). */
  body: Uint8Array;
  /** The calling actor, `tenant/class/name`. */
  caller: string;
  /** The actors waiting on the caller, outermost first, each `tenant/class/name`. */
  chain: readonly string[];
}

/**
 * Signs a call between nodes: the headers {@linkcode signCall} gives with
 * the cluster secret; it throws (with the reason) when calls between nodes
 * are stopped.
 *
 * @example
 * ```ts
 * import type { CallSigner } from "./call_signature.ts";
 * const stopped: CallSigner = () => {
 *   throw new Error("calls between nodes are stopped");
 * };
 * ```
 */
export type CallSigner = (call: CallToSign) => [string, string][];

/** A call that arrived, to be verified. */
export interface CallToVerify {
  /** This node's id. */
  thisNode: string;
  /** The request's method. */
  method: string;
  /** {@linkcode callPath} of the request's URL. */
  path: string;
  /** The whole body, read before verifying. */
  body: Uint8Array;
  /** The request's headers. */
  headers: Headers;
}

/** What signing needs besides the secret. */
export interface SignOptions {
  /** Dates the call. */
  clock: Clock;
  /** Draws the nonce: a cryptographic source in a node. */
  random: Random;
}

/** What verifying needs besides the secret. */
export interface VerifyOptions {
  /** This node's clock, the call's time is compared with. */
  clock: Clock;
  /** The nonces this node accepted, shared by every verification on the node. */
  nonces: NonceCache;
}

/**
 * Why a call was refused, for the caller's answer:
 * - `"bad"`: the signature is missing, malformed, of another version, for
 *   another node, out of its time, does not match, or its nonce was used
 *   (refuse: the call is not from the cluster, or not as it was signed);
 * - `"busy"`: this node remembers as many nonces as it may: try again soon;
 * - `"no-secret"`: the cluster secret is malformed, calls between nodes are
 *   stopped until it is fixed.
 */
export type CallRefusal = "bad" | "busy" | "no-secret";

/** The outcome of {@linkcode verifyCall}. */
export type VerifiedCall =
  | {
    ok: true;
    /** The calling actor, `tenant/class/name`. */
    caller: string;
    /** The actors waiting on it, outermost first. */
    chain: string[];
  }
  | {
    ok: false;
    /** What kind of refusal it is. */
    kind: CallRefusal;
    /** What was wrong, for the log (names no secret). */
    reason: string;
  };

/**
 * The path and query of a URL exactly as a receiving node sees them in its
 * request's URL: what a call is signed over and verified against.
 *
 * @example
 * ```ts
 * import { callPath } from "./call_signature.ts";
 * callPath(new URL("http://b:8080/actor/room/a b?x=1")); // "/actor/room/a%20b?x=1"
 * ```
 */
export function callPath(url: URL | string): string {
  const parsed = typeof url === "string" ? new URL(url) : url;
  return parsed.pathname + parsed.search;
}

/**
 * The headers that make a call to `call.targetNode` a signed one, with a
 * fresh nonce and this node's time. Throws `ClusterSecretUnusable` when the
 * secret is malformed, and `TypeError` or `RangeError` for a call that cannot
 * be signed (an actor not `tenant/class/name`, a path not printable ASCII, a
 * chain longer than {@linkcode MAX_CALL_CHAIN}).
 *
 * @example
 * ```ts
 * import { callPath, signCall } from "./call_signature.ts";
 * import { ClusterSecret } from "./cluster_secret.ts";
 * import { systemClock, systemRandom } from "../time/clock.ts";
 * const secret = ClusterSecret.fromBytes(crypto.getRandomValues(new Uint8Array(32)));
 * const url = new URL("http://10.0.0.12:8080/actor/room/lobby");
 * const body = new TextEncoder().encode("hello");
 * const headers = signCall(secret, {
 *   targetNode: "b",
 *   method: "POST",
 *   path: callPath(url),
 *   body,
 *   caller: "acme/user/alice",
 *   chain: [],
 * }, { clock: systemClock, random: systemRandom });
 * const request = new Request(url, { method: "POST", body, headers }); // to node b
 * ```
 */
export function signCall(
  secret: ClusterSecret,
  call: CallToSign,
  options: SignOptions,
): [string, string][] {
  if (call.chain.length > MAX_CALL_CHAIN) {
    throw new RangeError(
      `a call chain of ${call.chain.length} actors is deeper than ${MAX_CALL_CHAIN}, the most a signed call carries`,
    );
  }
  const fields: Fields = {
    node: printable("target node", call.targetNode),
    method: printable("method", normalizeMethod(call.method)),
    path: printable("path", call.path),
    bodyHash: hash("sha256", call.body, "hex"),
    caller: encodeActor(call.caller),
    chain: call.chain.map(encodeActor).join(","),
    time: String(Math.floor(options.clock.now())),
    nonce: hex(options.random.fill(new Uint8Array(NONCE_BYTES))),
  };
  if (!fields.path.startsWith("/")) {
    throw new TypeError(`the path of a call must start with "/": ${JSON.stringify(call.path)}`);
  }
  const headers: [string, string][] = [
    [CALL_NODE_HEADER, fields.node],
    [CALL_TIME_HEADER, fields.time],
    [CALL_NONCE_HEADER, fields.nonce],
    [CALLER_HEADER, fields.caller],
  ];
  if (fields.chain !== "") headers.push([CHAIN_HEADER, fields.chain]);
  headers.push([SIGNATURE_HEADER, `${SIGNATURE_VERSION}=${secret.mac(canonical(fields))}`]);
  return headers;
}

/**
 * Checks that a call comes from the cluster, unchanged, for this node, within
 * its minute, and for the first time; then returns its caller and chain.
 * Checks go cheapest first, and the nonce is remembered only once the
 * signature matched, so unsigned garbage cannot fill the cache.
 *
 * @example
 * ```ts
 * import { callPath, verifyCall } from "./call_signature.ts";
 * import { ClusterSecret } from "./cluster_secret.ts";
 * import { NonceCache } from "./nonce_cache.ts";
 * import { systemClock } from "../time/clock.ts";
 * const secret = ClusterSecret.fromBytes(crypto.getRandomValues(new Uint8Array(32)));
 * const nonces = new NonceCache({ clock: systemClock });
 * const request = new Request("http://b:8080/actor/room/lobby", { method: "POST", body: "x" });
 * const verified = verifyCall(secret, {
 *   thisNode: "b",
 *   method: request.method,
 *   path: callPath(request.url),
 *   body: new Uint8Array(await request.arrayBuffer()),
 *   headers: request.headers,
 * }, { clock: systemClock, nonces });
 * console.log(verified.ok); // false: this request carries no signature
 * ```
 */
export function verifyCall(
  secret: ClusterSecret,
  call: CallToVerify,
  options: VerifyOptions,
): VerifiedCall {
  if (!secret.usable) return { ok: false, kind: "no-secret", reason: secret.problem! };
  const headers = call.headers;
  const signature = headers.get(SIGNATURE_HEADER);
  if (signature === null) return bad(`no ${SIGNATURE_HEADER} header`);
  // First, so that a call of another version is named as such whatever else it lacks.
  if (!signature.startsWith(`${SIGNATURE_VERSION}=`)) {
    return bad(
      `${SIGNATURE_HEADER} is not a ${SIGNATURE_VERSION} signature: a node of an older version?`,
    );
  }
  if (!SIGNATURE_PATTERN.test(signature)) {
    return bad(`${SIGNATURE_HEADER} is not ${SIGNATURE_VERSION}= and 64 lowercase hex digits`);
  }

  const node = headers.get(CALL_NODE_HEADER);
  const time = headers.get(CALL_TIME_HEADER);
  const nonce = headers.get(CALL_NONCE_HEADER);
  const caller = headers.get(CALLER_HEADER);
  const chain = headers.get(CHAIN_HEADER) ?? "";
  if (node === null) return bad(`no ${CALL_NODE_HEADER} header`);
  if (node !== call.thisNode) {
    return bad(
      `meant for node ${JSON.stringify(node)}, and this is node ${JSON.stringify(call.thisNode)}`,
    );
  }
  if (time === null) return bad(`no ${CALL_TIME_HEADER} header`);
  if (!TIME_PATTERN.test(time)) return bad(`${CALL_TIME_HEADER} is not ms since the epoch`);
  const age = options.clock.now() - Number(time);
  if (age > CALL_VALIDITY_MS) {
    return bad(
      `expired: signed ${age} ms before this node's clock, valid for ${CALL_VALIDITY_MS} ms (or a clock is wrong)`,
    );
  }
  if (-age > CALL_VALIDITY_MS) {
    return bad(
      `dated ${-age} ms after this node's clock, more than the ${CALL_VALIDITY_MS} ms allowed: a clock is wrong`,
    );
  }
  if (Number(time) < options.nonces.since) {
    // Accepted once: the process that may have accepted it before a restart
    // took its nonces with it.
    return bad(
      `dated before this node's process started, ${
        options.nonces.since - Number(time)
      } ms earlier: it may have been accepted already`,
    );
  }
  if (nonce === null) return bad(`no ${CALL_NONCE_HEADER} header`);
  if (!NONCE_PATTERN.test(nonce)) return bad(`${CALL_NONCE_HEADER} is not 32 lowercase hex digits`);
  if (caller === null) return bad(`no ${CALLER_HEADER} header`);
  const callerActor = decodeActor(caller);
  if (callerActor === undefined) return bad(`${CALLER_HEADER} is not one tenant/class/name`);
  const chainActors = chain === "" ? [] : chain.split(",");
  if (chainActors.length > MAX_CALL_CHAIN) {
    return bad(`${CHAIN_HEADER} lists more than ${MAX_CALL_CHAIN} actors`);
  }
  const chainDecoded: string[] = [];
  for (const actor of chainActors) {
    const decoded = decodeActor(actor);
    if (decoded === undefined) return bad(`${CHAIN_HEADER} is not a list of tenant/class/name`);
    chainDecoded.push(decoded);
  }
  const method = normalizeMethod(call.method);
  if (!PRINTABLE.test(method)) return bad("the method is not printable ASCII");
  if (!PRINTABLE.test(call.path) || !call.path.startsWith("/")) {
    return bad("the path is not printable ASCII starting with /");
  }

  const expected = secret.mac(canonical({
    node,
    method,
    path: call.path,
    bodyHash: hash("sha256", call.body, "hex"),
    caller,
    chain,
    time,
    nonce,
  }));
  if (!equalHex(expected, signature.slice(SIGNATURE_VERSION.length + 1))) {
    return bad(
      "it does not match: the call was changed on its way, or signed with another cluster's secret",
    );
  }
  const remembered = options.nonces.remember(
    nonce,
    Number(time) + CALL_VALIDITY_MS + NONCE_CLOCK_MARGIN_MS,
  );
  if (remembered === "seen") return bad("its nonce was already used: a replayed call");
  if (remembered === "full") {
    return {
      ok: false,
      kind: "busy",
      reason:
        "this node remembers as many nonces of signed calls as it may (MAX_NONCES); calls are refused until some expire",
    };
  }
  return { ok: true, caller: callerActor, chain: chainDecoded };
}

/**
 * Deletes every header of a signed call from `headers`: for a request that
 * was not verified (a client's, or one that arrived where calls do not
 * count), so that its caller and chain are never believed.
 *
 * @example
 * ```ts
 * import { CALLER_HEADER, stripCallHeaders } from "./call_signature.ts";
 * const headers = new Headers({ [CALLER_HEADER]: "acme/admin/root" });
 * stripCallHeaders(headers);
 * console.log(headers.has(CALLER_HEADER)); // false
 * ```
 */
export function stripCallHeaders(headers: Headers): void {
  for (const name of CALL_HEADERS) headers.delete(name);
}

/** The signed fields, as they travel (actors percent-encoded, the body as its SHA-256). */
interface Fields {
  node: string;
  method: string;
  path: string;
  bodyHash: string;
  caller: string;
  chain: string;
  time: string;
  nonce: string;
}

function canonical(f: Fields): string {
  let input = FORMAT_TAG;
  for (const value of [f.node, f.method, f.path, f.bodyHash, f.caller, f.chain, f.time, f.nonce]) {
    input += `${value.length}:${value}`;
  }
  return input;
}

function bad(what: string): VerifiedCall {
  return { ok: false, kind: "bad", reason: `${BAD} (${what})` };
}

function printable(what: string, value: string): string {
  if (!PRINTABLE.test(value)) {
    throw new TypeError(`the ${what} of a call must be printable ASCII: ${JSON.stringify(value)}`);
  }
  return value;
}

function normalizeMethod(method: string): string {
  const upper = method.toUpperCase();
  return NORMALIZED_METHODS.has(upper) ? upper : method;
}

/** `tenant/class/name` to its header form: each part percent-encoded. */
function encodeActor(actor: string): string {
  const parts = actor.split("/");
  if (parts.length !== 3 || parts.some((part) => part === "")) {
    throw new TypeError(`not an actor (tenant/class/name): ${JSON.stringify(actor)}`);
  }
  return parts.map(encodeURIComponent).join("/");
}

/** The header form back to `tenant/class/name`, or `undefined` when it is not one. */
function decodeActor(encoded: string): string | undefined {
  if (!ACTOR_PATTERN.test(encoded)) return undefined;
  let parts: string[];
  try {
    parts = encoded.split("/").map(decodeURIComponent);
  } catch {
    return undefined;
  }
  // A "/" inside a part would make the actor read back as another one.
  return parts.some((part) => part.includes("/")) ? undefined : parts.join("/");
}

/** Two lowercase hex digits per byte value. */
const HEX_BYTE = Array.from({ length: 256 }, (_, b) => b.toString(16).padStart(2, "0"));

/** Lowercase hex of `bytes`; a table, since `randomHex`'s map and join cost 6 µs a nonce. */
function hex(bytes: Uint8Array): string {
  let out = "";
  for (const b of bytes) out += HEX_BYTE[b];
  return out;
}

/**
 * Compares two hex strings in time that depends on their length only (both
 * are 64 digits here), so the answer's timing says nothing of how much of a
 * forged MAC was right.
 */
function equalHex(a: string, b: string): boolean {
  if (a.length !== b.length) return false;
  let diff = 0;
  for (let i = 0; i < a.length; i++) diff |= a.charCodeAt(i) ^ b.charCodeAt(i);
  return diff === 0;
}
