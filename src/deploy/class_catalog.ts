/**
 * The classes a node serves now, with what decides who reaches them: their
 * access rules and their required names, beside the classes as executors
 * run them (code and configuration). A node started with `--actor` has one
 * catalog for its life; a node that follows an app replaces it with each
 * version it applies, at once for every request (ADR 0013: the rules change
 * at the moment the code they come with does).
 *
 * @module
 */

import type { ExecutorClass } from "../actors/protocol.ts";
import { type AccessRule, type AccessVerdict, clientAccess, OPEN } from "./access_rule.ts";

/** One class as the node serves it. */
export interface ServedClass {
  /** As executors run it: its code, and its configuration (the deployed one, `--env` over it). */
  spec: ExecutorClass;
  access: AccessRule;
  /** Required names (`--requires`) that no value sets now. */
  missing: string[];
}

/** What a node serves: a version's classes, or its flags'. */
export interface CatalogVersion {
  /** The seq of the app's version (ADR 0008); 0 without an app. */
  seq: number;
  /** The line its seq counts in (manifest.ts `AppVersion.line`); "" without one. */
  line?: string;
  /** The version's id, for logs and `cluster status`; `undefined` without an app. */
  id?: string;
  classes: ServedClass[];
}

/**
 * The classes a node serves now.
 *
 * @example
 * ```ts
 * import { ClassCatalog } from "./class_catalog.ts";
 * const catalog = new ClassCatalog({ seq: 0, classes: [] });
 * catalog.has("counter"); // false
 * ```
 */
export class ClassCatalog {
  #version: CatalogVersion;
  #byName: Map<string, ServedClass>;

  constructor(version: CatalogVersion) {
    this.#version = version;
    this.#byName = new Map(version.classes.map((c) => [c.spec.className, c]));
  }

  /** Serves `version` from now on. */
  replace(version: CatalogVersion): void {
    this.#version = version;
    this.#byName = new Map(version.classes.map((c) => [c.spec.className, c]));
  }

  /** The version served. */
  get version(): CatalogVersion {
    return this.#version;
  }

  /** The seq of the version served (0 without an app). */
  get seq(): number {
    return this.#version.seq;
  }

  /** The classes as executors run them. */
  specs(): ExecutorClass[] {
    return this.#version.classes.map((c) => c.spec);
  }

  /** Whether the node serves class `name`. */
  has(name: string): boolean {
    return this.#byName.has(name);
  }

  /** The class's rule (`open` for a class not served). */
  rule(name: string): AccessRule {
    return this.#byName.get(name)?.access ?? OPEN;
  }

  /** What the class's rule lets a client do with the actor `actorName`. */
  access(className: string, actorName: string): AccessVerdict {
    return clientAccess(this.rule(className), actorName);
  }

  /** The class's required names unset now, or `undefined` when none is missing. */
  missing(name: string): string[] | undefined {
    const missing = this.#byName.get(name)?.missing;
    return missing && missing.length > 0 ? missing : undefined;
  }
}
