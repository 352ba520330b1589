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

/** What {@linkcode NEW_APP_NAME} asks, in the one message every refused name gets. */
const NAME_RULE =
  "[a-z][a-z0-9-]{0,63} (a lower-case letter, then lower-case letters, digits or '-')";

/**
 * The names a served tenant or app may have. Names deployed before the rule
 * (one with `_` or a leading digit) keep being served: they are only refused
 * what a bucket key cannot hold.
 *
 * @example
 * ```ts
 * import { DEPLOYED_APP_NAME } from "./app_name.ts";
 * DEPLOYED_APP_NAME.test("acme_2"); // true
 * ```
 */
export const DEPLOYED_APP_NAME = /^[a-z0-9][a-z0-9_-]{0,63}$/;

function nameProblem(what: string, part: string): string {
  return `the ${what} name '${part}' must match ${NAME_RULE}`;
}

/**
 * Parses `TENANT/APP`. A part a bucket key cannot hold is refused with the
 * rule for names ({@linkcode NEW_APP_NAME}), the one a first deploy checks
 * ({@linkcode newAppNameProblem}); a name outside the rule but deployed
 * before it is let through, so that its app keeps being served.
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
    if (!DEPLOYED_APP_NAME.test(part)) throw new AppNameError(value, nameProblem(what, part));
  }
  return { tenant, app };
}

/**
 * Why a new app's names are refused, or `undefined`: a first deploy's
 * tenant and app match {@linkcode NEW_APP_NAME}. The message is the one
 * {@linkcode parseAppName} gives.
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
    if (!NEW_APP_NAME.test(part)) return nameProblem(what, part);
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
