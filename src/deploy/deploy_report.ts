/**
 * What `wasmkeep deploy` says about a new version: the changes from the
 * version before it (class code, rules, configuration names, required
 * names) and warnings. Configuration values are never part of any line.
 *
 * @module
 */

import { formatAccessRule } from "./access_rule.ts";
import type { AppVersion, ClassVersion } from "./manifest.ts";

/** Hex digits of a component's SHA-256 shown in messages. */
const SHORT_HASH = 12;

/**
 * The first 12 hex digits of a component's SHA-256, as messages show it.
 *
 * @example
 * ```ts
 * import { shortHash } from "./deploy_report.ts";
 * shortHash("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"); // "6e340b9cffb3"
 * ```
 */
export function shortHash(sha256: string): string {
  return sha256.slice(0, SHORT_HASH);
}

const sorted = (names: Iterable<string>) => [...names].sort();

function listed(names: string[]): string {
  return names.length === 0 ? "none" : names.join(", ");
}

function configLine(name: string, before: ClassVersion, after: ClassVersion): string | undefined {
  const added: string[] = [];
  const changed: string[] = [];
  const removed: string[] = [];
  for (const key of sorted(Object.keys(after.config))) {
    if (!(key in before.config)) added.push(key);
    else if (before.config[key] !== after.config[key]) changed.push(key);
  }
  for (const key of sorted(Object.keys(before.config))) {
    if (!(key in after.config)) removed.push(key);
  }
  const parts = [
    added.length ? `${added.join(", ")} added` : "",
    changed.length ? `${changed.join(", ")} changed` : "",
    removed.length ? `${removed.join(", ")} removed` : "",
  ].filter(Boolean);
  return parts.length ? `class ${name}: configuration ${parts.join("; ")}` : undefined;
}

function requiresLine(name: string, before: string[], after: string[]): string | undefined {
  const was = sorted(before);
  const now = sorted(after);
  if (was.join(",") === now.join(",")) return undefined;
  return `class ${name}: required names ${listed(now)} (were ${listed(was)})`;
}

/**
 * The lines of what changed from `before` (`null` for an app's first
 * version) to `after`, class by class in name order: code added, changed
 * or removed (with short hashes), rules, configuration names added,
 * changed or removed, required names; and whether rules are deployed from
 * now on. Empty when nothing changed.
 *
 * @example
 * ```ts
 * import { describeChanges } from "./deploy_report.ts";
 * import type { AppVersion } from "./manifest.ts";
 * declare const current: AppVersion | null;
 * declare const next: AppVersion;
 * for (const line of describeChanges(current, next)) console.log(line);
 * // class counter: added (code 6e340b9cffb3, 1234 bytes)
 * ```
 */
export function describeChanges(before: AppVersion | null, after: AppVersion): string[] {
  const lines: string[] = [];
  const was = before?.classes ?? {};
  for (const name of sorted(new Set([...Object.keys(was), ...Object.keys(after.classes)]))) {
    const old = was[name];
    const now = after.classes[name];
    if (!now) {
      lines.push(`class ${name}: removed (was code ${shortHash(old.component)})`);
      continue;
    }
    const empty: ClassVersion = { ...now, access: { kind: "open" }, config: {}, requires: [] };
    if (!old) {
      lines.push(`class ${name}: added (code ${shortHash(now.component)}, ${now.size} bytes)`);
    } else if (old.component !== now.component) {
      lines.push(
        `class ${name}: code changed ${shortHash(old.component)} -> ${shortHash(now.component)}`,
      );
    }
    const from = old ?? empty;
    const rule = [formatAccessRule(from.access), formatAccessRule(now.access)];
    if (rule[0] !== rule[1]) lines.push(`class ${name}: rule ${rule[0]} -> ${rule[1]}`);
    const config = configLine(name, from, now);
    if (config) lines.push(config);
    const requires = requiresLine(name, from.requires, now.requires);
    if (requires) lines.push(requires);
  }
  if (after.rulesDeployed && !before?.rulesDeployed) {
    lines.push(
      "access rules and configuration now come from the deployed version: " +
        "nodes following the app refuse --access from now on",
    );
  }
  return lines;
}

/** Parts of a name that mark a value as a secret (ADMIN_TOKEN, apiKey, DB_PASSWORD...). */
const SECRET_PARTS = new Set([
  "TOKEN",
  "TOKENS",
  "KEY",
  "KEYS",
  "APIKEY",
  "SECRET",
  "SECRETS",
  "PASSWORD",
  "PASSWORDS",
  "PASSWD",
  "PASS",
  "PWD",
  "CREDENTIAL",
  "CREDENTIALS",
  "CREDS",
  "PRIVATE",
]);

/**
 * Whether a configuration name looks like a secret's: one of its parts
 * (split at `_`, `-`, `.` and lower-to-upper case changes) is TOKEN, KEY,
 * SECRET, PASSWORD, PASS, CREDENTIAL, PRIVATE or the like. A part must
 * match whole: `MONKEY` and `PASSAGE` do not.
 *
 * @example
 * ```ts
 * import { looksLikeSecretName } from "./deploy_report.ts";
 * looksLikeSecretName("ADMIN_TOKEN"); // true
 * looksLikeSecretName("apiKey"); // true
 * looksLikeSecretName("GREETING"); // false
 * ```
 */
export function looksLikeSecretName(name: string): boolean {
  return name.replace(/([a-z0-9])([A-Z])/g, "$1_$2").split(/[_.-]+/).some((part) =>
    SECRET_PARTS.has(part.toUpperCase())
  );
}

/** `scheme://user:password@host`: a URL that carries a password (the user may be empty). */
const URL_WITH_PASSWORD = /[a-z][a-z0-9+.-]*:\/\/[^\s/?#@:]*:[^\s/?#@]+@/i;

/**
 * Whether a value holds a URL with a password (`postgres://app:s3cret@db`).
 *
 * @example
 * ```ts
 * import { hasUrlWithPassword } from "./deploy_report.ts";
 * hasUrlWithPassword("postgres://app:s3cret@db/shop"); // true
 * hasUrlWithPassword("https://example.com/a:b@c"); // false
 * ```
 */
export function hasUrlWithPassword(value: string): boolean {
  return URL_WITH_PASSWORD.test(value);
}

const KEEP_SECRETS =
  "--config is stored in the clear in the bucket; keep secrets in serve --env files on each node";

/**
 * Warnings about configuration given in this deploy (`given`: class to the
 * values of its `--config`): names that look like secrets and values that
 * are URLs with a password. Each names the class and the name, never the
 * value.
 *
 * @example
 * ```ts
 * import { configWarnings } from "./deploy_report.ts";
 * configWarnings({ hub: { ADMIN_TOKEN: "x" } });
 * // ["class hub: configuration ADMIN_TOKEN looks like a secret; --config is stored ..."]
 * ```
 */
export function configWarnings(given: Record<string, Record<string, string>>): string[] {
  const warnings: string[] = [];
  for (const className of sorted(Object.keys(given))) {
    for (const name of sorted(Object.keys(given[className]))) {
      if (hasUrlWithPassword(given[className][name])) {
        warnings.push(
          `class ${className}: configuration ${name} is a URL with a password; ${KEEP_SECRETS}`,
        );
      } else if (looksLikeSecretName(name)) {
        warnings.push(
          `class ${className}: configuration ${name} looks like a secret; ${KEEP_SECRETS}`,
        );
      }
    }
  }
  return warnings;
}

/**
 * The warning for a rename that leaves a class open: classes removed from
 * `before` that carried a rule, while classes added in `after` have none.
 * `undefined` when there is no such pair.
 *
 * @example
 * ```ts
 * import { renameWarning } from "./deploy_report.ts";
 * import type { AppVersion } from "./manifest.ts";
 * declare const current: AppVersion | null;
 * declare const next: AppVersion;
 * renameWarning(current, next);
 * // "class chat was removed with the rule existing, and the added class room has none: ..."
 * ```
 */
export function renameWarning(before: AppVersion | null, after: AppVersion): string | undefined {
  if (!before) return undefined;
  const removed = sorted(Object.keys(before.classes)).filter((name) =>
    !(name in after.classes) && before.classes[name].access.kind !== "open"
  );
  const added = sorted(Object.keys(after.classes)).filter((name) =>
    !(name in before.classes) && after.classes[name].access.kind === "open"
  );
  if (removed.length === 0 || added.length === 0) return undefined;
  const rules = removed.map((name) => `${name} (${formatAccessRule(before.classes[name].access)})`);
  return `${removed.length === 1 ? "class" : "classes"} ${rules.join(", ")} removed with a rule, ` +
    `and the added ${added.length === 1 ? "class" : "classes"} ${added.join(", ")} ` +
    `${added.length === 1 ? "has" : "have"} none (open to every client): ` +
    `if this is a rename, deploy again with --access ${added[0]}=RULE`;
}
