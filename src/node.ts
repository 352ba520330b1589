/**
 * A WasmKeep node on one machine: loads the actor classes, starts the
 * execution plane, checks the bucket and serves clients over HTTP.
 *
 * @module
 */

import { type Clock, type Random, systemClock, systemRandom, type Timer } from "./time/clock.ts";
import { createLogger, type Logger, type LogLevel } from "./log.ts";
import { loadComponent } from "./actors/component.ts";
import { ExecutorPool } from "./actors/executor_pool.ts";
import { ActorHost } from "./actors/actor_host.ts";
import { type ActorKey, DEFAULT_TENANT } from "./actors/key.ts";
import type { ActorRequest, ExecutorClass } from "./actors/protocol.ts";
import { createClientHandler } from "./http/client_handler.ts";
import { maxClientConnections, maxOpenDatabases, openFileLimit } from "./limits.ts";
import {
  type Bucket,
  FileBucket,
  openBucket,
  probeBucket,
  removeFileLeftovers,
} from "./bucket/mod.ts";
import { S3ConfigError } from "./bucket/s3_config.ts";
import { MetricsRegistry } from "./metrics/registry.ts";
import { NodeCounters } from "./metrics/node_counters.ts";
import { type Hold, OwnershipRecords } from "./cluster/ownership.ts";
import { ClusterPlane, type ClusterPlaneOptions } from "./cluster/cluster_plane.ts";
import { RequestRouting } from "./cluster/request_routing.ts";
import { leaseTiming } from "./cluster/lease_timing.ts";
import { NodeIdInUse } from "./cluster/node_id_check.ts";
import { FailoverWaits } from "./cluster/failover_wait.ts";
import { createCallHandler } from "./actors/call_router.ts";
import { createNodeIdentity } from "./security/node_identity.ts";
import { ClusterListener } from "./http/cluster_listener.ts";
import { tlsConnector } from "./http/tls_connect.ts";
import { type ClusterSecret, loadClusterSecret } from "./security/cluster_secret.ts";
import { SIGNATURE_HEADER, signCall, verifyCall } from "./security/call_signature.ts";
import { NonceCache } from "./security/nonce_cache.ts";
import type { CallVerdict, SignedRequest } from "./http/client_handler.ts";
import { maxClusterConnections } from "./limits.ts";
import { VERSION } from "./version.ts";

/** One actor class given to the node. */
export interface ActorClassOption {
  className: string;
  path: string;
  /** Named values `config.get` returns. */
  config?: Record<string, string>;
  /** Reached only by actors.call, never by a client (`--access CLASS=internal`). */
  internal?: boolean;
}

/** Everything a node is started with; defaults in {@linkcode NODE_DEFAULTS}. */
export interface NodeOptions {
  nodeId: string;
  /** Host name and port of the client listener; port 0 picks a free one. */
  hostname: string;
  port: number;
  dataDir: string;
  actors: ActorClassOption[];
  /** `s3://BUCKET[/PREFIX]` or `file://PATH`; default `file://<dataDir>/bucket`. */
  bucketUrl?: string;
  eventTimeoutMs: number;
  maxQueuedEvents: number;
  maxResidentActors: number;
  idleMs: number;
  /** An actor's database unused this long is closed; the actor may stay resident. */
  databaseIdleMs: number;
  maxBodyBytes: number;
  /** Client requests at once (`--max-connections`), before the open-file limit lowers it; default 10,000. */
  maxConnections?: number;
  /** Executor processes; default one per core. */
  executors: number;
  /** How long a clean stop waits for events under way. */
  stopGraceMs: number;
  /**
   * `auto`: the direct bindings for components that fit them, jco's glue for
   * the others; `jco`: jco's glue for every component.
   */
  abi: "auto" | "jco";
  logLevel: LogLevel;
  /** How long old actor history stays in the bucket (`--history-retention-secs`). */
  historyRetentionMs: number;
  /**
   * Cluster mode, for a bucket other nodes may share (`--bucket`): node
   * leases, the node id check, membership and forwarding. `undefined` for a
   * standalone node on its embedded bucket.
   */
  cluster?: ClusterOptions;
}

/** A node's settings in a cluster. */
export interface ClusterOptions {
  /** The URL peers forward requests to; default `http://<listen address>`. */
  advertise?: string;
  /** Whether plain HTTP between nodes is used (`--cluster-plaintext`). */
  plaintext: "accept" | "refuse";
  /** The cluster listener (`--cluster-listen`, `--cluster-advertise`): mutual TLS between nodes. */
  listener?: { hostname: string; port: number; advertise: string };
  /** How long a GET/HEAD for a dead or stopping node's actor is kept; 0 turns it off. */
  failoverWaitMs: number;
  /** The node lease ttl; every lease timing derives from it. */
  leaseTtlMs: number;
}

/** How often the cluster listener's peers are checked against the heartbeats. */
export const TRUST_SWEEP_MS = 250;

/** Pause between reads of an unreadable cluster secret. */
export const CLUSTER_SECRET_RETRY_MS = 3_000;

/** The cluster secret, once read: signs this node's calls and checks its peers'. */
interface CallSecurity {
  secret: ClusterSecret | undefined;
}

/** Checks a request's call signature; `undefined` for a request without one. */
function verifySignedCall(
  calls: CallSecurity,
  request: SignedRequest,
  nodeId: string,
  clock: Clock,
  nonces: NonceCache,
  log: Logger,
): CallVerdict | undefined {
  if (!request.headers.has(SIGNATURE_HEADER)) return undefined;
  if (!calls.secret) {
    return {
      ok: false,
      status: 503,
      reason: "this node has not read the cluster secret yet; retry",
    };
  }
  const verified = verifyCall(calls.secret, { thisNode: nodeId, ...request }, { clock, nonces });
  if (verified.ok) return verified;
  log.warn("refused a signed call", { reason: verified.reason });
  // A full nonce cache or a malformed secret says nothing against the call.
  return { ok: false, status: verified.kind === "bad" ? 403 : 503, reason: verified.reason };
}

/**
 * The wall-clock time of `monotonic` on `clock`: how the lease's end is
 * given to executors, which read the wall clock.
 */
function wallClockOf(clock: Clock, monotonic: number): number {
  return clock.now() + (monotonic - clock.monotonic());
}

/** The names the node's certificate is for: the advertised host, and the bound one when specific. */
function identityHosts(hostname: string, advertise: string): string[] {
  const hosts = [new URL(advertise).hostname.replace(/^\[(.*)\]$/, "$1")];
  if (hostname !== "0.0.0.0" && hostname !== "::" && !hosts.includes(hostname)) {
    hosts.push(hostname);
  }
  return hosts;
}

/**
 * Whether an advertised URL's host is a public address: not loopback,
 * private (RFC 1918, RFC 4193), link-local or a single-label name.
 */
export function isPublicAddress(url: string): boolean {
  const host = new URL(url).hostname.replace(/^\[(.*)\]$/, "$1").toLowerCase();
  if (host === "localhost" || !host.includes(".") && !host.includes(":")) return false;
  const v4 = host.match(/^(\d+)\.(\d+)\.(\d+)\.(\d+)$/);
  if (v4) {
    const [a, b] = [Number(v4[1]), Number(v4[2])];
    return !(a === 10 || a === 127 || (a === 172 && b >= 16 && b <= 31) ||
      (a === 192 && b === 168) || (a === 169 && b === 254) || (a === 100 && b >= 64 && b <= 127));
  }
  if (host.includes(":")) {
    return !(host === "::1" || host.startsWith("fc") || host.startsWith("fd") ||
      host.startsWith("fe80"));
  }
  // A name: private by convention only under these suffixes.
  return !/\.(internal|local|lan|home\.arpa|localdomain)$/.test(host);
}

/** The defaults of the optional settings. */
export const NODE_DEFAULTS = {
  eventTimeoutMs: 30_000,
  maxQueuedEvents: 128,
  maxResidentActors: 10_000,
  idleMs: 60_000,
  databaseIdleMs: 5_000,
  maxBodyBytes: 1024 * 1024,
  stopGraceMs: 10_000,
  abi: "auto" as "auto" | "jco",
  logLevel: "info" as LogLevel,
  historyRetentionMs: 3_600_000,
  maxConnections: 10_000,
  leaseTtlMs: 10_000,
} as const;

/** Seams for tests and the simulator. */
export interface NodeDependencies {
  clock?: Clock;
  random?: Random;
  log?: Logger;
  /** A bucket to use instead of opening `bucketUrl`. */
  bucket?: Bucket;
}

/** How long a stop waits for the listener's connections after the events are done. */
export const SERVER_SHUTDOWN_MS = 1000;

/** Raised when the node cannot start; the message says why. */
export class NodeStartError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "NodeStartError";
  }
}

/**
 * A running node.
 *
 * @example
 * ```ts ignore
 * const node = await WasmKeepNode.start({ ...options });
 * console.log(node.url);
 * await node.stop();
 * ```
 */
export class WasmKeepNode {
  #notReady: string | undefined = "starting";
  #plane: { current?: ClusterPlane } = {};
  #waits: FailoverWaits | undefined;
  #ownership!: OwnershipRecords;
  #processToken = "";
  /** The cluster secret once read: signs and checks calls between nodes. */
  #calls: CallSecurity = { secret: undefined };
  #clusterConnections = 0;
  /** Answers peers on the cluster listener (actor paths, health, readiness). */
  #clusterHandler: ((request: Request) => Promise<Response>) | undefined;
  #clusterListener: ClusterListener | undefined;
  #revokeTimer: Timer | undefined;
  #random!: Random;
  #metrics!: MetricsRegistry;
  #counters!: NodeCounters;
  readonly #failed = Promise.withResolvers<never>();
  #stopping: Promise<void> | undefined;
  readonly #probeAbort = new AbortController();
  /** The removal of killed writers' files from a file bucket, under way. */
  #cleaning: Promise<void> | undefined;

  private constructor(
    readonly options: NodeOptions,
    readonly url: string,
    private readonly server: Deno.HttpServer,
    private readonly host: ActorHost,
    private readonly pool: ExecutorPool,
    private readonly ownership: OwnershipRecords,
    private readonly bucket: Bucket,
    private readonly log: Logger,
    private readonly clock: Clock,
  ) {}

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
    const dataDir = await Deno.realPath(await ensureDir(options.dataDir));

    const classes: ExecutorClass[] = [];
    for (const actor of options.actors) {
      const loaded = await loadComponent(
        actor.className,
        actor.path,
        `${dataDir}/cache/components`,
      );
      classes.push({
        className: actor.className,
        hash: loaded.hash,
        glue: loaded.glue,
        coreModules: loaded.coreModules,
        directModule: options.abi === "jco" ? undefined : loaded.directModule,
        config: actor.config ?? {},
      });
      log.info("actor class loaded", {
        class: actor.className,
        path: actor.path,
        version: loaded.hash.slice(0, 16),
        bindings: options.abi !== "jco" && loaded.directModule ? "direct" : "jco",
        why_jco: options.abi === "jco" ? "--abi jco" : loaded.directProblem,
      });
    }
    const bucketUrl = options.bucketUrl ?? `file://${dataDir}/bucket`;
    const bucket = deps.bucket ?? openNodeBucket(bucketUrl, clock, random);

    const fileLimit = openFileLimit();
    const metrics = new MetricsRegistry();
    // Every counter, with each value of its labels, is exported at 0 from now.
    const counters = new NodeCounters(metrics, classes.map((c) => c.className), {
      cluster: options.cluster !== undefined,
    });
    const processToken = Array.from(
      random.fill(new Uint8Array(8)),
      (b) => b.toString(16).padStart(2, "0"),
    ).join("");
    const ownership = new OwnershipRecords({
      bucket,
      clock,
      nodeId: options.nodeId,
      processToken,
      log,
    });
    const pool = new ExecutorPool({
      size: options.executors,
      dataDir,
      classes,
      maxOpenDatabases: maxOpenDatabases(fileLimit),
      databaseIdleMs: options.databaseIdleMs,
      eventTimeoutMs: options.eventTimeoutMs,
      logLevel: options.logLevel,
      clock,
      log,
      // A standalone node's bucket is on its own disk: replicating into it
      // would protect nothing (ADR 0005).
      replicate: options.cluster !== undefined,
      bucketUrl,
      nodeId: options.nodeId,
      historyRetentionMs: options.historyRetentionMs,
      // The callbacks run on executor messages, long after host exists.
      // A durable write is acknowledged only if it landed while this node
      // held the actor: its record unchanged since the take and, in a
      // cluster, its lease still valid.
      checkHold: async (actor, generation) => {
        if (plane.current && !plane.current.valid()) return false;
        const held = await host.stillHolds(actor, generation);
        return held && (!plane.current || plane.current.valid());
      },
      onGiveUp: (actor, generation) => host.gaveUp(actor, generation),
      onCall: (call) => onCall(call),
      onCount: (name, by) => counters.replication(name, by),
      onExecutorReplaced: (index, unstarted) => {
        counters.executorReplaced();
        host.executorReplaced(index, unstarted);
      },
    });
    const host: ActorHost = new ActorHost(
      pool,
      {
        take: (actor) =>
          ownership.take(actor, {
            canTakeFrom: (record) => {
              // In a cluster, another node's actors are free once its
              // heartbeat says released or fenced.
              if (plane.current) return plane.current.canTakeFromFresh(record);
              // A standalone node on its own bucket: a record naming another
              // id was written under an earlier --node-id or host name.
              log.warn("taking an actor whose record names another node id", {
                actor: `${actor.tenant}/${actor.class}/${actor.name}`,
                holder: record.node,
              });
              return true;
            },
            mayWrite: () => !plane.current || plane.current.valid(),
          }),
        release: (hold) => ownership.release(hold as Hold),
        stillHolds: (hold) => ownership.stillHolds(hold as Hold),
      },
      {
        maxQueuedEvents: options.maxQueuedEvents,
        maxResidentActors: options.maxResidentActors,
        idleMs: options.idleMs,
      },
      clock,
      log,
      // Events run only while the lease is valid (a cluster node), and the
      // executor runs nothing of them past its end (on the wall clock, which
      // both processes read).
      () => !plane.current || plane.current.valid(),
      () => plane.current ? wallClockOf(clock, plane.current.lease.validUntil) : 0,
    );
    metrics.gauge(
      "wasmkeep_resident_actors",
      "Actors with an instance in memory.",
      () => host.residentCount,
    );
    metrics.gauge(
      "wasmkeep_events_in_flight",
      "Events running or queued.",
      () => host.inFlight,
    );

    /** The cluster side, once the node id check passed (cluster mode only). */
    const plane: { current?: ClusterPlane } = {};
    const clusterConnections = options.cluster?.listener ? maxClusterConnections(fileLimit) : 0;
    const requestedConnections = options.maxConnections ?? NODE_DEFAULTS.maxConnections;
    const maxConnections = maxClientConnections(
      requestedConnections,
      fileLimit,
      clusterConnections,
    );
    if (maxConnections < requestedConnections) {
      log.warn("--max-connections lowered to fit the open-file limit", {
        requested: requestedConnections,
        max_connections: maxConnections,
        open_file_limit: fileLimit,
      });
    }
    let requestsUnderWay = 0;
    const waits = new FailoverWaits({
      clock,
      random,
      maxWaitMs: options.cluster?.failoverWaitMs ?? 0,
      maxKept: Math.floor(maxConnections / 4),
      count: (outcome) => counters.failoverWait(outcome),
    });
    const classNames = new Set(classes.map((c) => c.className));
    const internalClasses = new Set(
      options.actors.filter((actor) => actor.internal).map((actor) => actor.className),
    );
    const routing = new RequestRouting({
      plane: () => plane.current,
      dispatch: (key, request) => host.dispatch(key, request),
      waits,
      log,
    });
    const onCall = createCallHandler({
      hasClass: (name) => classNames.has(name),
      route: (target, request, call) => routing.routeCall(target, request, call),
    }, clock);
    const dispatch = async (
      key: ActorKey,
      request: ActorRequest,
      client?: { readonly signal: AbortSignal },
    ) => {
      const outcome = await routing.route(key, request, client);
      counters.event(
        key.class,
        outcome.kind === "response" ? outcome.response.status : outcome.status,
      );
      return outcome;
    };
    // Requests may arrive before the node object exists.
    const started: { node?: WasmKeepNode } = {};
    const calls: CallSecurity = { secret: undefined };
    const nonces = new NonceCache({ clock });
    const verifyCall = (request: SignedRequest) =>
      verifySignedCall(calls, request, options.nodeId, clock, nonces, log);
    const handlerContext = {
      nodeId: options.nodeId,
      tenant: DEFAULT_TENANT,
      maxBodyBytes: options.maxBodyBytes,
      hasClass: (name: string) => classNames.has(name),
      notReadyReason: () => started.node ? started.node.notReadyReason() : "starting",
      dispatch,
      admit: () => {
        if (requestsUnderWay >= maxConnections) {
          return `this node serves ${maxConnections} requests at once (--max-connections); retry`;
        }
        requestsUnderWay++;
        let released = false;
        return () => {
          if (released) return;
          released = true;
          requestsUnderWay--;
        };
      },
      isInternal: (name: string) => internalClasses.has(name),
    };
    const handler = createClientHandler({
      ...handlerContext,
      renderMetrics: () => metrics.render(),
      // Refusing plain HTTP between nodes, a signed call on the client
      // listener is a client's request (no caller, internal classes refused).
      verifyCall: options.cluster?.plaintext === "accept" ? verifyCall : undefined,
    });
    const clusterHandler = createClientHandler({ ...handlerContext, verifyCall });
    const listening = Promise.withResolvers<Deno.NetAddr>();
    let server: Deno.HttpServer;
    try {
      server = Deno.serve({
        hostname: options.hostname,
        port: options.port,
        onListen: (addr) => listening.resolve(addr as Deno.NetAddr),
        onError: (error) => {
          log.error("request failed", { error: String(error) });
          return new Response("internal error\n", { status: 500 });
        },
      }, handler);
    } catch (error) {
      await pool.close();
      await bucket.close();
      throw new NodeStartError(
        `cannot listen on ${options.hostname}:${options.port} (--listen): ${
          (error as Error).message
        }`,
      );
    }
    const addr = await listening.promise;
    const hostname = addr.hostname.includes(":") ? `[${addr.hostname}]` : addr.hostname;
    const url = `http://${hostname}:${addr.port}`;
    const node = new WasmKeepNode(
      options,
      url,
      server,
      host,
      pool,
      ownership,
      bucket,
      log,
      clock,
    );
    started.node = node;
    log.info("node listening", {
      node: options.nodeId,
      url,
      executors: options.executors,
      open_file_limit: fileLimit,
    });
    node.#plane = plane;
    node.#waits = waits;
    node.#ownership = ownership;
    node.#processToken = processToken;
    node.#calls = calls;
    node.#clusterHandler = clusterHandler;
    node.#clusterConnections = clusterConnections;
    node.#random = random;
    node.#metrics = metrics;
    node.#counters = counters;
    if (bucket instanceof FileBucket) {
      node.#cleaning = cleanFileBucket(bucket, clock, log, node.#probeAbort.signal);
    }
    node.whenReady = node.#probe(bucketUrl, random);
    // Callers that never await whenReady must not see an unhandled rejection.
    node.whenReady.catch(() => {});
    return node;
  }

  /** Resolves once the node is ready; rejects with {@linkcode NodeStartError} if it cannot be. */
  whenReady: Promise<void> = Promise.resolve();

  async #probe(bucketUrl: string, random: Random): Promise<void> {
    this.#notReady = "checking the bucket";
    const probe = await probeBucket(this.bucket, {
      clock: this.clock,
      random,
      signal: this.#probeAbort.signal,
      log: (level, message) =>
        this.log[level === "warn" ? "warn" : "info"](message, { bucket: bucketUrl }),
    }).catch((error) => ({
      ok: false as const,
      reason: String((error as Error).message ?? error),
    }));
    if (this.#stopping) {
      throw new NodeStartError("the node stopped before its bucket passed the start-up probe");
    }
    if (!probe.ok) {
      this.log.error("the bucket failed the start-up probe", {
        bucket: bucketUrl,
        reason: probe.reason,
      });
      await this.stop();
      throw new NodeStartError(
        `the bucket ${bucketUrl} failed the start-up probe: ${probe.reason}`,
      );
    }
    if (this.options.cluster) await this.#joinCluster(this.options.cluster);
    this.#notReady = undefined;
    this.log.info("node ready", { node: this.options.nodeId, url: this.url, bucket: bucketUrl });
  }

  async #joinCluster(cluster: ClusterOptions): Promise<void> {
    const address = cluster.advertise ?? this.url;
    const timing = leaseTiming(cluster.leaseTtlMs);
    let tls: ClusterPlaneOptions["tls"];
    if (cluster.listener) {
      const { hostname, port, advertise } = cluster.listener;
      this.#notReady = "starting the cluster listener";
      const identity = await createNodeIdentity({
        nodeId: this.options.nodeId,
        hosts: identityHosts(hostname, advertise),
        clock: this.clock,
        random: this.#random,
      });
      try {
        this.#clusterListener = await ClusterListener.start({
          hostname,
          port,
          identity,
          // Only peers whose certificate a live heartbeat names are let in.
          trust: (fingerprint) => this.#trusted().has(fingerprint),
          handler: (request) => this.#clusterHandler!(request),
          maxConnections: this.#clusterConnections,
          maxBodyBytes: this.options.maxBodyBytes,
          log: this.log,
          clock: this.clock,
          onRefused: (_fingerprint, reason) => this.#counters.refusedConnection(reason),
        });
        this.#counters.listenerStarted();
        const listener = this.#clusterListener;
        this.#metrics.gauge(
          "wasmkeep_cluster_connections",
          "Connections open on the cluster listener.",
          () => listener.stats().open,
        );
      } catch (error) {
        await this.stop();
        throw new NodeStartError(
          `cannot listen on ${hostname}:${port} (--cluster-listen): ${(error as Error).message}`,
        );
      }
      tls = {
        clusterAddress: advertise,
        fingerprint: identity.fingerprint,
        connect: (pinFor) => tlsConnector({ identity, pinFor }),
      };
      this.log.info("cluster listener up", {
        node: this.options.nodeId,
        listen: `${hostname}:${this.#clusterListener.address.port}`,
        advertise,
        fingerprint: identity.fingerprint,
        max_connections: this.#clusterConnections,
      });
    } else if (cluster.plaintext === "accept" && isPublicAddress(address)) {
      this.log.warn(
        "plain HTTP between nodes on a public address: calls are signed but nothing is encrypted; keep nodes on a private network or give them --cluster-listen",
        { advertise: address },
      );
    }
    this.#notReady = "checking that no other process runs with this node id";
    try {
      this.#plane.current = await ClusterPlane.start({
        bucket: this.bucket,
        clock: this.clock,
        log: this.log,
        nodeId: this.options.nodeId,
        processToken: this.#processToken,
        timing,
        address,
        tls,
        plaintext: cluster.plaintext,
        signCall: (call) => {
          const secret = this.#calls.secret;
          if (!secret) throw new Error("the cluster secret is not read yet");
          return signCall(secret, call, { clock: this.clock, random: this.#random });
        },
        version: VERSION,
        ownership: this.#ownership,
        holdsHere: (actor) => this.host.holds(actor),
        onLeaseChange: (valid, cause) => {
          if (valid) {
            this.log.info("node lease valid", { node: this.options.nodeId });
            return;
          }
          if (cause === "released") {
            // The clean stop's last step, after its actors were released.
            this.log.info("node lease given up by the clean stop: releasing the heartbeat", {
              node: this.options.nodeId,
            });
            return;
          }
          // Before any other node can take them: every actor is dropped at
          // once, and taken again at new generations once a write lands.
          this.log.warn("node lease not valid: dropping every actor", {
            node: this.options.nodeId,
            resident: this.host.residentCount,
          });
          if (!this.#stopping) this.host.dropAll();
        },
        // Events already sent may run as long as the renewed lease.
        onLeaseExtended: (validUntil) => this.pool.extendLease(wallClockOf(this.clock, validUntil)),
        onLeaseLost: (reason) => {
          this.log.error("another writer took this node's lease: stopping", {
            node: this.options.nodeId,
            reason: reason.detail,
          });
          this.host.dropAll();
          this.stop().finally(() =>
            // The reason's message says it all: "the node lease nodes/a was lost: …".
            this.#failed.reject(new NodeStartError(reason.message))
          );
        },
        signal: this.#probeAbort.signal,
      });
    } catch (error) {
      if (this.#stopping) {
        throw new NodeStartError("the node stopped before its node id check ended");
      }
      const message = error instanceof NodeIdInUse
        ? error.message
        : `the node could not join the cluster: ${(error as Error).message}`;
      this.log.error("cannot start", { node: this.options.nodeId, reason: message });
      await this.stop();
      throw new NodeStartError(message);
    }
    this.log.info("node joined the cluster", {
      node: this.options.nodeId,
      address,
      lease_valid: this.#plane.current.valid(),
    });
    await this.#readClusterSecret();
    if (this.#clusterListener) {
      this.#sweepTrust();
      // Peers list the heartbeats once a period: by then each has seen the
      // new fingerprint and lets this node in.
      this.#notReady = "publishing this node's certificate fingerprint to its peers";
      await this.clock.sleep(timing.periodMs + timing.skewMs, this.#probeAbort.signal)
        .catch(() => {});
    }
  }

  /**
   * Reads (or makes) `cluster/secret`. A bucket that does not answer is
   * asked again every {@linkcode CLUSTER_SECRET_RETRY_MS} in the background
   * while the node serves; calls between nodes fail until then.
   */
  async #readClusterSecret(attempt = 1): Promise<void> {
    try {
      this.#calls.secret = await loadClusterSecret(this.bucket, {
        random: this.#random,
        log: this.log,
        clock: this.clock,
        signal: this.#probeAbort.signal,
      });
      if (attempt > 1) this.log.info("cluster secret read", { attempt });
    } catch (error) {
      if (this.#probeAbort.signal.aborted) return;
      this.log.warn("could not read the cluster secret; calls between nodes wait for it", {
        attempt,
        error: String(error),
      });
      this.clock.sleep(CLUSTER_SECRET_RETRY_MS, this.#probeAbort.signal)
        .then(() => this.#readClusterSecret(attempt + 1), () => {});
    }
  }

  /** Trusted certificate fingerprints, recomputed at most every {@linkcode TRUST_SWEEP_MS}. */
  #trustCache: { at: number; fingerprints: Set<string> } = {
    at: -Infinity,
    fingerprints: new Set(),
  };

  #trusted(): Set<string> {
    const plane = this.#plane.current;
    if (!plane) return this.#trustCache.fingerprints;
    const now = this.clock.monotonic();
    if (now - this.#trustCache.at >= TRUST_SWEEP_MS) {
      this.#trustCache = { at: now, fingerprints: plane.trustedFingerprints() };
    }
    return this.#trustCache.fingerprints;
  }

  /**
   * Every {@linkcode TRUST_SWEEP_MS}: peers whose heartbeat was fenced,
   * released, removed, names a new key or expired lose their connections.
   */
  #sweepTrust(): void {
    const listener = this.#clusterListener;
    if (!listener || this.#stopping) return;
    this.#trustCache.at = -Infinity;
    const closed = listener.revoke();
    if (closed > 0) this.log.info("closed connections of peers no longer trusted", { closed });
    this.#revokeTimer = this.clock.setTimer(TRUST_SWEEP_MS, () => this.#sweepTrust());
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
    if (this.#stopping) return "stopping";
    if (this.#notReady) return this.#notReady;
    const plane = this.#plane.current;
    if (plane && !plane.valid()) return "the node lease is not valid (its heartbeat did not land)";
    return undefined;
  }

  /** Resident actors now. */
  get residentActors(): number {
    return this.host.residentCount;
  }

  /**
   * Stops cleanly: no new connections, events under way finish (up to
   * `stopGraceMs`), databases close.
   */
  stop(): Promise<void> {
    this.#stopping ??= (async () => {
      this.log.info("node stopping", { node: this.options.nodeId, in_flight: this.host.inFlight });
      this.#probeAbort.abort(new Error("the node is stopping"));
      // Kept requests get their 503 now: this node takes nothing over any more.
      this.#waits?.stop();
      const serverDone = this.server.shutdown();
      this.#revokeTimer?.cancel();
      const drained = await this.host.drain(this.options.stopGraceMs);
      if (!drained) this.log.warn("events still under way at the end of the stop grace period");
      // The executors close their actors once their uploads landed…
      await this.pool.close();
      // …then the records say the actors are free, for another node to take.
      const plane = this.#plane.current;
      if (!this.#notReady && (!plane || plane.valid())) await this.host.releaseAll();
      this.ownership.close();
      // Last: a released heartbeat frees any record whose release did not land.
      await plane?.stop();
      await this.#clusterListener?.close();
      // Connections still open past the grace period are cut, not awaited.
      await Promise.race([serverDone, this.clock.sleep(SERVER_SHUTDOWN_MS)]);
      await this.#cleaning;
      await this.bucket.close();
      this.log.info("node stopped", { node: this.options.nodeId });
    })();
    return this.#stopping;
  }
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

async function ensureDir(path: string): Promise<string> {
  try {
    await Deno.mkdir(path, { recursive: true });
  } catch (error) {
    throw new NodeStartError(
      `cannot create the data directory ${path} (--data-dir): ${(error as Error).message}`,
    );
  }
  return path;
}
