/**
 * The classes a node serves, made from its flags (`--actor`, `--access`,
 * `--config`) or from a deployed version: each component loaded (read from
 * the bucket when this node has not transpiled it yet), its configuration
 * with the node's `--env` over it by name, and its required names checked.
 *
 * @module
 */

import type { Logger } from "../log.ts";
import type { Bucket } from "../bucket/bucket.ts";
import { appComponentKey } from "../bucket/keys.ts";
import {
  cachedComponent,
  componentFromBytes,
  loadComponent,
  type LoadedComponent,
  pruneComponentCache,
} from "../actors/component.ts";
import type { ExecutorClass } from "../actors/protocol.ts";
import { type AccessRule, OPEN } from "./access_rule.ts";
import type { AppName } from "./app_name.ts";
import type { AppVersion } from "./manifest.ts";
import { readComponent } from "./app_objects.ts";
import type { ServedClass } from "./class_catalog.ts";

/**
 * One actor class given to the node (`--actor CLASS=PATH`): the node's
 * options name it, and {@linkcode flagClasses} makes a served class of it.
 *
 * @example
 * ```ts
 * import type { ActorClassOption } from "./served_classes.ts";
 * const counter: ActorClassOption = { className: "counter", path: "counter.wasm" };
 * ```
 */
export interface ActorClassOption {
  className: string;
  path: string;
  /** Named values `config.get` returns. */
  config?: Record<string, string>;
  /** Who reaches the class from outside (`--access CLASS=RULE`); open when unset. */
  access?: AccessRule;
}

/** How a node loads its classes. */
export interface ClassLoading {
  /** Where transpiled components are cached, by content hash. */
  cacheDir: string;
  /** `jco`: jco's glue for every component, never the direct bindings. */
  abi: "auto" | "jco";
  /** The node's `--env` values. */
  env?: Record<string, string>;
  log: Logger;
}

function executorClass(
  loaded: LoadedComponent,
  config: Record<string, string>,
  abi: "auto" | "jco",
): ExecutorClass {
  return {
    className: loaded.className,
    hash: loaded.hash,
    glue: loaded.glue,
    coreModules: loaded.coreModules,
    directModule: abi === "jco" ? undefined : loaded.directModule,
    config,
  };
}

/**
 * A class's configuration as it runs: `deployed`, with the node's `env`
 * over it by name; each name `env` overrides is logged, never its value.
 *
 * @example
 * ```ts
 * import { effectiveConfig } from "./served_classes.ts";
 * import { createLogger } from "../log.ts";
 * const log = createLogger();
 * effectiveConfig("hub", { A: "1" }, { A: "2" }, log); // { A: "2" }, and a warning naming A
 * ```
 */
export function effectiveConfig(
  className: string,
  deployed: Record<string, string>,
  env: Record<string, string> | undefined,
  log: Logger,
): Record<string, string> {
  if (!env) return deployed;
  for (const name of Object.keys(env)) {
    if (Object.hasOwn(deployed, name)) {
      log.warn("an --env value wins over the deployed configuration", { class: className, name });
    }
  }
  return { ...deployed, ...env };
}

/** The names of `requires` that `config` does not set (the empty string counts as set). */
export function missingNames(requires: string[], config: Record<string, string>): string[] {
  return requires.filter((name) => !Object.hasOwn(config, name));
}

/**
 * The classes of a node started with `--actor`: each component loaded (a
 * broken one throws `ComponentError`), with its `--access` rule and its
 * `--config` values (the node's `--env` over them).
 *
 * @example
 * ```ts
 * import { flagClasses } from "./served_classes.ts";
 * import { createLogger } from "../log.ts";
 * declare const actors: Parameters<typeof flagClasses>[0]; // serve's --actor options
 * const classes = await flagClasses(actors, {
 *   cacheDir: ".wasmkeep/cache",
 *   abi: "auto",
 *   log: createLogger(),
 * });
 * ```
 */
export async function flagClasses(
  actors: ActorClassOption[],
  loading: ClassLoading,
): Promise<ServedClass[]> {
  const classes: ServedClass[] = [];
  for (const actor of actors) {
    const loaded = await loadComponent(actor.className, actor.path, loading.cacheDir);
    logLoaded(loading, loaded);
    const config = effectiveConfig(actor.className, actor.config ?? {}, loading.env, loading.log);
    classes.push({
      spec: executorClass(loaded, config, loading.abi),
      access: actor.access ?? OPEN,
      missing: [],
    });
  }
  await pruneCache(loading, classes);
  return classes;
}

function logLoaded(loading: ClassLoading, loaded: LoadedComponent) {
  loading.log.info("actor class loaded", {
    class: loaded.className,
    path: loaded.path,
    version: loaded.hash.slice(0, 16),
    bindings: loading.abi !== "jco" && loaded.directModule ? "direct" : "jco",
    why_jco: loading.abi === "jco" ? "--abi jco" : loaded.directProblem,
  });
}

/**
 * The classes of a deployed version: each component from this node's cache
 * or read from the bucket (its bytes checked against its hash) and
 * transpiled; the rules the version deploys, or `accessFlags` (the node's
 * `--access`) while the app never deployed any (ADR 0013). Throws what
 * stops the version from being applied here (a component that does not
 * compile, one the bucket does not give): the node keeps its version then.
 *
 * @example
 * ```ts
 * import { type ClassLoading, versionClasses } from "./served_classes.ts";
 * import type { AppVersion } from "./manifest.ts";
 * import type { Bucket } from "../bucket/bucket.ts";
 * declare const bucket: Bucket;
 * declare const version: AppVersion;
 * declare const loading: ClassLoading;
 * const app = { tenant: "acme", app: "shop" };
 * const classes = await versionClasses(bucket, app, version, {}, loading);
 * ```
 */
export async function versionClasses(
  bucket: Bucket,
  app: AppName,
  version: AppVersion,
  accessFlags: Record<string, AccessRule>,
  loading: ClassLoading,
): Promise<ServedClass[]> {
  const classes: ServedClass[] = [];
  for (const [className, deployed] of Object.entries(version.classes)) {
    const key = appComponentKey(app.tenant, app.app, deployed.component);
    let loaded = await cachedComponent(className, deployed.component, key, loading.cacheDir);
    if (!loaded) {
      const bytes = await readComponent(bucket, app, deployed.component);
      loaded = await componentFromBytes(className, key, bytes, loading.cacheDir);
      logLoaded(loading, loaded);
    }
    const config = effectiveConfig(className, deployed.config, loading.env, loading.log);
    classes.push({
      spec: executorClass(loaded, config, loading.abi),
      access: version.rulesDeployed ? deployed.access : accessFlags[className] ?? OPEN,
      missing: missingNames(deployed.requires, config),
    });
  }
  await pruneCache(loading, classes);
  return classes;
}

/** Keeps the cache bounded: the components served, and the spare ones most recently used. */
async function pruneCache(loading: ClassLoading, classes: ServedClass[]): Promise<void> {
  const removed = await pruneComponentCache(loading.cacheDir, classes.map((c) => c.spec.hash))
    .catch((error) => {
      loading.log.warn("could not prune the component cache", {
        dir: loading.cacheDir,
        error: String((error as Error)?.message ?? error),
      });
      return [];
    });
  if (removed.length > 0) {
    loading.log.info("component cache pruned", { removed: removed.length });
  }
}
