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

import { type Bucket, listAll, PreconditionFailed } from "../bucket/bucket.ts";
import { appComponentKey, appCurrentKey, appTenantPrefix, appVersionKey } from "../bucket/keys.ts";
import { classNameProblem } from "../actors/key.ts";
import { ComponentError, loadComponent } from "../actors/component.ts";
import { CONFIG_NAME } from "../config/env_file.ts";
import { type AccessRule, formatAccessRule, OPEN, reopens } from "./access_rule.ts";
import { type AppName, appNameString, newAppNameProblem } from "./app_name.ts";
import { type ReadCurrent, readCurrent, readVersion } from "./app_objects.ts";
import {
  type AppVersion,
  type ClassVersion,
  componentHash,
  encodeCurrent,
  encodeVersion,
  MAX_APP_CLASSES,
} from "./manifest.ts";
import { configWarnings, describeChanges, renameWarning } from "./deploy_report.ts";
import {
  collectVersions,
  DEFAULT_VERSION_RETENTION_MS,
  type RetentionResult,
} from "./retention.ts";

/** What one deploy asks for; every map is by class name. */
export interface DeployRequest {
  /**
   * `--actor CLASS=PATH`: with any, these are the version's classes (a
   * current class not among them is removed); with none, the current
   * classes are kept as they are.
   */
  actors?: Record<string, string>;
  /** `--access CLASS=RULE`; `open` removes a rule. */
  access?: Record<string, AccessRule>;
  /** `--config CLASS=FILE`, as parsed; an empty record (`CLASS=`) removes the configuration. */
  config?: Record<string, Record<string, string>>;
  /** `--requires CLASS=NAME,...`; an empty list (`CLASS=`) removes the names. */
  requires?: Record<string, string[]>;
}

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

/** A request that cannot be carried out as given (exit 2): the message names the flag and class. */
export class DeployUsageError extends Error {
  /**
   * @example
   * ```ts
   * import { DeployUsageError } from "./deploy.ts";
   * new DeployUsageError("--access: no class 'x'").message;
   * ```
   */
  constructor(message: string) {
    super(message);
    this.name = "DeployUsageError";
  }
}

/** A deploy or rollback refused (exit 1); nothing current changed. */
export class DeployRefusal extends Error {
  /**
   * @example
   * ```ts
   * import { DeployRefusal } from "./deploy.ts";
   * new DeployRefusal("no version before current").message;
   * ```
   */
  constructor(message: string) {
    super(message);
    this.name = "DeployRefusal";
  }
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

/** A component checked and read: the bytes uploaded are the bytes checked. */
interface CheckedComponent {
  bytes: Uint8Array;
  sha256: string;
}

/**
 * Compiles and checks every component in a cache directory of its own,
 * removed after: a broken one throws {@linkcode ComponentError} before
 * anything is uploaded.
 */
async function checkComponents(
  actors: Record<string, string>,
): Promise<Map<string, CheckedComponent>> {
  const checked = new Map<string, CheckedComponent>();
  const cacheDir = await Deno.makeTempDir({ prefix: "wasmkeep-deploy-" });
  try {
    for (const [className, path] of Object.entries(actors)) {
      const loaded = await loadComponent(className, path, cacheDir);
      let bytes: Uint8Array;
      try {
        bytes = await Deno.readFile(path);
      } catch (error) {
        throw new ComponentError(path, `cannot be read again: ${(error as Error).message}`);
      }
      const sha256 = await componentHash(bytes);
      // The file changed between the check and this read: upload nothing unchecked.
      if (sha256 !== loaded.hash) {
        throw new ComponentError(path, "changed while it was checked; deploy again");
      }
      checked.set(className, { bytes, sha256 });
    }
  } finally {
    await Deno.remove(cacheDir, { recursive: true }).catch(() => {});
  }
  return checked;
}

function checkRequest(request: DeployRequest): void {
  const flags: [string, Record<string, unknown> | undefined][] = [
    ["--actor", request.actors],
    ["--access", request.access],
    ["--config", request.config],
    ["--requires", request.requires],
  ];
  for (const [flag, record] of flags) {
    for (const className of Object.keys(record ?? {})) {
      const problem = classNameProblem(className);
      if (problem) throw new DeployUsageError(`${flag} ${className}=...: ${problem}`);
    }
  }
  for (const [className, names] of Object.entries(request.requires ?? {})) {
    for (const name of names) {
      if (!CONFIG_NAME.test(name)) {
        throw new DeployUsageError(
          `--requires ${className}=${names.join(",")}: '${name}' is not a name ` +
            "(letters, digits, '_', '.' and '-', not starting with a digit, '.' or '-')",
        );
      }
    }
  }
  for (const [className, values] of Object.entries(request.config ?? {})) {
    for (const name of Object.keys(values)) {
      if (!CONFIG_NAME.test(name)) {
        throw new DeployUsageError(`--config ${className}: '${name}' is not a name`);
      }
    }
  }
  if (Object.keys(request.actors ?? {}).length > MAX_APP_CLASSES) {
    throw new DeployUsageError(`a version has at most ${MAX_APP_CLASSES} classes`);
  }
}

/**
 * The other apps of `name`'s tenant that have a `current` on this prefix,
 * as `tenant/app`, in name order: one listing of `apps/<tenant>/`, whose
 * error is thrown.
 *
 * @example
 * ```ts ignore
 * await otherApps(bucket, { tenant: "acme", app: "shop" }); // ["acme/legacy"]
 * ```
 */
export async function otherApps(bucket: Bucket, name: AppName): Promise<string[]> {
  const prefix = appTenantPrefix(name.tenant);
  const apps: string[] = [];
  for await (const object of listAll(bucket, prefix)) {
    const rest = object.key.slice(prefix.length);
    const slash = rest.indexOf("/");
    if (slash <= 0 || rest.slice(slash) !== "/current") continue;
    const app = decodeURIComponent(rest.slice(0, slash));
    if (app !== name.app) apps.push(`${name.tenant}/${app}`);
  }
  return apps;
}

function quoteList(apps: string[]): string {
  return apps.join(", ");
}

/** The checks of an app's first deploy: its names, an --actor, no other app of its tenant. */
async function checkFirstDeploy(
  bucket: Bucket,
  name: AppName,
  request: DeployRequest,
): Promise<void> {
  const problem = newAppNameProblem(name);
  if (problem) {
    throw new DeployUsageError(`--app ${appNameString(name)}: ${problem} (a new app's names)`);
  }
  if (Object.keys(request.actors ?? {}).length === 0) {
    throw new DeployUsageError(
      `the first deploy of ${appNameString(name)} needs at least one --actor CLASS=PATH`,
    );
  }
  let others: string[];
  try {
    others = await otherApps(bucket, name);
  } catch (error) {
    throw new DeployRefusal(
      `cannot list ${appTenantPrefix(name.tenant)} to check that no other app of tenant ` +
        `${name.tenant} is deployed on this prefix (a first deploy needs list access there): ` +
        (error as Error).message,
    );
  }
  if (others.length > 0) {
    throw new DeployRefusal(
      `${others.length === 1 ? "app" : "apps"} ${quoteList(others)} of tenant ${name.tenant} ` +
        `${others.length === 1 ? "is" : "are"} deployed on this prefix ` +
        `(${appTenantPrefix(name.tenant)}<app>/current), and two apps of one tenant on one ` +
        `prefix would share actors: deploy ${appNameString(name)} on another prefix ` +
        `(s3://BUCKET/OTHER-PREFIX) or under another tenant (--app OTHER/${name.app})`,
    );
  }
}

/** The legacy warning for an app deployed beside other apps of its tenant. */
async function legacyWarning(bucket: Bucket, name: AppName): Promise<string | undefined> {
  let others: string[];
  try {
    others = await otherApps(bucket, name);
  } catch (error) {
    return `cannot list ${appTenantPrefix(name.tenant)} to check for other apps of tenant ` +
      `${name.tenant}: ${(error as Error).message}`;
  }
  if (others.length === 0) return undefined;
  return `tenant ${name.tenant} has other apps deployed on this prefix (${quoteList(others)}), ` +
    `from before one app per tenant per prefix: they share actors, so never run them at the ` +
    `same time; a further new app of the tenant is refused`;
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
 * ```ts ignore
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
 * ```ts ignore
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
