/**
 * Deploys in the simulator (issue 20): the app every node follows, a deploy
 * client that moves its `current` while actors move between nodes, and the
 * invariant that an actor never runs older code.
 *
 * The nodes follow the app with the real `AppFollower` (src/deploy/), on
 * their own clocks and views of the bucket; the simulator gives it only its
 * `load`, which makes each class of a version the simulated program, its
 * `hash` the version's component (so a changed component is another
 * program, and the runtime makes new instances of its actors). The client
 * writes each version with the real encoding (`encodeVersion`,
 * `encodeCurrent`) and moves `current` by a conditional write on the etag it
 * read, as `wasmkeep deploy` does (`deploy()` itself compiles components
 * from files, which the simulated program has none of). The versions are
 * encoded before the time line starts: their ids are SHA-256 digests, which
 * Web Crypto computes off the time line.
 *
 * - `older-code`: the deploy seq an actor's instances are made under never
 *   goes below the seq of an event of it that was answered (`done`) earlier.
 *   An answer under a new seq waits until the seq recorded with the actor
 *   landed in the bucket (src/executor/deploy_seq.ts), so an answered seq
 *   is durable; an event that failed (its commits lost with a give-up) may
 *   leave a seq that never landed, and a later holder may legitimately run
 *   the actor under an older version then: only answered events count. A
 *   delete of the actor forgets it (its database, and the seq it recorded,
 *   go with it).
 *
 * @module
 */

import { type ActorKey, actorKeyString } from "../src/actors/key.ts";
import { appCurrentKey, appVersionKey } from "../src/bucket/keys.ts";
import { OPEN } from "../src/deploy/access_rule.ts";
import type { AppName } from "../src/deploy/app_name.ts";
import { readCurrent } from "../src/deploy/app_objects.ts";
import {
  type CatalogVersion,
  ClassCatalog,
  type ServedClass,
} from "../src/deploy/class_catalog.ts";
import {
  type AppVersion,
  type ClassVersion,
  encodeCurrent,
  encodeVersion,
} from "../src/deploy/manifest.ts";
import { describeError } from "../src/describe_error.ts";
import type { PutOptions } from "../src/bucket/bucket.ts";
import { between } from "./bucket.ts";
import { exp, short, type SimContext } from "./context.ts";
import { simClass } from "./executor_host.ts";
import type { SimProcess } from "./processes.ts";

/** The app the run's nodes follow: its tenant is the one the workload's actors are keyed by. */
export const SIM_APP: AppName = { tenant: "default", app: "sim" };

/** Most versions a run deploys. */
const MAX_VERSIONS = 200;

/** One version, encoded before the run. */
interface Planned {
  id: string;
  bytes: Uint8Array;
  version: AppVersion;
  /** When the client begins to deploy it (the time line's ms). */
  at: number;
}

/** The classes of a version as a simulated node serves them: the simulated program, per component. */
export function simLoad(version: AppVersion): Promise<ServedClass[]> {
  return Promise.resolve(
    Object.entries(version.classes).map(([name, c]) => ({
      spec: { ...simClass(name), hash: `sim-${c.component.slice(0, 16)}` },
      access: c.access,
      missing: [],
    })),
  );
}

/**
 * A process's catalog, which tells the run of each version its follower
 * applied (the follower replaces the catalog's version with each).
 */
export class ObservedCatalog extends ClassCatalog {
  constructor(readonly onReplace: (version: CatalogVersion) => void) {
    super({ seq: 0, classes: [] });
  }

  override replace(version: CatalogVersion): void {
    super.replace(version);
    this.onReplace(version);
  }
}

/**
 * The run's deploys: the client, and the `older-code` invariant.
 *
 * @example
 * ```ts ignore
 * const deploys = new SimDeploys(ctx, quietAt, ["counter", "room", "cart"]);
 * await deploys.prepare();
 * deploys.start();
 * ```
 */
export class SimDeploys {
  readonly #ctx: SimContext;
  readonly #quietAt: number;
  readonly #classes: string[];
  readonly #planned: Planned[] = [];
  #next = 0;
  /** The highest seq an answered event of each actor ran under, by actor id. */
  readonly #answered = new Map<string, { seq: number; by: string; at: number }>();

  constructor(ctx: SimContext, quietAt: number, classes: string[]) {
    this.#ctx = ctx;
    this.#quietAt = quietAt;
    this.#classes = classes;
  }

  /**
   * Draws and encodes the run's versions: the first at once, then one every
   * `gapMs` on average until the quiet phase, each class's component
   * changed with the seed's chance (one class at least).
   */
  async prepare(): Promise<void> {
    const ctx = this.#ctx;
    const r = ctx.draws.deploys;
    const component = () =>
      Array.from({ length: 64 }, () => Math.floor(r.next() * 16).toString(16)).join("");
    const classes: Record<string, ClassVersion> = {};
    for (const name of this.#classes) {
      classes[name] = { component: component(), size: 1, access: OPEN, config: {}, requires: [] };
    }
    let at = ctx.sched.now + between(r, 0, 1_500);
    let previous: string | null = null;
    for (let seq = 1; seq <= MAX_VERSIONS && at < this.#quietAt; seq++) {
      if (seq > 1) {
        const changed = this.#classes.filter(() => r.next() < ctx.swarm.deploys.change);
        if (changed.length === 0) {
          changed.push(this.#classes[Math.floor(r.next() * this.#classes.length)]);
        }
        for (const name of changed) classes[name] = { ...classes[name], component: component() };
      }
      const version: AppVersion = {
        app: `${SIM_APP.tenant}/${SIM_APP.app}`,
        seq,
        previous,
        rulesDeployed: false,
        writtenAt: Math.round(at),
        classes: { ...classes },
      };
      const { id, bytes } = await encodeVersion(version);
      this.#planned.push({ id, bytes, version, at });
      previous = id;
      at += exp(r, ctx.swarm.deploys.gapMs);
    }
  }

  /** Starts the client: the first version at once (the nodes have none before it). */
  start(): void {
    const first = this.#planned[0];
    if (first) this.#ctx.sched.at(first.at, () => void this.#deploy());
  }

  /**
   * Deploys the next version: writes it, then moves `current` from the
   * version before it by a conditional write, retried (reading `current`
   * again) until it moved; then waits for the next.
   */
  async #deploy(): Promise<void> {
    const ctx = this.#ctx;
    const planned = this.#planned[this.#next];
    if (!planned || ctx.violation) return;
    const { id, bytes, version } = planned;
    const store = ctx.store;
    try {
      await store.putAs("deploy", appVersionKey(SIM_APP.tenant, SIM_APP.app, id), bytes);
      const read = await readCurrent(store, SIM_APP);
      if (read?.current.version !== id) {
        if ((read?.current.version ?? null) !== version.previous) {
          ctx.fail(
            "simulator-error",
            `the deploy client finds current at ${read?.current.version} (seq ` +
              `${read?.current.seq}), not the version before ${id}`,
          );
          return;
        }
        const condition: PutOptions = read ? { ifMatch: read.etag } : { ifNoneMatch: "*" };
        await store.putAs(
          "deploy",
          appCurrentKey(SIM_APP.tenant, SIM_APP.app),
          encodeCurrent({ version: id, seq: version.seq }),
          condition,
        );
      }
    } catch (error) {
      // A bucket fault (or a lost answer: the next read tells): again soon.
      ctx.log("dep", `deploy of ${id} (seq ${version.seq}) failed: ${describeError(error)}`);
      ctx.sched.after(between(ctx.draws.deploys, 500, 3_000), () => void this.#deploy());
      return;
    }
    ctx.stats.versionsDeployed++;
    ctx.log("dep", `current → ${id} (seq ${version.seq})`);
    this.#next++;
    const next = this.#planned[this.#next];
    if (!next) return;
    ctx.sched.at(Math.max(ctx.sched.now, next.at), () => void this.#deploy());
  }

  /** `proc`'s follower applied `version`. */
  applied(proc: SimProcess, version: CatalogVersion): void {
    const ctx = this.#ctx;
    ctx.stats.versionsApplied++;
    ctx.stats.appliedByNode[proc.node.id] = (ctx.stats.appliedByNode[proc.node.id] ?? 0) + 1;
    ctx.log(proc.name, `applies ${version.id} (seq ${version.seq})`);
  }

  /** An instance of `key` is made on `proc` under seq `seq`: not below an answered one's. */
  ran(proc: SimProcess, key: ActorKey, generation: number, seq: number): void {
    const answered = this.#answered.get(actorKeyString(key));
    if (!answered || seq >= answered.seq) return;
    this.#ctx.fail(
      "older-code",
      `${proc.name} (gen ${generation}) runs ${short(key)} under the app's version seq ${seq}; ` +
        `${answered.by} answered an event of it under seq ${answered.seq} ` +
        `${((this.#ctx.sched.now - answered.at) / 1000).toFixed(3)} s before`,
    );
  }

  /** An event of `key` was answered (`done`) on `proc`, run by an instance made under `seq`. */
  answered(proc: SimProcess, key: ActorKey, generation: number, seq: number): void {
    const id = actorKeyString(key);
    const before = this.#answered.get(id);
    if (before && before.seq >= seq) return;
    this.#answered.set(id, {
      seq,
      by: `${proc.name} (gen ${generation})`,
      at: this.#ctx.sched.now,
    });
  }

  /** `actorId` deleted itself: its recorded seq went with its database. */
  deleted(actorId: string): void {
    this.#answered.delete(actorId);
  }
}
