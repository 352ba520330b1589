/**
 * An app's name, `TENANT/APP` (`--app acme/shop`): the tenant its actors are
 * keyed by and the app under `apps/<tenant>/<app>/`.
 *
 * @module
 */

/** The names a new tenant or app may take: `[a-z][a-z0-9-]{0,63}`. */
export const NEW_APP_NAME = /^[a-z][a-z0-9-]{0,63}$/;

/** A tenant and an app. */
export interface AppName {
  tenant: string;
  app: string;
}

/** Raised for an `--app` value that is not `TENANT/APP`; the message says why. */
export class AppNameError extends Error {
  /**
   * @example
   * ```ts
   * import { AppNameError } from "./app_name.ts";
   * new AppNameError("acme", "it has no '/'").message;
   * ```
   */
  constructor(readonly value: string, problem: string) {
    super(`--app must be TENANT/APP, not '${value}': ${problem}`);
    this.name = "AppNameError";
  }
}

/**
 * Parses `TENANT/APP`. Both parts are checked only for what a bucket key
 * needs (an app deployed earlier keeps its name); a first deploy also
 * checks {@linkcode newAppNameProblem}.
 *
 * @example
 * ```ts
 * import { parseAppName } from "./app_name.ts";
 * parseAppName("acme/shop"); // { tenant: "acme", app: "shop" }
 * ```
 */
export function parseAppName(value: string): AppName {
  const parts = value.split("/");
  if (parts.length !== 2) throw new AppNameError(value, "it needs exactly one '/'");
  const [tenant, app] = parts;
  for (const [what, part] of [["tenant", tenant], ["app", app]]) {
    if (part === "" || part === "." || part === "..") {
      throw new AppNameError(value, `the ${what} name is empty or a dot`);
    }
    if (part.length > 64 || !/^[a-z0-9][a-z0-9_-]*$/.test(part)) {
      throw new AppNameError(
        value,
        `the ${what} name must be lower-case letters, digits, '-' or '_', at most 64`,
      );
    }
  }
  return { tenant, app };
}

/**
 * Why a new app's names are refused, or `undefined`: a first deploy's
 * tenant and app match {@linkcode NEW_APP_NAME}.
 *
 * @example
 * ```ts
 * import { newAppNameProblem } from "./app_name.ts";
 * newAppNameProblem({ tenant: "acme", app: "shop" }); // undefined
 * newAppNameProblem({ tenant: "acme", app: "9shop" }); // "the app name '9shop' must match ..."
 * ```
 */
export function newAppNameProblem(name: AppName): string | undefined {
  for (const [what, part] of [["tenant", name.tenant], ["app", name.app]]) {
    if (!NEW_APP_NAME.test(part)) {
      return `the ${what} name '${part}' must match [a-z][a-z0-9-]{0,63}`;
    }
  }
  return undefined;
}

/**
 * `tenant/app`, as heartbeats and `cluster status` show it.
 *
 * @example
 * ```ts
 * import { appNameString } from "./app_name.ts";
 * appNameString({ tenant: "acme", app: "shop" }); // "acme/shop"
 * ```
 */
export function appNameString(name: AppName): string {
  return `${name.tenant}/${name.app}`;
}
