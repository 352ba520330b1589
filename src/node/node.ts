/**
 * A WasmKeep node's life: {@linkcode WasmKeepNode.start} loads the actor
 * classes and builds the node (assemble.ts); then the node checks its
 * bucket, joins the cluster (the cluster listener, the node id check, the
 * lease, the cluster secret) and serves until it stops: cleanly, or because
 * another writer took its lease. What its lease's changes make it do is
 * here too: a lapse drops every actor, a loss stops the node.
 *
 * @module
 */

import { CLOSE } from "../websockets/actor_sockets.ts";
import { ALARM_HANDOVER_PATH, handOverAlarms } from "../alarms/alarm_handover.ts";
import { alarmTakers } from "../handover/takers.ts";
import { actorRef } from "../actors/call_chain.ts";
import { OWNER_SWEEP_MS, sweepMovedActors } from "../websockets/owner_sweep.ts";
import { type Clock, type Random, systemClock, systemRandom, type Timer } from "../time/clock.ts";
import { createLogger, type Logger } from "../log.ts";
import { ClassCatalog } from "../deploy/class_catalog.ts";
import { AppFollower } from "../deploy/app_follower.ts";
import { flagClasses, versionClasses } from "../deploy/served_classes.ts";
import { appNameString } from "../deploy/app_name.ts";
import { formatAccessRule } from "../deploy/access_rule.ts";
import { tenantApps } from "../cluster/tenant_apps.ts";
import { describeError } from "../describe_error.ts";
import {
  type Bucket,
  FileBucket,
  openBucket,
  probeBucket,
  removeFileLeftovers,
} from "../bucket/mod.ts";
import { S3ConfigError } from "../bucket/s3_config.ts";
import { NodeIdInUse } from "../cluster/node_id_check.ts";
import type { NodeLeaseLost } from "../cluster/lease_loss.ts";
import type { LeaseChangeCause } from "../cluster/node_lease.ts";
import { createNodeIdentity, type NodeIdentity } from "../security/node_identity.ts";
import { ClusterListener } from "../http/cluster_listener.ts";
import { loadClusterSecret } from "../security/cluster_secret.ts";
import { type ClusterOptions, NODE_DEFAULTS, type NodeOptions, NodeStartError } from "./options.ts";
import { assembleNode, type NodeParts, type NodeSeams } from "./assemble.ts";
import { denoListen } from "./listen.ts";
import { identityHosts, isPublicAddress } from "./addresses.ts";
import { ACTORS_DIR } from "../actors/protocol.ts";

/** How often the cluster listener's peers are checked against the heartbeats. */
export const TRUST_SWEEP_MS = 250;

/** Pause between reads of an unreadable cluster secret. */
export const CLUSTER_SECRET_RETRY_MS = 3_000;

/** How often a node that serves but is not ready yet checks again whether it is. */
export const READY_WATCH_MS = 250;

/** How long a stop waits for the listener's connections after the events are done. */
export const SERVER_SHUTDOWN_MS = 1000;

/** Seams for tests and embedders of {@linkcode WasmKeepNode.start}. */
export interface NodeDependencies {
  clock?: Clock;
  random?: Random;
  log?: Logger;
  /** A bucket to use instead of opening `bucketUrl`. */
  bucket?: Bucket;
}

/**
 * A running node.
 *
 * @example
 * ```ts
 * import { WasmKeepNode } from "./node.ts";
 * import type { NodeOptions } from "./options.ts";
 * declare const options: NodeOptions;
 * const node = await WasmKeepNode.start({ ...options });
 * console.log(node.url);
 * await node.stop();
 * ```
 */
export class WasmKeepNode {
  readonly #parts: NodeParts;
  readonly #failed = Promise.withResolvers<never>();
  #stopping: Promise<void> | undefined;
  /** Aborts what the start does (the probe, the join, the secret's reads) when the node stops. */
  readonly #startAbort = new AbortController();
  /** The removal of killed writers' files from a file bucket, under way. */
  #cleaning: Promise<void> | undefined;
  #clusterListener: ClusterListener | undefined;
  #revokeTimer: Timer | undefined;
  /** A standalone node's alarm sweep, until the node stops. */
  #standaloneSweep: Promise<void> | undefined;
  /** The owner sweep of the sockets of actors this node no longer holds (a cluster node). */
  #ownerSweepTimer: Timer | undefined;
  /** The next look at a started node's readiness, until it is ready. */
  #readyWatchTimer: Timer | undefined;
  /** Trusted certificate fingerprints, recomputed at most every {@linkcode TRUST_SWEEP_MS}. */
  #trustCache: { at: number; fingerprints: Set<string> } = {
    at: -Infinity,
    fingerprints: new Set(),
  };

  /** Resolves once the node is ready; rejects with {@linkcode NodeStartError} if it cannot be. */
  readonly whenReady: Promise<void>;

  private constructor(parts: NodeParts) {
    this.#parts = parts;
    parts.plane?.lease.subscribe({
      changed: (valid, cause) => this.#leaseChanged(valid, cause),
      lost: (reason) => this.#leaseLost(reason),
    });
    if (parts.seamBucket instanceof FileBucket) {
      this.#cleaning = cleanFileBucket(
        parts.seamBucket,
        parts.clock,
        parts.log,
        this.#startAbort.signal,
      );
    }
    this.whenReady = this.#begin();
    // Callers that never await whenReady must not see an unhandled rejection.
    this.whenReady.catch(() => {});
  }

  /**
   * Starts a node: loads its classes (a broken component fails here), starts
   * the execution plane and listens. The node reports not ready until its
   * bucket passed the start-up probe; {@linkcode WasmKeepNode.whenReady}
   * tells when, or rejects (after the node stopped) when the bucket failed.
   */
  static async start(options: NodeOptions, deps: NodeDependencies = {}): Promise<WasmKeepNode> {
    const clock = deps.clock ?? systemClock;
    const random = deps.random ?? systemRandom;
    const log = deps.log ?? createLogger({ level: options.logLevel });
    const dataDir = await prepareDataDir(options.dataDir);
    const bucketUrl = options.bucketUrl ?? `file://${dataDir}/bucket`;
    const bucket = deps.bucket ?? openNodeBucket(bucketUrl, clock, random);
    let classes: { catalog: ClassCatalog; follower?: AppFollower };
    try {
      classes = await servedClasses(options, dataDir, bucket, clock, log);
    } catch (error) {
      await bucket.close();
      throw error;
    }
    let identity: NodeIdentity | undefined;
    const listener = options.cluster?.listener;
    if (listener) {
      identity = await createNodeIdentity({
        nodeId: options.nodeId,
        hosts: identityHosts(listener.hostname, listener.advertise),
        clock,
        random,
      });
    }
    const seams: NodeSeams = {
      clock,
      random,
      log,
      bucket,
      identity,
      listen: denoListen(options.hostname, options.port, log),
    };
    let parts: NodeParts;
    try {
      parts = assembleNode({ options, ...classes, dataDir, bucketUrl }, seams);
    } catch (error) {
      await bucket.close();
      throw error;
    }
    return new WasmKeepNode(parts);
  }

  /**
   * A node built from its parts (assemble.ts) with seams of the caller's:
   * the simulator's nodes. It goes on as {@linkcode WasmKeepNode.start}'s do.
   */
  static fromParts(parts: NodeParts): WasmKeepNode {
    return new WasmKeepNode(parts);
  }

  /** What the node is made of, for whoever watches it (the simulator's invariants). */
  get parts(): NodeParts {
    return this.#parts;
  }

  /** The options it was started with. */
  get options(): NodeOptions {
    return this.#parts.options;
  }

  /** `http://host:port` of its client listener. */
  get url(): string {
    return this.#parts.listener.url;
  }

  async #begin(): Promise<void> {
    const { readiness, bucket, bucketUrl, clock, random, log, options } = this.#parts;
    readiness.set("checking the bucket");
    const probe = await probeBucket(bucket, {
      clock,
      random,
      signal: this.#startAbort.signal,
      log: (level, message) =>
        log[level === "warn" ? "warn" : "info"](message, { bucket: bucketUrl }),
    }).catch((error) => ({
      ok: false as const,
      reason: String((error as Error).message ?? error),
    }));
    if (this.#stopping) {
      throw new NodeStartError("the node stopped before its bucket passed the start-up probe");
    }
    if (!probe.ok) {
      log.error("the bucket failed the start-up probe", {
        bucket: bucketUrl,
        reason: probe.reason,
      });
      await this.stop();
      throw new NodeStartError(
        `the bucket ${bucketUrl} failed the start-up probe: ${probe.reason}`,
      );
    }
    if (options.app) await this.#checkTenant();
    if (options.cluster) await this.#joinCluster(options.cluster);
    // In a cluster the sweep is a lease duty; a standalone node runs it until it stops.
    else this.#standaloneSweep = this.#parts.alarmSweep.run(this.#startAbort.signal);
    this.#parts.follower?.start();
    readiness.set(undefined);
    this.#watchReadiness(undefined);
  }

  /**
   * Logs what `/_wasmkeep/ready` says once the start is over: `node ready`,
   * or `node serving, not ready` with the reason (an app with no deployed
   * version yet), looked at again every {@linkcode READY_WATCH_MS}, each new
   * reason logged, until the node is ready and says so.
   */
  #watchReadiness(logged: string | undefined): void {
    if (this.#stopping) return;
    const { readiness, bucketUrl, clock, log, options } = this.#parts;
    const fields = { node: options.nodeId, url: this.url, bucket: bucketUrl };
    const reason = readiness.readyReport();
    if (reason === undefined) {
      log.info("node ready", fields);
      return;
    }
    if (reason !== logged) log.warn("node serving, not ready", { ...fields, reason });
    this.#readyWatchTimer = clock.setTimer(READY_WATCH_MS, () => this.#watchReadiness(reason));
  }

  /**
   * One app per tenant per prefix: a live node serving another app of this
   * node's tenant stops the start; other deployed apps of the tenant (two
   * of one tenant predate the check) are warned about by name.
   */
  async #checkTenant(): Promise<void> {
    const { bucket, clock, log, options, readiness } = this.#parts;
    const app = options.app!;
    readiness.set("checking that no live node serves another app of this tenant");
    let found;
    try {
      found = await tenantApps(
        bucket,
        app,
        options.nodeId,
        () => clock.now(),
        options.cluster?.leaseTtlMs ?? NODE_DEFAULTS.leaseTtlMs,
      );
    } catch (error) {
      await this.stop();
      throw new NodeStartError(
        `cannot read the bucket's heartbeats and apps to check the tenant's apps: ${
          describeError(error)
        }`,
      );
    }
    for (const other of found.deployedOthers) {
      log.warn(
        "another app of this tenant is deployed on this prefix: two apps of one tenant share its actors",
        { app: appNameString(app), other },
      );
    }
    if (found.liveOther) {
      await this.stop();
      throw new NodeStartError(
        `node ${found.liveOther.node} serves ${found.liveOther.app}, another app of tenant ${app.tenant} on this prefix: one app per tenant per prefix; serve ${
          appNameString(app)
        } on another prefix (s3://bucket/other) or under another tenant`,
      );
    }
  }

  async #joinCluster(cluster: ClusterOptions): Promise<void> {
    const { readiness, log, options, clock } = this.#parts;
    const plane = this.#parts.plane!;
    const timing = this.#parts.timing!;
    const address = cluster.advertise ?? this.url;
    if (cluster.listener) {
      readiness.set("starting the cluster listener");
      await this.#startClusterListener(cluster.listener);
    } else if (cluster.plaintext === "accept" && isPublicAddress(address)) {
      log.warn(
        "plain HTTP between nodes on a public address: calls are signed but nothing is encrypted; keep nodes on a private network or give them --cluster-listen",
        { advertise: address },
      );
    }
    readiness.set("checking that no other process runs with this node id");
    try {
      await plane.start(address);
    } catch (error) {
      if (this.#stopping) {
        throw new NodeStartError("the node stopped before its node id check ended");
      }
      const message = error instanceof NodeIdInUse
        ? error.message
        : `the node could not join the cluster: ${(error as Error).message}`;
      log.error("cannot start", { node: options.nodeId, reason: message });
      await this.stop();
      throw new NodeStartError(message, { cause: error });
    }
    log.info("node joined the cluster", {
      node: options.nodeId,
      address,
      lease_valid: plane.valid(),
    });
    await this.#readClusterSecret();
    this.#ownerSweepTimer = clock.setTimer(OWNER_SWEEP_MS, () => void this.#sweepOwners());
    this.#sweepTrust();
    if (this.#clusterListener) {
      // Peers list the heartbeats once a period: by then each has seen the
      // new fingerprint and lets this node in.
      readiness.set("publishing this node's certificate fingerprint to its peers");
      await clock.sleep(timing.periodMs + timing.skewMs, this.#startAbort.signal).catch(() => {});
    }
  }

  async #startClusterListener(
    settings: NonNullable<ClusterOptions["listener"]>,
  ): Promise<void> {
    const { log, options, clock, counters, metrics, identity, clusterConnections, clusterUpgrade } =
      this.#parts;
    const { hostname, port, advertise } = settings;
    try {
      this.#clusterListener = await ClusterListener.start({
        hostname,
        port,
        identity: identity!,
        // Only peers whose certificate a live heartbeat names are let in.
        trust: (fingerprint) => this.#trusted().has(fingerprint),
        handler: this.#parts.clusterHandler,
        upgrade: clusterUpgrade && ((request) => clusterUpgrade(request)),
        maxConnections: clusterConnections,
        maxBodyBytes: options.maxBodyBytes,
        log,
        clock,
        onRefused: (_fingerprint, reason) => counters.refusedConnection(reason),
      });
    } catch (error) {
      await this.stop();
      throw new NodeStartError(
        `cannot listen on ${hostname}:${port} (--cluster-listen): ${(error as Error).message}`,
      );
    }
    counters.listenerStarted();
    const listener = this.#clusterListener;
    metrics.gauge(
      "wasmkeep_cluster_connections",
      "Connections open on the cluster listener.",
      () => listener.stats().open,
    );
    log.info("cluster listener up", {
      node: options.nodeId,
      listen: `${hostname}:${listener.address.port}`,
      advertise,
      fingerprint: identity!.fingerprint,
      max_connections: clusterConnections,
    });
  }

  /**
   * Reads (or makes) `cluster/secret`. A bucket that does not answer is
   * asked again every {@linkcode CLUSTER_SECRET_RETRY_MS} in the background
   * while the node serves; calls between nodes fail until then.
   */
  async #readClusterSecret(attempt = 1): Promise<void> {
    const { bucket, random, log, clock, calls } = this.#parts;
    try {
      calls.secret = await loadClusterSecret(bucket, {
        random,
        log,
        clock,
        signal: this.#startAbort.signal,
      });
      if (attempt > 1) log.info("cluster secret read", { attempt });
    } catch (error) {
      if (this.#startAbort.signal.aborted) return;
      log.warn("could not read the cluster secret; calls between nodes wait for it", {
        attempt,
        error: String(error),
      });
      clock.sleep(CLUSTER_SECRET_RETRY_MS, this.#startAbort.signal)
        .then(() => this.#readClusterSecret(attempt + 1), () => {});
    }
  }

  #trusted(): Set<string> {
    const plane = this.#parts.plane;
    if (!plane) return this.#trustCache.fingerprints;
    const now = this.#parts.clock.monotonic();
    if (now - this.#trustCache.at >= TRUST_SWEEP_MS) {
      this.#trustCache = { at: now, fingerprints: plane.trustedFingerprints() };
    }
    return this.#trustCache.fingerprints;
  }

  /**
   * Every {@linkcode TRUST_SWEEP_MS}: peers whose heartbeat was fenced,
   * released, removed, names a new key or expired lose their connections,
   * and the relays to them are cut (those sent plain, to a peer without a
   * listener, once the heartbeat in view is no longer live: a node gone
   * silent leaves no connection to end them; one out of view for a round is
   * kept, since its relays' connections end with it anyway).
   */
  #sweepTrust(): void {
    const plane = this.#parts.plane;
    if (!plane || this.#stopping) return;
    this.#trustCache.at = -Infinity;
    const closed = this.#clusterListener?.revoke() ?? 0;
    if (closed > 0) {
      this.#parts.log.info("closed connections of peers no longer trusted", { closed });
    }
    const trusted = this.#trusted();
    const cut = this.#parts.relays.revoke((peer) =>
      peer.fingerprint === undefined
        ? plane.membership.peer(peer.node)?.heartbeat === undefined ||
          plane.membership.isLive(peer.node)
        : trusted.has(peer.fingerprint)
    );
    if (cut > 0) this.#parts.log.info("cut relays to peers no longer trusted", { cut });
    this.#revokeTimer = this.#parts.clock.setTimer(TRUST_SWEEP_MS, () => this.#sweepTrust());
  }

  /**
   * Every {@linkcode OWNER_SWEEP_MS}: the sockets of actors another node
   * took while they hibernated here close with 1012 (owner_sweep.ts).
   */
  async #sweepOwners(): Promise<void> {
    const { sockets, host, socketsMovedAway, log, clock } = this.#parts;
    const closed = await sweepMovedActors({
      actors: () => sockets.actors(),
      holdsHere: (key) => host.holds(key),
      movedAway: socketsMovedAway,
      closeMoved: (key) => sockets.closeMoved(key),
      log,
    });
    if (closed > 0) log.info("closed the sockets of actors another node took", { closed });
    if (this.#stopping) return;
    this.#ownerSweepTimer = clock.setTimer(OWNER_SWEEP_MS, () => void this.#sweepOwners());
  }

  /** What a change of the lease's validity makes the node do. */
  #leaseChanged(valid: boolean, cause: LeaseChangeCause): void {
    const { log, options, host } = this.#parts;
    if (valid) {
      log.info("node lease valid", { node: options.nodeId });
      return;
    }
    if (cause === "released") {
      // The clean stop's last step, after its actors were released.
      log.info("node lease given up by the clean stop: releasing the heartbeat", {
        node: options.nodeId,
      });
      return;
    }
    // Before any other node can take them: every actor is dropped at once,
    // and taken again at new generations once a write lands.
    log.warn("node lease not valid: dropping every actor", {
      node: options.nodeId,
      resident: host.residentCount,
      websockets: this.#parts.sockets.count,
    });
    if (!this.#stopping) host.dropAll();
    // Before any other node can take the actors, without waiting for the
    // bucket: their clients reconnect, to whichever node takes them.
    void this.#parts.sockets.closeAll(CLOSE.serviceRestart, "this node's lease ran out");
  }

  /** Another writer took the lease: every actor is dropped, and the node stops for good. */
  #leaseLost(reason: NodeLeaseLost): void {
    const { log, options, host } = this.#parts;
    log.error("another writer took this node's lease: stopping", {
      node: options.nodeId,
      reason: reason.detail,
    });
    host.dropAll();
    void this.#parts.sockets.closeAll(CLOSE.serviceRestart, "this node's lease was taken");
    this.stop().finally(() =>
      // The reason's message says it all: "the node lease nodes/a was lost: …".
      this.#failed.reject(new NodeStartError(reason.message, { cause: reason }))
    );
  }

  /**
   * Rejects when the node stopped itself for good while serving (its lease
   * was taken by another writer); never resolves otherwise.
   */
  get whenFailed(): Promise<never> {
    return this.#failed.promise;
  }

  /** Why the node is not ready, or `undefined`. */
  notReadyReason(): string | undefined {
    return this.#parts.readiness.reason();
  }

  /** Resident actors now. */
  get residentActors(): number {
    return this.#parts.host.residentCount;
  }

  /**
   * Stops cleanly: no new connections, events under way finish (up to
   * `stopGraceMs`), their uploads land, the actors are released, then the
   * lease is.
   */
  stop(): Promise<void> {
    this.#stopping ??= this.#stop();
    return this.#stopping;
  }

  async #stop(): Promise<void> {
    const { log, options, host, pool, plane, ownership, waits, listener, clock, bucket } =
      this.#parts;
    const readiness = this.#parts.readiness;
    const started = readiness.started;
    readiness.stopping();
    log.info("node stopping", { node: options.nodeId, in_flight: host.inFlight });
    this.#startAbort.abort(new Error("the node is stopping"));
    // No alarm fires here from now on.
    this.#parts.alarmTimers.stop();
    this.#parts.follower?.stop();
    // Kept requests get their 503 now: this node takes nothing over any more.
    waits.stop();
    // Its actors' sockets close with 1012, and so do the sockets it relays
    // to other nodes (before the server's shutdown would close them with
    // 1001): their clients reconnect, to another node.
    await Promise.all([
      this.#parts.sockets.closeAll(CLOSE.serviceRestart, "the node is stopping"),
      this.#parts.relays.closeAll(),
    ]);
    const serverDone = listener.shutdown();
    this.#revokeTimer?.cancel();
    this.#ownerSweepTimer?.cancel();
    this.#readyWatchTimer?.cancel();
    const drained = await host.drain(options.stopGraceMs);
    if (!drained) log.warn("events still under way at the end of the stop grace period");
    // The executors close their actors once their uploads landed…
    await pool.close();
    // …then the records say the actors are free, for another node to take.
    if (started && (!plane || plane.valid())) await host.releaseAll();
    // Released: a peer that arms their alarms takes each actor at its due time.
    if (started && plane?.valid()) await this.#handOverAlarms();
    ownership.close();
    await this.#parts.duties.stop();
    // Last: a released heartbeat frees any record whose release did not land.
    await plane?.stop();
    await this.#clusterListener?.close();
    // Connections still open past the grace period are cut, not awaited.
    await Promise.race([serverDone, clock.sleep(SERVER_SHUTDOWN_MS)]);
    await this.#cleaning;
    await this.#standaloneSweep;
    await bucket.close();
    log.info("node stopped", { node: options.nodeId });
  }

  /**
   * A clean stop hands the alarms on its timer to a live peer serving its
   * app (alarm_handover.ts), never to another tenant's node on the prefix.
   */
  async #handOverAlarms(): Promise<void> {
    const { plane, alarmTimers, clock, log, options } = this.#parts;
    const app = options.app && appNameString(options.app);
    const takers = alarmTakers(plane!.membership.liveNodes(), { nodeId: options.nodeId, app });
    const peers = takers.flatMap((view) => {
      const address = plane!.peers.addressOf(view.heartbeat);
      return address ? [{ node: view.nodeId, address }] : [];
    });
    await handOverAlarms({
      alarms: alarmTimers.list(),
      app,
      peers,
      send: async (peer, body, first) =>
        await plane!.peers.postSigned(
          peer.address,
          peer.node,
          ALARM_HANDOVER_PATH,
          body,
          actorRef(first.key),
        ) === 204,
      clock,
      log,
    });
  }
}

/**
 * The classes the node starts with: those of `--actor` (a broken component
 * fails here), or the app's current version, read and applied by its
 * follower (a node whose app cannot be applied yet starts not ready). A
 * node given `--access` for an app that deploys its own rules refuses to
 * start (ADR 0013).
 */
async function servedClasses(
  options: NodeOptions,
  dataDir: string,
  bucket: Bucket,
  clock: Clock,
  log: Logger,
): Promise<{ catalog: ClassCatalog; follower?: AppFollower }> {
  const loading = {
    cacheDir: `${dataDir}/${COMPONENT_CACHE_DIR}`,
    abi: options.abi,
    env: options.env,
    log,
  };
  const app = options.app;
  if (!app) {
    return {
      catalog: new ClassCatalog({ seq: 0, classes: await flagClasses(options.actors, loading) }),
    };
  }
  const accessFlags = options.accessFlags ?? {};
  const catalog = new ClassCatalog({ seq: 0, classes: [] });
  const follower = new AppFollower({
    bucket,
    app,
    clock,
    log,
    catalog,
    load: (version) => versionClasses(bucket, app, version, accessFlags, loading),
    hasAccessFlags: Object.keys(accessFlags).length > 0,
    // Whenever it comes (the bucket may not answer at start), a first
    // version that deploys rules refuses this node's --access.
    firstRefusal: (id, version) => {
      if (!version.rulesDeployed || Object.keys(accessFlags).length === 0) return undefined;
      const name = appNameString(app);
      const flags = Object.entries(accessFlags).map(([c, rule]) =>
        `--access ${c}=${formatAccessRule(rule)}`
      ).join(" ");
      return `--access is refused: the app ${name} deploys its own access rules (version ${id}, seq ${version.seq}); remove --access from this node's command line, and change rules with wasmkeep deploy --app ${name} --bucket ${
        options.bucketUrl ?? "URL"
      } ${flags}`;
    },
  });
  await follower.check();
  if (follower.firstRefused) throw new NodeStartError(follower.firstRefused);
  return { catalog, follower };
}

/**
 * Removes, in the background, what processes killed while writing left in
 * a file bucket (file_leftovers.ts): nothing reads those files, so the node
 * does not wait for it.
 */
function cleanFileBucket(
  bucket: FileBucket,
  clock: Clock,
  log: Logger,
  signal: AbortSignal,
): Promise<void> {
  return removeFileLeftovers(bucket.root, clock, signal).then(({ temps, locks }) => {
    if (temps + locks > 0) {
      log.info("removed what killed writers left in the file bucket", {
        bucket: bucket.root,
        temp_files: temps,
        locks,
      });
    }
  }, (error) => {
    if (signal.aborted) return;
    log.warn("could not clean the file bucket of killed writers' files", {
      bucket: bucket.root,
      error: String(error),
    });
  });
}

/**
 * Opens the node's bucket; `AWS_*` variables it cannot work with (no
 * credentials, a plain-http endpoint) stop the start with their message.
 */
function openNodeBucket(url: string, clock: Clock, random: Random): Bucket {
  try {
    return openBucket(url, { clock, random });
  } catch (error) {
    if (error instanceof S3ConfigError) {
      throw new NodeStartError(`cannot open the bucket ${url}: ${error.message}`);
    }
    throw error;
  }
}

/** Where, under the data directory, the transpiled components are kept. */
const COMPONENT_CACHE_DIR = "cache/components";

/**
 * Makes the data directory and the folders the node writes under it, and
 * writes a file in each: a directory the node cannot write (a read-only
 * file system, a file in the way) stops the start here with one line naming
 * `--data-dir`, not later with a stack trace. Returns its real path.
 */
async function prepareDataDir(path: string): Promise<string> {
  let failed = `cannot create the data directory ${path}`;
  try {
    await Deno.mkdir(path, { recursive: true });
    const real = await Deno.realPath(path);
    for (const sub of ["", COMPONENT_CACHE_DIR, ACTORS_DIR]) {
      const dir = sub ? `${real}/${sub}` : real;
      const what = sub ? `${dir} in the data directory` : `the data directory ${dir}`;
      failed = `cannot create ${what}`;
      await Deno.mkdir(dir, { recursive: true });
      failed = `cannot write in ${what}`;
      await Deno.remove(await Deno.makeTempFile({ dir, prefix: ".write-check-" }));
    }
    return real;
  } catch (error) {
    throw new NodeStartError(
      `${failed} (--data-dir): ${
        (error as Error).message
      }; give --data-dir a folder this process can write`,
    );
  }
}
