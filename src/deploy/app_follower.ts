/**
 * A node's following of its app (`serve --app`): it reads the app's
 * `current` at start and every 3 s, and applies a new version (its
 * classes to the executors, then its rules and required names to the
 * requests) in one step. A version it cannot apply (a manifest it cannot
 * read, a component that does not compile here or the bucket does not
 * give) leaves the previous one in place and the node not ready, until a
 * later check applies one. The versions it applies only go forward within
 * their line (ADR 0008): a `current` below the seq applied (a bucket
 * restored from a backup) is refused, and the node stays not ready until
 * restarted; one of a new line (the app deployed anew after its `current`
 * was deleted) is applied.
 *
 * @module
 */

import type { Logger } from "../log.ts";
import type { Clock, Timer } from "../time/clock.ts";
import type { Bucket } from "../bucket/bucket.ts";
import { describeError } from "../describe_error.ts";
import { ComponentError, TranspileFailure } from "../actors/component.ts";
import { APP_POLL_MS } from "../limits.ts";
import { type AppName, appNameString } from "./app_name.ts";
import { type AppVersion, ManifestError } from "./manifest.ts";
import { readCurrent, readVersion } from "./app_objects.ts";
import type { CatalogVersion, ClassCatalog, ServedClass } from "./class_catalog.ts";

/** What a follower is made of. */
export interface AppFollowerOptions {
  bucket: Bucket;
  app: AppName;
  clock: Clock;
  log: Logger;
  /** The catalog requests are served from: replaced by each version applied. */
  catalog: ClassCatalog;
  /** The classes of a version as this node serves them (served_classes.ts `versionClasses`). */
  load(version: AppVersion): Promise<ServedClass[]>;
  /** Whether the node was given `--access` (ignored once the app deploys rules, logged). */
  hasAccessFlags: boolean;
  /**
   * Why this node may not take `version` as the first it serves, if it may
   * not: its `--access` once the app deploys rules (ADR 0013). The node
   * then serves nothing and stays not ready with that reason.
   */
  firstRefusal?: (id: string, version: AppVersion) => string | undefined;
}

/**
 * Follows one app.
 *
 * @example
 * ```ts
 * import { AppFollower, type AppFollowerOptions } from "./app_follower.ts";
 * import type { ExecutorPool } from "../actors/executor_pool.ts";
 * declare const o: AppFollowerOptions;
 * declare const pool: ExecutorPool;
 * const { bucket, app, clock, log, catalog, load } = o;
 * const follower = new AppFollower({ bucket, app, clock, log, catalog, load, hasAccessFlags: false });
 * await follower.check();
 * follower.onApplied((version) =>
 *   pool.setClasses(version.seq, version.line ?? "", version.classes.map((c) => c.spec))
 * );
 * follower.start();
 * ```
 */
export class AppFollower {
  readonly #o: AppFollowerOptions;
  #applied: { id: string; version: AppVersion } | undefined;
  #problem: string | undefined = "reading the app's current version";
  #checking: Promise<void> | undefined;
  #again = false;
  #timer: Timer | undefined;
  #stopped = false;
  #onApplied: ((version: CatalogVersion) => void) | undefined;
  /** The missing names logged last, by class, so that each is logged once. */
  #missingLogged = new Map<string, string>();
  #rulesLogged: boolean | undefined;
  #firstRefused: string | undefined;

  constructor(options: AppFollowerOptions) {
    this.#o = options;
  }

  /** Told each version applied, before requests see it (the executors get its classes first). */
  onApplied(listener: (version: CatalogVersion) => void): void {
    this.#onApplied = listener;
  }

  /** The version applied, if any. */
  get applied(): { id: string; version: AppVersion } | undefined {
    return this.#applied;
  }

  /** Why the first version the node would serve was refused (`firstRefusal`), if it was. */
  get firstRefused(): string | undefined {
    return this.#firstRefused;
  }

  /** Why the node is not ready because of its app, or `undefined`. */
  notReady(): string | undefined {
    return this.#problem;
  }

  /** Checks every {@linkcode APP_POLL_MS} from now until {@linkcode AppFollower.stop}. */
  start(): void {
    if (this.#stopped || this.#timer) return;
    const tick = () => {
      if (this.#stopped) return;
      this.#timer = this.#o.clock.setTimer(APP_POLL_MS, () => {
        void this.check().finally(tick);
      });
    };
    tick();
  }

  /** Stops the checks. */
  stop(): void {
    this.#stopped = true;
    this.#timer?.cancel();
  }

  /**
   * Reads `current` and applies a new version. A check asked for while one
   * runs runs once after it (an actor that ran a later version asks).
   */
  check(): Promise<void> {
    if (this.#checking) {
      this.#again = true;
      return this.#checking;
    }
    this.#checking = (async () => {
      try {
        do {
          this.#again = false;
          await this.#checkOnce();
        } while (this.#again && !this.#stopped);
      } finally {
        this.#checking = undefined;
      }
    })();
    return this.#checking;
  }

  async #checkOnce(): Promise<void> {
    const { bucket, app, log } = this.#o;
    const name = appNameString(app);
    let read;
    try {
      read = await readCurrent(bucket, app);
    } catch (error) {
      if (error instanceof ManifestError) {
        this.#refuse(error.message);
      } else if (!this.#applied) {
        this.#problem = `the bucket did not answer the read of the app's current version`;
      }
      log.warn("the app's current version could not be read", {
        app: name,
        error: describeError(error),
      });
      return;
    }
    if (!read) {
      // A current deleted by hand leaves this node with what it has.
      if (!this.#applied) {
        this.#problem =
          `the app ${name} has no deployed version yet (wasmkeep deploy --app ${name})`;
      }
      return;
    }
    const { current } = read;
    const applied = this.#applied;
    if (applied && current.version === applied.id) {
      this.#problem = undefined;
      return;
    }
    let version: AppVersion;
    let classes: ServedClass[];
    try {
      version = await readVersion(bucket, app, current.version);
      if (version.seq !== current.seq) {
        throw new ManifestError(
          current.version,
          `its seq ${version.seq} is not the seq ${current.seq} current gives it`,
        );
      }
      const refusal = applied ? undefined : this.#o.firstRefusal?.(current.version, version);
      if (refusal) {
        this.#firstRefused = refusal;
        this.#refuse(refusal);
        return;
      }
      // Within a line seqs only go up; a new line (the app deployed anew
      // after its current was deleted) starts again.
      if (
        applied && current.seq <= applied.version.seq &&
        (version.line ?? "") === (applied.version.line ?? "")
      ) {
        this.#refuse(
          `the app's current version ${current.version} has seq ${current.seq}, not above the seq ${applied.version.seq} this node runs (a bucket restored from a backup?); restart the node`,
        );
        return;
      }
      classes = await this.#o.load(version);
    } catch (error) {
      if (error instanceof ManifestError || error instanceof ComponentError) {
        this.#refuse(
          `the app's version ${current.version} (seq ${current.seq}) cannot be applied: ${error.message}`,
        );
      } else if (!applied) {
        // Not a refusal: the next check tries again.
        this.#problem = error instanceof TranspileFailure
          ? `the app's version ${current.version} is not applied yet: ${error.message}`
          : "the bucket did not answer the read of the app's version";
      }
      log.warn("the app's version could not be applied", {
        app: name,
        version: current.version,
        seq: current.seq,
        error: describeError(error),
      });
      return;
    }
    this.#apply(current.version, version, classes);
  }

  #refuse(problem: string) {
    if (this.#problem !== problem) this.#o.log.error("the node keeps its app version", { problem });
    this.#problem = problem;
  }

  #apply(id: string, version: AppVersion, classes: ServedClass[]) {
    const next: CatalogVersion = { seq: version.seq, line: version.line ?? "", id, classes };
    this.#onApplied?.(next);
    this.#o.catalog.replace(next);
    this.#applied = { id, version };
    this.#problem = undefined;
    this.#o.log.info("app version applied", {
      app: appNameString(this.#o.app),
      version: id,
      seq: version.seq,
      classes: classes.map((c) => c.spec.className).join(","),
    });
    this.#logRules(version);
    this.#logMissing(classes);
  }

  #logRules(version: AppVersion) {
    if (this.#rulesLogged === version.rulesDeployed) return;
    this.#rulesLogged = version.rulesDeployed;
    if (version.rulesDeployed && this.#o.hasAccessFlags) {
      this.#o.log.warn(
        "--access is now ignored: the app deploys its own access rules; remove --access from this node's command line",
        { app: appNameString(this.#o.app) },
      );
    } else if (!version.rulesDeployed && !this.#o.hasAccessFlags) {
      this.#o.log.info(
        "the app never deployed access rules and this node has no --access: every class is open",
        { app: appNameString(this.#o.app) },
      );
    }
  }

  #logMissing(classes: ServedClass[]) {
    const now = new Map<string, string>();
    for (const c of classes) {
      if (c.missing.length > 0) now.set(c.spec.className, c.missing.join(","));
    }
    for (const [className, names] of now) {
      if (this.#missingLogged.get(className) === names) continue;
      this.#o.log.warn(
        "a class is missing required values: its requests get 503 until they are set",
        { class: className, missing: names },
      );
    }
    this.#missingLogged = now;
  }
}
