/**
 * `wasmkeep deploy`: writes a new version of an app to the bucket and makes
 * it current (ADR 0008), or rolls back to the version before current.
 *
 * A deploy checks every component it is given before it touches the
 * bucket, then uploads the components the bucket does not have yet (by
 * content hash), writes the version, and moves `current` with a
 * conditional write: of two deploys at once, one wins and the other fails,
 * leaving `current` as the winner wrote it. A deploy changes what it names
 * and keeps the rest. After a deploy or rollback, old versions are
 * collected ({@linkcode collectVersions}).
 *
 * @module
 */

import { type Bucket, PreconditionFailed } from "../bucket/bucket.ts";
import { randomHex } from "../bucket/random.ts";
import { systemRandom } from "../time/clock.ts";
import { appComponentKey, appCurrentKey, appVersionKey } from "../bucket/keys.ts";
import { formatAccessRule, OPEN, reopens } from "./access_rule.ts";
import { type AppName, appNameString } from "./app_name.ts";
import { type ReadCurrent, readCurrent, readVersion } from "./app_objects.ts";
import { type AppVersion, type ClassVersion, encodeCurrent, encodeVersion } from "./manifest.ts";
import {
  checkComponents,
  type CheckedComponent,
  checkFirstDeploy,
  checkRequest,
  DeployRefusal,
  type DeployRequest,
  DeployUsageError,
  legacyWarning,
} from "./deploy_checks.ts";
import { configWarnings, describeChanges, renameWarning } from "./deploy_report.ts";
import {
  collectVersions,
  DEFAULT_VERSION_RETENTION_MS,
  type RetentionResult,
} from "./retention.ts";

export { DeployRefusal, type DeployRequest, DeployUsageError, otherApps } from "./deploy_checks.ts";

/** How a deploy or rollback runs. */
export interface DeployOptions {
  /** This machine's clock (ms since the epoch): `writtenAt`, and retention's window. */
  now?: () => number;
  /** Retention's window (`--version-retention-secs`); default an hour. */
  retentionMs?: number;
}

/** What a rollback also takes. */
export interface RollbackOptions extends DeployOptions {
  /** Roll back even when a class becomes more open (`--allow-reopen`). */
  allowReopen?: boolean;
}

/** A version with its id. */
export interface IdentifiedVersion {
  id: string;
  version: AppVersion;
}

/** What a deploy or rollback did. */
export interface DeployOutcome {
  /** `unchanged`: the request changes nothing, and nothing was written. */
  kind: "deployed" | "rolled-back" | "unchanged";
  app: AppName;
  /** The version current before, or `null` for the app's first deploy. */
  before: IdentifiedVersion | null;
  /** The version current now (the one before, when unchanged). */
  after: IdentifiedVersion;
  /** For a rollback: the version whose content it brought back. */
  restored?: IdentifiedVersion;
  /** What changed, as {@linkcode describeChanges} says it. */
  changes: string[];
  /** Warnings, without a `warning:` prefix. */
  warnings: string[];
  /** Components uploaded, by SHA-256 (a component already in the bucket is not). */
  uploaded: string[];
  /** What retention deleted, or why it failed (the deploy stands either way); absent when unchanged. */
  retention?: RetentionResult | { error: string };
}

/** Another deploy moved `current` while this one was written. */
export class DeployConflict extends DeployRefusal {
  /**
   * @example
   * ```ts
   * import { DeployConflict } from "./deploy.ts";
   * new DeployConflict({ version: "9cf4de9152d8dd29", seq: 4 }).message;
   * ```
   */
  constructor(readonly winner: { version: string; seq: number } | null) {
    super(
      winner
        ? `another deploy made version ${winner.version} (seq ${winner.seq}) current while this one was written; run deploy again`
        : "another deploy moved current while this one was written; run deploy again",
    );
    this.name = "DeployConflict";
  }
}

function usageForClass(
  flag: string,
  className: string,
  before: AppVersion | null,
  actorsGiven: boolean,
): DeployUsageError {
  if (actorsGiven && before && className in before.classes) {
    return new DeployUsageError(
      `${flag} ${className}=...: class '${className}' is not among this deploy's --actor ` +
        "classes, so the deploy removes it",
    );
  }
  const known = Object.keys(before?.classes ?? {}).sort();
  return new DeployUsageError(
    `${flag} ${className}=...: no class '${className}' in the current version ` +
      `(${known.length ? known.join(", ") : "none"}) and no --actor gives it`,
  );
}

/** The classes of the next version: what the request names changed, the rest kept. */
function nextClasses(
  before: AppVersion | null,
  request: DeployRequest,
  checked: Map<string, CheckedComponent>,
): Record<string, ClassVersion> {
  const base = before?.classes ?? {};
  const actorsGiven = checked.size > 0;
  const classes: Record<string, ClassVersion> = {};
  for (const className of actorsGiven ? checked.keys() : Object.keys(base)) {
    const kept = base[className];
    const code = checked.get(className);
    classes[className] = {
      component: code?.sha256 ?? kept.component,
      size: code?.bytes.length ?? kept.size,
      access: kept?.access ?? OPEN,
      config: kept?.config ?? {},
      requires: kept?.requires ?? [],
    };
  }
  const target = (flag: string, className: string) => {
    const found = classes[className];
    if (!found) throw usageForClass(flag, className, before, actorsGiven);
    return found;
  };
  for (const [className, rule] of Object.entries(request.access ?? {})) {
    target("--access", className).access = rule;
  }
  for (const [className, values] of Object.entries(request.config ?? {})) {
    target("--config", className).config = { ...values };
  }
  for (const [className, names] of Object.entries(request.requires ?? {})) {
    target("--requires", className).requires = [...new Set(names)].sort();
  }
  return classes;
}

function sameClass(a: ClassVersion, b: ClassVersion): boolean {
  const entries = (c: ClassVersion) => JSON.stringify(Object.entries(c.config).sort());
  return a.component === b.component && a.size === b.size &&
    formatAccessRule(a.access) === formatAccessRule(b.access) &&
    entries(a) === entries(b) &&
    [...a.requires].sort().join(",") === [...b.requires].sort().join(",");
}

function sameContent(a: AppVersion, b: AppVersion): boolean {
  const names = Object.keys(a.classes);
  return a.rulesDeployed === b.rulesDeployed &&
    names.length === Object.keys(b.classes).length &&
    names.every((name) => b.classes[name] && sameClass(a.classes[name], b.classes[name]));
}

/** Uploads the components the bucket lacks; returns the hashes uploaded. */
async function uploadComponents(
  bucket: Bucket,
  name: AppName,
  checked: Map<string, CheckedComponent>,
): Promise<string[]> {
  const uploaded: string[] = [];
  const done = new Set<string>();
  for (const { bytes, sha256 } of checked.values()) {
    if (done.has(sha256)) continue;
    done.add(sha256);
    const key = appComponentKey(name.tenant, name.app, sha256);
    if (await bucket.head(key)) continue;
    try {
      await bucket.put(key, bytes, { ifNoneMatch: "*" });
      uploaded.push(sha256);
    } catch (error) {
      // Another deploy uploaded the same bytes first: the key is their hash.
      if (!(error instanceof PreconditionFailed)) throw error;
    }
  }
  return uploaded;
}

/**
 * Writes `version` and moves `current` to it from `read` (or creates
 * `current`). Throws {@linkcode DeployConflict} when another deploy moved
 * it first.
 */
async function writeAndMove(
  bucket: Bucket,
  name: AppName,
  read: ReadCurrent | null,
  version: AppVersion,
): Promise<string> {
  const { id, bytes } = await encodeVersion(version);
  try {
    await bucket.put(appVersionKey(name.tenant, name.app, id), bytes, { ifNoneMatch: "*" });
  } catch (error) {
    // The id is the hash of the bytes: the identical version is there already.
    if (!(error instanceof PreconditionFailed)) throw error;
  }
  const currentKey = appCurrentKey(name.tenant, name.app);
  try {
    await bucket.put(
      currentKey,
      encodeCurrent({ version: id, seq: version.seq }),
      read ? { ifMatch: read.etag } : { ifNoneMatch: "*" },
    );
  } catch (error) {
    if (!(error instanceof PreconditionFailed)) throw error;
    const now = await readCurrent(bucket, name).catch(() => null);
    // A resent write refused against our own first try, which did apply.
    if (error.maybeOwnWrite && now?.current.version === id) return id;
    throw new DeployConflict(now?.current ?? null);
  }
  return id;
}

async function retain(
  bucket: Bucket,
  name: AppName,
  options: DeployOptions,
): Promise<RetentionResult | { error: string }> {
  const now = (options.now ?? Date.now)();
  try {
    return await collectVersions(
      bucket,
      name,
      now,
      options.retentionMs ?? DEFAULT_VERSION_RETENTION_MS,
    );
  } catch (error) {
    return { error: (error as Error).message };
  }
}

async function readCurrentVersion(
  bucket: Bucket,
  name: AppName,
): Promise<{ read: ReadCurrent; current: IdentifiedVersion } | null> {
  const read = await readCurrent(bucket, name);
  if (!read) return null;
  const id = read.current.version;
  try {
    return { read, current: { id, version: await readVersion(bucket, name, id) } };
  } catch (error) {
    throw new DeployRefusal(
      `the current version ${id} (seq ${read.current.seq}) cannot be read, so this deploy ` +
        `cannot keep what it does not name: ${(error as Error).message}`,
    );
  }
}

/** The line field of `version`, to carry into the next one. */
function lineOf(version: AppVersion): { line?: string } {
  return version.line !== undefined ? { line: version.line } : {};
}

/**
 * Deploys `request` to the app `name`: checks every component given, then
 * writes the version and moves `current` to it, then collects old
 * versions. Throws {@linkcode DeployUsageError} for a request that names
 * what is not there, {@linkcode ComponentError} for a broken component
 * (nothing written), {@linkcode DeployRefusal} (and its
 * {@linkcode DeployConflict}) for a refusal, and the bucket's error when it
 * does not answer; `current` is then as it was, or as another deploy wrote
 * it.
 *
 * @example
 * ```ts
 * import { deploy } from "./deploy.ts";
 * import type { Bucket } from "../bucket/bucket.ts";
 * declare const bucket: Bucket;
 * const outcome = await deploy(bucket, { tenant: "acme", app: "shop" }, {
 *   actors: { counter: "examples/counter/counter.wasm" },
 *   access: { counter: { kind: "existing" } },
 * });
 * outcome.after.version.seq; // 1 for a first deploy
 * ```
 */
export async function deploy(
  bucket: Bucket,
  name: AppName,
  request: DeployRequest,
  options: DeployOptions = {},
): Promise<DeployOutcome> {
  checkRequest(request);
  const checked = await checkComponents(request.actors ?? {});
  const found = await readCurrentVersion(bucket, name);
  const warnings: string[] = [];
  if (!found) {
    await checkFirstDeploy(bucket, name, request);
  } else {
    const legacy = await legacyWarning(bucket, name);
    if (legacy) warnings.push(legacy);
  }
  const before = found?.current ?? null;
  const next: AppVersion = {
    app: appNameString(name),
    seq: (found?.read.current.seq ?? 0) + 1,
    // A first deploy starts a line (16 random hex digits); a version written before lines keeps none.
    ...(before ? lineOf(before.version) : { line: randomHex(systemRandom, 8) }),
    previous: before?.id ?? null,
    rulesDeployed: (before?.version.rulesDeployed ?? false) ||
      Object.keys(request.access ?? {}).length > 0 ||
      Object.keys(request.config ?? {}).length > 0,
    writtenAt: (options.now ?? Date.now)(),
    classes: nextClasses(before?.version ?? null, request, checked),
  };
  const rename = renameWarning(before?.version ?? null, next);
  if (rename) warnings.push(rename);
  warnings.push(...configWarnings(request.config ?? {}));
  if (before && sameContent(before.version, next)) {
    return {
      kind: "unchanged",
      app: name,
      before,
      after: before,
      changes: [],
      warnings,
      uploaded: [],
      // The spec's "after every deploy": versions that aged past the window go now too.
      retention: await retain(bucket, name, options),
    };
  }
  const uploaded = await uploadComponents(bucket, name, checked);
  const id = await writeAndMove(bucket, name, found?.read ?? null, next);
  return {
    kind: "deployed",
    app: name,
    before,
    after: { id, version: next },
    changes: describeChanges(before?.version ?? null, next),
    warnings,
    uploaded,
    retention: await retain(bucket, name, options),
  };
}

/**
 * Makes the version before current (current's `previous`) current again,
 * as a new version: its classes, rules, configuration and required names,
 * the seq after current's, current's id as `rolledBackFrom`, and as its
 * previous link the restored version's own, so rollbacks in a row step
 * further back. Refused ({@linkcode DeployRefusal}) when there is no
 * version before current, when a component it names is missing, and when
 * a class would become more open, unless `allowReopen`. Then collects old
 * versions.
 *
 * @example
 * ```ts
 * import { rollback } from "./deploy.ts";
 * import type { Bucket } from "../bucket/bucket.ts";
 * declare const bucket: Bucket;
 * const outcome = await rollback(bucket, { tenant: "acme", app: "shop" });
 * outcome.restored?.id;
 * ```
 */
export async function rollback(
  bucket: Bucket,
  name: AppName,
  options: RollbackOptions = {},
): Promise<DeployOutcome> {
  const found = await readCurrentVersion(bucket, name);
  if (!found) {
    throw new DeployRefusal(`${appNameString(name)} has no current version to roll back`);
  }
  const { read, current } = found;
  const previousId = current.version.previous;
  if (previousId === null) {
    throw new DeployRefusal(
      `no version before the current one ${current.id} (seq ${read.current.seq}) to roll back to`,
    );
  }
  let restored: AppVersion;
  try {
    restored = await readVersion(bucket, name, previousId);
  } catch (error) {
    throw new DeployRefusal(
      `the version before current, ${previousId}, cannot be read: ${(error as Error).message}`,
    );
  }
  if (!options.allowReopen) {
    for (const className of Object.keys(restored.classes).sort()) {
      const now = current.version.classes[className]?.access;
      const then = restored.classes[className].access;
      // A class current does not serve is closed to everyone: any rule but internal opens it.
      if (!now && then.kind !== "internal") {
        throw new DeployRefusal(
          `rolling back to ${previousId} would make class ${className} more open: it is not ` +
            `served now and would be, with the rule ${formatAccessRule(then)}; ` +
            "give --allow-reopen to roll back anyway",
        );
      }
      if (now && reopens(now, then)) {
        throw new DeployRefusal(
          `rolling back to ${previousId} would make class ${className} more open: its rule is ` +
            `${formatAccessRule(now)} now and ${formatAccessRule(then)} in ${previousId}; ` +
            "give --allow-reopen to roll back anyway",
        );
      }
    }
  }
  for (const [className, c] of Object.entries(restored.classes)) {
    if (!(await bucket.head(appComponentKey(name.tenant, name.app, c.component)))) {
      throw new DeployRefusal(
        `version ${previousId} names the component ${c.component} of class ${className}, ` +
          "which is not in the bucket",
      );
    }
  }
  const next: AppVersion = {
    app: appNameString(name),
    seq: read.current.seq + 1,
    ...lineOf(current.version),
    previous: restored.previous,
    rolledBackFrom: current.id,
    rulesDeployed: current.version.rulesDeployed || restored.rulesDeployed,
    writtenAt: (options.now ?? Date.now)(),
    classes: restored.classes,
  };
  const warnings: string[] = [];
  const legacy = await legacyWarning(bucket, name);
  if (legacy) warnings.push(legacy);
  const id = await writeAndMove(bucket, name, read, next);
  return {
    kind: "rolled-back",
    app: name,
    before: current,
    after: { id, version: next },
    restored: { id: previousId, version: restored },
    changes: describeChanges(current.version, next),
    warnings,
    uploaded: [],
    retention: await retain(bucket, name, options),
  };
}
