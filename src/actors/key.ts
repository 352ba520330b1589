/**
 * Actor keys: tenant, class and name, and the rules names follow.
 *
 * @module
 */

import type { ActorKey } from "../actor_key.ts";

/** The longest class or actor name accepted, in UTF-8 bytes. */
export const MAX_NAME_BYTES = 256;

/** The tenant of actors served without an app (`wasmkeep serve --actor`). */
export const DEFAULT_TENANT = "default";

// Defined below the layers that name actors (the bucket's keys, the
// replication); the actors' side and everything above import it from here.
export type { ActorKey } from "../actor_key.ts";

const utf8 = new TextEncoder();

const CLASS_PATTERN = /^[a-z][a-z0-9_-]{0,62}$/;

/**
 * Why a name is refused, or `undefined` when it is fine. Names end up in file
 * paths and bucket keys, so anything that could escape a directory or confuse
 * a listing is refused.
 *
 * @example
 * ```ts
 * import { actorNameProblem } from "./key.ts";
 * actorNameProblem("alice"); // undefined
 * actorNameProblem(".."); // "the name must not be '.' or '..'"
 * ```
 */
export function actorNameProblem(name: string): string | undefined {
  if (name.length === 0) return "the name is empty";
  // A UTF-16 unit is at most 3 UTF-8 bytes: short names need no encoding.
  if (name.length * 3 > MAX_NAME_BYTES && utf8.encode(name).length > MAX_NAME_BYTES) {
    return `the name is longer than ${MAX_NAME_BYTES} bytes`;
  }
  if (name === "." || name === "..") return "the name must not be '.' or '..'";
  if (name.includes("..")) return "the name must not contain '..'";
  if (name.includes("/")) return "the name must not contain '/'";
  // Unicode's control characters: C0, DEL and C1.
  // deno-lint-ignore no-control-regex
  if (/[\u0000-\u001f\u007f-\u009f]/.test(name)) {
    return "the name must not contain control characters";
  }
  return undefined;
}

/**
 * Why a class name is refused, or `undefined`: lower-case letters, digits,
 * `-` and `_`, starting with a letter, at most 63 characters.
 *
 * @example
 * ```ts
 * import { classNameProblem } from "./key.ts";
 * classNameProblem("counter"); // undefined
 * ```
 */
export function classNameProblem(name: string): string | undefined {
  return CLASS_PATTERN.test(name)
    ? undefined
    : "a class name is lower-case letters, digits, '-' and '_', starting with a letter, at most 63 characters";
}

/**
 * One string for an actor, used for maps and logs: `tenant/class/name`.
 *
 * @example
 * ```ts
 * import { actorKeyString } from "./key.ts";
 * actorKeyString({ tenant: "default", class: "counter", name: "alice" }); // "default/counter/alice"
 * ```
 */
export function actorKeyString(key: ActorKey): string {
  return `${key.tenant}/${key.class}/${key.name}`;
}

/**
 * The file name of an actor's database inside its class directory. Names may
 * hold characters a file system dislikes (`%`, `:` or non-ASCII), so they are
 * percent-encoded; the result never contains `/`.
 *
 * @example
 * ```ts
 * import { actorFileStem } from "./key.ts";
 * actorFileStem("a b"); // "a%20b"
 * ```
 */
export function actorFileStem(name: string): string {
  return encodeURIComponent(name).replaceAll(".", "%2E").replaceAll("*", "%2A");
}
