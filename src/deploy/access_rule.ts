/**
 * Access rules (ADR 0010): which requests from outside reach a class's
 * actors. Calls between actors (`actors.call`) are never refused by them.
 *
 * - `open`: every actor, created by its first request;
 * - `existing`: only actors that exist (a request for one never created
 *   answers 404);
 * - `existing:NAME`: as `existing`, and the actor NAME may be created;
 * - `internal`: none (403, before any wait); only actors reach it.
 *
 * @module
 */

import { actorNameProblem } from "../actors/key.ts";

/** A class's rule. */
export type AccessRule =
  | { kind: "open" }
  | { kind: "existing"; creatable?: string }
  | { kind: "internal" };

/** The rule of a class that has none. */
export const OPEN: AccessRule = { kind: "open" };

/** Raised for a rule that cannot be read; the message names the rules there are. */
export class AccessRuleError extends Error {
  /**
   * @example
   * ```ts
   * import { AccessRuleError } from "./access_rule.ts";
   * new AccessRuleError("closed").message;
   * ```
   */
  constructor(readonly value: string, detail?: string) {
    super(
      `'${value}' is not an access rule${
        detail ? ` (${detail})` : ""
      }: open, existing, existing:NAME or internal`,
    );
    this.name = "AccessRuleError";
  }
}

/**
 * Parses a rule as `--access CLASS=RULE` and a manifest write it.
 *
 * @example
 * ```ts
 * import { parseAccessRule } from "./access_rule.ts";
 * parseAccessRule("existing:main"); // { kind: "existing", creatable: "main" }
 * ```
 */
export function parseAccessRule(value: string): AccessRule {
  if (value === "open") return OPEN;
  if (value === "internal") return { kind: "internal" };
  if (value === "existing") return { kind: "existing" };
  if (value.startsWith("existing:")) {
    const name = value.slice("existing:".length);
    const problem = actorNameProblem(name);
    if (problem) throw new AccessRuleError(value, problem);
    return { kind: "existing", creatable: name };
  }
  throw new AccessRuleError(value);
}

/**
 * The rule as written: `open`, `existing`, `existing:NAME`, `internal`.
 *
 * @example
 * ```ts
 * import { formatAccessRule } from "./access_rule.ts";
 * formatAccessRule({ kind: "existing", creatable: "main" }); // "existing:main"
 * ```
 */
export function formatAccessRule(rule: AccessRule): string {
  if (rule.kind === "existing" && rule.creatable !== undefined) {
    return `existing:${rule.creatable}`;
  }
  return rule.kind;
}

/**
 * How open a rule is, from `internal` (0) to `open` (3), for the rollback
 * that would make a class more open.
 *
 * @example
 * ```ts
 * import { openness } from "./access_rule.ts";
 * openness({ kind: "open" }) > openness({ kind: "existing" }); // true
 * ```
 */
export function openness(rule: AccessRule): number {
  switch (rule.kind) {
    case "internal":
      return 0;
    case "existing":
      return rule.creatable === undefined ? 1 : 2;
    case "open":
      return 3;
  }
}

/**
 * Whether `next` lets through something `now` refuses: more open, or an
 * `existing:NAME` naming another actor.
 *
 * @example
 * ```ts
 * import { reopens } from "./access_rule.ts";
 * reopens({ kind: "existing" }, { kind: "open" }); // true
 * reopens({ kind: "open" }, { kind: "internal" }); // false
 * ```
 */
export function reopens(now: AccessRule, next: AccessRule): boolean {
  if (openness(next) > openness(now)) return true;
  return now.kind === "existing" && next.kind === "existing" &&
    next.creatable !== undefined && next.creatable !== now.creatable;
}

/** What a rule decides for a request from outside. */
export type AccessVerdict = "run" | "existing-only" | "internal";

/**
 * What `rule` lets a client do with the actor `name`: run it (and create
 * it), run it only if it exists, or nothing.
 *
 * @example
 * ```ts
 * import { clientAccess } from "./access_rule.ts";
 * clientAccess({ kind: "existing", creatable: "main" }, "main"); // "run"
 * clientAccess({ kind: "existing", creatable: "main" }, "other"); // "existing-only"
 * ```
 */
export function clientAccess(rule: AccessRule, name: string): AccessVerdict {
  switch (rule.kind) {
    case "open":
      return "run";
    case "internal":
      return "internal";
    case "existing":
      return rule.creatable === name ? "run" : "existing-only";
  }
}
