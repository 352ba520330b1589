/**
 * The checks `wasmkeep deploy` makes before it writes anything: the
 * request's names, every component (compiled and checked), and an app's
 * first deploy (its names, one app per tenant per prefix). Their errors
 * say whether the request is wrong (exit 2) or refused (exit 1).
 *
 * @module
 */

import { type Bucket, listAll } from "../bucket/bucket.ts";
import { appTenantPrefix } from "../bucket/keys.ts";
import { classNameProblem } from "../actors/key.ts";
import { ComponentError, loadComponent } from "../actors/component.ts";
import { CONFIG_NAME } from "../config/env_file.ts";
import type { AccessRule } from "./access_rule.ts";
import { type AppName, AppNameError, appNameString, newAppNameProblem } from "./app_name.ts";
import { componentHash, MAX_APP_CLASSES } from "./manifest.ts";

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

/** A request that cannot be carried out as given (exit 2): the message names the flag and class. */
export class DeployUsageError extends Error {
  /**
   * @example
   * ```ts
   * import { DeployUsageError } from "./deploy_checks.ts";
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
   * import { DeployRefusal } from "./deploy_checks.ts";
   * new DeployRefusal("no version before current").message;
   * ```
   */
  constructor(message: string) {
    super(message);
    this.name = "DeployRefusal";
  }
}

/** A component checked and read: the bytes uploaded are the bytes checked. */
export interface CheckedComponent {
  bytes: Uint8Array;
  sha256: string;
}

/**
 * Compiles and checks every component (class to file) in a cache directory
 * of its own, removed after: a broken one throws {@linkcode ComponentError}
 * naming the file and why, before anything is uploaded.
 *
 * @example
 * ```ts
 * import { checkComponents } from "./deploy_checks.ts";
 * const checked = await checkComponents({ counter: "examples/counter/counter.wasm" });
 * checked.get("counter")?.sha256;
 * ```
 */
export async function checkComponents(
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

/**
 * Checks the names a request gives: class names, and required and
 * configuration names. Throws {@linkcode DeployUsageError} naming the flag.
 *
 * @example
 * ```ts
 * import { checkRequest } from "./deploy_checks.ts";
 * checkRequest({ requires: { hub: ["ADMIN_TOKEN"] } }); // fine
 * ```
 */
export function checkRequest(request: DeployRequest): void {
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
 * ```ts
 * import { otherApps } from "./deploy_checks.ts";
 * import type { Bucket } from "../bucket/bucket.ts";
 * declare const bucket: Bucket;
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

/**
 * The checks of an app's first deploy: its names ({@linkcode DeployUsageError}),
 * an --actor, and no other app of its tenant with a `current` on this
 * prefix ({@linkcode DeployRefusal}, also when the listing fails).
 *
 * @example
 * ```ts
 * import { checkFirstDeploy } from "./deploy_checks.ts";
 * import type { Bucket } from "../bucket/bucket.ts";
 * declare const bucket: Bucket;
 * await checkFirstDeploy(bucket, { tenant: "acme", app: "shop" }, { actors: { counter: "c.wasm" } });
 * ```
 */
export async function checkFirstDeploy(
  bucket: Bucket,
  name: AppName,
  request: DeployRequest,
): Promise<void> {
  const problem = newAppNameProblem(name);
  if (problem) {
    throw new DeployUsageError(new AppNameError(appNameString(name), problem).message);
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

/**
 * The warning for an app deployed beside other apps of its tenant (from
 * before the check), or one that the listing failed; `undefined` when the
 * app is alone.
 *
 * @example
 * ```ts
 * import { legacyWarning } from "./deploy_checks.ts";
 * import type { Bucket } from "../bucket/bucket.ts";
 * declare const bucket: Bucket;
 * const warning = await legacyWarning(bucket, { tenant: "acme", app: "shop" });
 * ```
 */
export async function legacyWarning(bucket: Bucket, name: AppName): Promise<string | undefined> {
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
