/**
 * The cluster's call secret (the spec's "Calls between nodes"): a random key
 * the first node stores at `cluster/secret` in the bucket, which every node
 * reads at start and keys its call signatures with. The key never leaves the
 * node: it is read from the bucket, held in private fields as HMAC states,
 * and never logged. A malformed object stops calls between nodes instead of
 * weakening them, and is never rewritten by a node.
 *
 * The object is text: a first line `wasmkeep-cluster-secret 1` (the format's
 * version) and a second of 64 lowercase hex digits, the 32-byte key.
 *
 * @module
 */

import { createHash, type Hash } from "node:crypto";
import type { Bucket } from "../bucket/bucket.ts";
import { CLUSTER_SECRET_KEY } from "../bucket/keys.ts";
import { BucketUnavailable, PreconditionFailed } from "../bucket/errors.ts";
import { deadline, DeadlineExceeded } from "../bucket/timers.ts";
import { randomHex } from "../bucket/random.ts";
import { uploadWithAttempts } from "../bucket/upload.ts";
import type { Logger } from "../log.ts";
import { type Clock, type Random, systemClock } from "../time/clock.ts";

export { CLUSTER_SECRET_KEY };

/**
 * Bytes of the key (32: SHA-256's output, as RFC 2104 advises for HMAC).
 *
 * @example
 * ```ts
 * import { CLUSTER_SECRET_BYTES } from "./cluster_secret.ts";
 * console.log(CLUSTER_SECRET_BYTES * 2); // 64 hex digits in the object
 * ```
 */
export const CLUSTER_SECRET_BYTES = 32;

/**
 * The version of the object's format this node reads and writes, on its
 * first line after {@linkcode CLUSTER_SECRET_MAGIC}.
 *
 * @example
 * ```ts
 * import { CLUSTER_SECRET_FORMAT } from "./cluster_secret.ts";
 * console.log(CLUSTER_SECRET_FORMAT); // 1
 * ```
 */
export const CLUSTER_SECRET_FORMAT = 1;

/**
 * The word that opens the object's first line, before the format version.
 *
 * @example
 * ```ts
 * import { CLUSTER_SECRET_FORMAT, CLUSTER_SECRET_MAGIC } from "./cluster_secret.ts";
 * console.log(`${CLUSTER_SECRET_MAGIC} ${CLUSTER_SECRET_FORMAT}`); // "wasmkeep-cluster-secret 1"
 * ```
 */
export const CLUSTER_SECRET_MAGIC = "wasmkeep-cluster-secret";

/**
 * Longest wait for the bucket to answer one read of the secret (10 s, two of
 * the client's 5 s read silences): past it the load fails with
 * `BucketUnavailable` and the caller tries again.
 *
 * @example
 * ```ts
 * import { CLUSTER_SECRET_READ_TIMEOUT_MS } from "./cluster_secret.ts";
 * console.log(CLUSTER_SECRET_READ_TIMEOUT_MS); // 10000
 * ```
 */
export const CLUSTER_SECRET_READ_TIMEOUT_MS = 10_000;

/** HMAC's block size for SHA-256 (RFC 2104). */
const HMAC_BLOCK_BYTES = 64;

const SECRET_PATTERN = /^[0-9a-f]{64}$/;
const FIRST_LINE_PATTERN = new RegExp(`^${CLUSTER_SECRET_MAGIC} ([0-9]{1,9})$`);

const FIX_DELETE = "delete it and restart every node (the first to start writes a new one)";

/**
 * Signing or verifying with a secret that was malformed in the bucket: calls
 * between nodes are stopped until it is fixed. The message names the key,
 * what is wrong and the fix.
 *
 * @example
 * ```ts
 * import { ClusterSecret, ClusterSecretUnusable } from "./cluster_secret.ts";
 * const secret = ClusterSecret.parse(new TextEncoder().encode("garbage"));
 * try {
 *   secret.mac("anything");
 * } catch (e) {
 *   console.log(e instanceof ClusterSecretUnusable); // true
 * }
 * ```
 */
export class ClusterSecretUnusable extends Error {
  /** Always `"ClusterSecretUnusable"`, for logs and structured errors. */
  override name = "ClusterSecretUnusable";
}

/**
 * The key that signs calls between nodes, or the reason there is none.
 * Holds the key only as the two HMAC-SHA256 states it starts from (key XOR
 * ipad and key XOR opad, RFC 2104), in private fields: neither the raw key
 * nor its hex appears in `JSON.stringify`, `Deno.inspect` or a log.
 *
 * @example
 * ```ts
 * import { ClusterSecret } from "./cluster_secret.ts";
 * const secret = ClusterSecret.fromBytes(crypto.getRandomValues(new Uint8Array(32)));
 * secret.mac("wasmkeep"); // 64 hex digits
 * ```
 */
export class ClusterSecret {
  readonly #inner: Hash | undefined;
  readonly #outer: Hash | undefined;
  readonly #problem: string | undefined;

  private constructor(states: [Hash, Hash] | undefined, problem: string | undefined) {
    this.#inner = states?.[0];
    this.#outer = states?.[1];
    this.#problem = problem;
  }

  /**
   * A secret from its {@linkcode CLUSTER_SECRET_BYTES} key bytes (the caller
   * keeps and may wipe its array).
   */
  static fromBytes(key: Uint8Array): ClusterSecret {
    if (key.length !== CLUSTER_SECRET_BYTES) {
      throw new RangeError(
        `a cluster secret is ${CLUSTER_SECRET_BYTES} bytes, not ${key.length}`,
      );
    }
    const pads = [0x36, 0x5c].map((pad) => {
      const block = new Uint8Array(HMAC_BLOCK_BYTES).fill(pad);
      for (let i = 0; i < key.length; i++) block[i] ^= key[i];
      return block;
    });
    const states: [Hash, Hash] = [
      createHash("sha256").update(pads[0]),
      createHash("sha256").update(pads[1]),
    ];
    for (const block of pads) block.fill(0);
    return new ClusterSecret(states, undefined);
  }

  /**
   * The secret an object of the bucket holds, or one that refuses every use
   * with what is wrong with it; never throws.
   */
  static parse(body: Uint8Array): ClusterSecret {
    const problem = formatProblem(body);
    if (problem !== undefined) {
      return new ClusterSecret(undefined, unusable(problem.what, problem.fix));
    }
    const hex = new TextDecoder().decode(body).split("\n")[1];
    const key = new Uint8Array(CLUSTER_SECRET_BYTES);
    for (let i = 0; i < key.length; i++) key[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
    if (key.every((b) => b === 0)) {
      return new ClusterSecret(undefined, unusable("its key is all zeros", FIX_DELETE));
    }
    const secret = ClusterSecret.fromBytes(key);
    key.fill(0);
    return secret;
  }

  /** False when the bucket's object was malformed: every use throws. */
  get usable(): boolean {
    return this.#problem === undefined;
  }

  /** Why calls between nodes are stopped (names the key, the fault and the fix), if they are. */
  get problem(): string | undefined {
    return this.#problem;
  }

  /**
   * HMAC-SHA256 of `message` (UTF-8) under the key, as 64 lowercase hex
   * digits. Throws {@linkcode ClusterSecretUnusable} when the secret is malformed.
   */
  mac(message: string): string {
    if (this.#inner === undefined || this.#outer === undefined) {
      throw new ClusterSecretUnusable(this.#problem);
    }
    // Copies of the two keyed states instead of createHmac, whose key setup
    // costs about as much again (8 µs a call, measured); digest("hex")
    // avoids a Buffer per digest, which costs more than the hash here.
    const inner = this.#inner.copy().update(message).digest("hex");
    return this.#outer.copy().update(inner, "hex").digest("hex");
  }
}

/** Options of {@linkcode loadClusterSecret}. */
export interface LoadClusterSecretOptions {
  /**
   * Draws the key of a new secret: a cryptographic source in a node
   * (`systemRandom`), never a seeded one outside tests.
   */
  random: Random;
  /** Says which secret the node uses, and why calls are stopped when it is malformed. */
  log: Logger;
  /** Abandons the load: it rejects with the signal's reason. */
  signal?: AbortSignal;
  /** Bounds the bucket calls; default the system clock. */
  clock?: Clock;
}

/**
 * Reads the cluster's secret from `cluster/secret`, or makes it when the
 * object is absent: 32 random bytes written with `If-None-Match: *`, so of
 * nodes starting together exactly one writes it and the others read theirs.
 * A malformed object gives a secret that refuses every use with the reason
 * (logged at error), and is left as it is.
 *
 * Throws `BucketUnavailable` when the bucket does not answer in time (call
 * again later: a write that may have landed is found by the next read) and
 * `BucketRequestError` when the store refuses the request for good.
 *
 * @example
 * ```ts
 * import { loadClusterSecret } from "./cluster_secret.ts";
 * import { MemoryBucket } from "../bucket/memory.ts";
 * import { systemRandom } from "../time/clock.ts";
 * import { createLogger } from "../log.ts";
 * const secret = await loadClusterSecret(new MemoryBucket(), {
 *   random: systemRandom,
 *   log: createLogger(),
 * });
 * console.log(secret.usable); // true
 * ```
 */
export async function loadClusterSecret(
  bucket: Bucket,
  options: LoadClusterSecretOptions,
): Promise<ClusterSecret> {
  const { random, log, signal, clock = systemClock } = options;
  const existing = await read(bucket, clock, signal);
  if (existing !== null) return found(existing, log, "read");

  const body = new TextEncoder().encode(
    `${CLUSTER_SECRET_MAGIC} ${CLUSTER_SECRET_FORMAT}\n${
      randomHex(random, CLUSTER_SECRET_BYTES)
    }\n`,
  );
  // Read back as every node will read it; a random source that gave only
  // zeros would make a key anyone can guess.
  const secret = ClusterSecret.parse(body);
  if (!secret.usable) {
    body.fill(0);
    throw new Error(
      `not writing a new ${CLUSTER_SECRET_KEY} that every node would refuse (is the random source broken?): ${secret.problem}`,
    );
  }
  try {
    await uploadWithAttempts(bucket, CLUSTER_SECRET_KEY, body, { ifNoneMatch: "*", signal }, clock);
  } catch (e) {
    if (!(e instanceof PreconditionFailed)) throw e;
    // Another node created it first: use theirs.
    const theirs = await read(bucket, clock, signal);
    if (theirs === null) {
      throw new BucketUnavailable(
        `${CLUSTER_SECRET_KEY} was created by another node and deleted before this node read it; try again`,
        { ambiguous: false },
      );
    }
    return found(theirs, log, "read after another node created it");
  } finally {
    body.fill(0);
  }
  log.info("created the cluster secret for calls between nodes", { key: CLUSTER_SECRET_KEY });
  return secret;
}

/** Reads the object within {@linkcode CLUSTER_SECRET_READ_TIMEOUT_MS}. */
async function read(
  bucket: Bucket,
  clock: Clock,
  signal: AbortSignal | undefined,
): Promise<Uint8Array | null> {
  const limit = deadline(
    clock,
    CLUSTER_SECRET_READ_TIMEOUT_MS,
    `read ${CLUSTER_SECRET_KEY}`,
    signal,
  );
  try {
    const object = await bucket.get(CLUSTER_SECRET_KEY, { signal: limit.signal });
    return object?.body ?? null;
  } catch (e) {
    signal?.throwIfAborted();
    if (e instanceof DeadlineExceeded) {
      throw new BucketUnavailable(e.message, { ambiguous: false, cause: e });
    }
    throw e;
  } finally {
    limit.done();
  }
}

function found(body: Uint8Array, log: Logger, how: string): ClusterSecret {
  const secret = ClusterSecret.parse(body);
  body.fill(0);
  if (secret.usable) {
    log.info("using the cluster secret for calls between nodes", { key: CLUSTER_SECRET_KEY, how });
  } else log.error(secret.problem!, { key: CLUSTER_SECRET_KEY });
  return secret;
}

/** What is wrong with the object's text, and the fix, or `undefined` when it is well formed. */
function formatProblem(body: Uint8Array): { what: string; fix: string } | undefined {
  if (body.length === 0) return { what: "it is empty", fix: FIX_DELETE };
  let text: string;
  try {
    text = new TextDecoder("utf-8", { fatal: true }).decode(body);
  } catch {
    return { what: "it is not UTF-8 text", fix: FIX_DELETE };
  }
  const lines = text.endsWith("\n") ? text.slice(0, -1).split("\n") : text.split("\n");
  const first = FIRST_LINE_PATTERN.exec(lines[0]);
  if (first === null) {
    return {
      what: `its first line is not "${CLUSTER_SECRET_MAGIC} ${CLUSTER_SECRET_FORMAT}"`,
      fix: FIX_DELETE,
    };
  }
  if (Number(first[1]) !== CLUSTER_SECRET_FORMAT) {
    return {
      what: `it is in format ${
        first[1]
      }, and this node reads format ${CLUSTER_SECRET_FORMAT} (written by another WasmKeep version?)`,
      fix: "run the same WasmKeep version on every node (see Upgrading WasmKeep)",
    };
  }
  if (lines.length !== 2) return { what: `it has ${lines.length} lines, not 2`, fix: FIX_DELETE };
  if (!SECRET_PATTERN.test(lines[1])) {
    return {
      what: `its second line is not ${CLUSTER_SECRET_BYTES * 2} lowercase hex digits`,
      fix: FIX_DELETE,
    };
  }
  return undefined;
}

function unusable(what: string, fix: string): string {
  return `calls between nodes are stopped until ${CLUSTER_SECRET_KEY} is fixed: ${what}; ${fix}`;
}
