/**
 * What the operating system allows this process, and the bounds derived
 * from it.
 *
 * @module
 */

/** Assumed when the limit cannot be read (the usual Linux default). */
export const FALLBACK_OPEN_FILE_LIMIT = 1024;

/** Share of the open-file limit given to actor databases; the rest is for sockets and other files. */
export const DATABASE_SHARE_OF_OPEN_FILES = 0.5;

/**
 * Files one open actor database holds: SQLite's database and `-wal`
 * (exclusive locking, no `-shm`), the replication's own descriptor of the
 * database for snapshots, and one more for the moment capture reads the
 * `-wal`.
 */
export const FILES_PER_DATABASE = 4;

/**
 * The soft limit on open files of this process, read from
 * `/proc/self/limits`; {@linkcode FALLBACK_OPEN_FILE_LIMIT} elsewhere.
 *
 * @example
 * ```ts
 * import { openFileLimit } from "./limits.ts";
 * const limit = openFileLimit(); // 20000 on our machines
 * ```
 */
export function openFileLimit(): number {
  try {
    const text = Deno.readTextFileSync("/proc/self/limits");
    const match = text.match(/^Max open files\s+(\d+|unlimited)/m);
    if (match && match[1] !== "unlimited") return Number(match[1]);
    if (match) return 1_048_576;
  } catch {
    // Not Linux, or /proc is not mounted.
  }
  return FALLBACK_OPEN_FILE_LIMIT;
}

/**
 * Most actor databases open at once on a node, whatever the file limit: an
 * open SQLite connection costs about 129 KiB that the allocator keeps once
 * freed (docs/performance.md), so this bounds that memory to about 256 MiB.
 */
export const MAX_OPEN_DATABASES = 2048;

/**
 * How many actor databases may be open at once under an open-file limit.
 *
 * @example
 * ```ts
 * import { maxOpenDatabases } from "./limits.ts";
 * maxOpenDatabases(20000); // 2048
 * maxOpenDatabases(1024); // 128
 * ```
 */
export function maxOpenDatabases(fileLimit: number): number {
  const byFiles = Math.floor(fileLimit * DATABASE_SHARE_OF_OPEN_FILES / FILES_PER_DATABASE);
  return Math.max(1, Math.min(MAX_OPEN_DATABASES, byFiles));
}

/**
 * Open files the main process keeps for other than client connections:
 * connections to peers (the forwarder's own bound), the bucket, the
 * executors' sockets, listeners and logs.
 */
export const RESERVED_FILES_FOR_MAIN = 1024 + 256;

/**
 * Open files kept for other than client connections under an open-file
 * limit: {@linkcode RESERVED_FILES_FOR_MAIN}, or half the limit when that is
 * less, so that a small limit still leaves room for clients.
 *
 * @example
 * ```ts
 * import { reservedFilesForMain } from "./limits.ts";
 * reservedFilesForMain(20_000); // 1280
 * reservedFilesForMain(1024); // 512
 * ```
 */
export function reservedFilesForMain(fileLimit: number): number {
  return Math.min(RESERVED_FILES_FOR_MAIN, Math.floor(fileLimit / 2));
}

/**
 * Client connections a node serves at once, WebSockets included (an open
 * one holds its place): `--max-connections`, lowered to what the open-file
 * limit leaves after {@linkcode reservedFilesForMain} and the
 * `otherConnections` counted first (the cluster listener's cap and the
 * relays' connections to owners, when the node has them); at least 1.
 *
 * @example
 * ```ts
 * import { maxClientConnections } from "./limits.ts";
 * maxClientConnections(10_000, 20_000); // 10000
 * maxClientConnections(10_000, 1024); // 512
 * ```
 */
export function maxClientConnections(
  requested: number,
  fileLimit: number,
  otherConnections = 0,
): number {
  return Math.max(
    1,
    Math.min(requested, fileLimit - reservedFilesForMain(fileLimit) - otherConnections),
  );
}

/** Connections the cluster listener (mutual TLS from peers) accepts at once, at most. */
export const MAX_CLUSTER_CONNECTIONS = 1024;

/**
 * The cluster listener's connection cap under an open-file limit:
 * {@linkcode MAX_CLUSTER_CONNECTIONS}, or a quarter of what the limit leaves
 * after {@linkcode reservedFilesForMain} when that is less. Counted before
 * the client connections (see {@linkcode maxClientConnections}).
 *
 * @example
 * ```ts
 * import { maxClusterConnections } from "./limits.ts";
 * maxClusterConnections(20_000); // 1024
 * maxClusterConnections(2048); // 256
 * maxClusterConnections(1024); // 128
 * ```
 */
export function maxClusterConnections(fileLimit: number): number {
  return Math.max(
    1,
    Math.min(
      MAX_CLUSTER_CONNECTIONS,
      Math.floor((fileLimit - reservedFilesForMain(fileLimit)) / 4),
    ),
  );
}

/**
 * Actors whose holder a node remembers from its forwards (least recently
 * used forgotten first): with each entry an actor key and a node id, about
 * 200 bytes, so at most about 13 MiB; a forward to a remembered live holder
 * reads no ownership record.
 *
 * @example
 * ```ts
 * import { MAX_REMEMBERED_HOLDERS } from "./limits.ts";
 * console.log(MAX_REMEMBERED_HOLDERS); // 65536
 * ```
 */
export const MAX_REMEMBERED_HOLDERS = 65_536;

/**
 * Longest request body a node reads whole before it knows where the
 * request goes; a longer one (or one of unknown length) is sent on as it
 * is read when another node holds the actor, so a forwarding node holds a
 * piece of it at a time, never the body. In hand, a body can be sent again
 * after a "not held" answer; a streamed one is then answered 503 (retry).
 *
 * @example
 * ```ts
 * import { MAX_REPLAYED_BODY_BYTES } from "./limits.ts";
 * console.log(MAX_REPLAYED_BODY_BYTES); // 65536
 * ```
 */
export const MAX_REPLAYED_BODY_BYTES = 64 * 1024;

/**
 * Most relays a node holds open to its peers at once (upgrades sent on to
 * the node that owns their actor); one more is refused. Each holds two
 * connections (4,096 of the 20,000 open files at most) and up to two
 * buffers of 64 KiB (`RELAY_BUFFER_BYTES`, 256 MiB at most).
 *
 * @example
 * ```ts
 * import { MAX_RELAYS } from "./limits.ts";
 * console.log(MAX_RELAYS); // 2048
 * ```
 */
export const MAX_RELAYS = 2_048;

/**
 * The relays a cluster node holds at once under an open-file limit:
 * {@linkcode MAX_RELAYS}, or an eighth of what the limit leaves after
 * {@linkcode reservedFilesForMain} when that is less. Each relay's
 * connection to the owner is counted before the client connections (see
 * {@linkcode maxClientConnections}); its client's connection holds a client
 * place, as an open WebSocket does.
 *
 * @example
 * ```ts
 * import { maxRelays } from "./limits.ts";
 * maxRelays(20_000); // 2048
 * maxRelays(1024); // 64
 * ```
 */
export function maxRelays(fileLimit: number): number {
  return Math.max(
    1,
    Math.min(MAX_RELAYS, Math.floor((fileLimit - reservedFilesForMain(fileLimit)) / 8)),
  );
}

/**
 * Largest WebSocket message by default (`--max-socket-message-bytes`),
 * either way: a client's larger message closes its socket with 1009 (too
 * big), an actor's larger `websockets.send` is its error.
 *
 * @example
 * ```ts
 * import { MAX_SOCKET_MESSAGE_BYTES } from "./limits.ts";
 * console.log(MAX_SOCKET_MESSAGE_BYTES); // 1048576
 * ```
 */
export const MAX_SOCKET_MESSAGE_BYTES = 1024 * 1024;

/**
 * The largest `--max-socket-message-bytes`: a message travels to its
 * executor in one frame, and a socket may have four of them unsent
 * (`MAX_SOCKET_BUFFERED_BYTES`, 64 MiB at this ceiling).
 *
 * @example
 * ```ts
 * import { SOCKET_MESSAGE_BYTES_CEILING } from "./limits.ts";
 * console.log(SOCKET_MESSAGE_BYTES_CEILING); // 16777216
 * ```
 */
export const SOCKET_MESSAGE_BYTES_CEILING = 16 * 1024 * 1024;

/**
 * Most WebSockets open on one actor at once; one more upgrade is answered
 * 503.
 *
 * @example
 * ```ts
 * import { MAX_SOCKETS_PER_ACTOR } from "./limits.ts";
 * console.log(MAX_SOCKETS_PER_ACTOR); // 1024
 * ```
 */
export const MAX_SOCKETS_PER_ACTOR = 1024;

/**
 * Most WebSockets a node holds open at once, each one open file (a TCP
 * connection) of the 20,000: one more upgrade is answered 503.
 *
 * @example
 * ```ts
 * import { MAX_NODE_SOCKETS } from "./limits.ts";
 * console.log(MAX_NODE_SOCKETS); // 4096
 * ```
 */
export const MAX_NODE_SOCKETS = 4_096;

/**
 * Longest wait for the other side's answer to a WebSocket close this node
 * sent (the spec's "a client that does not answer a close within 5 s is
 * dropped").
 *
 * @example
 * ```ts
 * import { CLOSE_ANSWER_MS } from "./limits.ts";
 * console.log(CLOSE_ANSWER_MS); // 5000
 * ```
 */
export const CLOSE_ANSWER_MS = 5_000;

/**
 * How often every node reads the overdue part of the alarm index (the
 * spec's "every 10 s").
 */
export const ALARM_SWEEP_MS = 10_000;

/**
 * Keys asked for per page of the sweep's listing. A listing stops at the
 * first entry not yet overdue, so with nothing due one call answers: small
 * pages keep that call small however many alarms are pending.
 */
export const ALARM_SWEEP_PAGE_KEYS = 100;

/**
 * Overdue entries one sweep run reads at most (the rest wait for the next
 * run, 10 s later): a backlog of 100,000 alarms is worked off in runs of
 * this many, not listed whole.
 */
export const ALARM_SWEEP_MAX_ENTRIES = 2_000;

/**
 * Alarms a node fires at once (their events run or wait on a restore
 * together). A burst of alarms due in the same second is fired this many
 * at a time, so it does not take every actor in at once.
 */
export const MAX_ALARMS_FIRING = 32;

/**
 * Alarms a node keeps armed on its own timer (actors it holds or last
 * held). Past it, the latest are forgotten here and fire by a sweep, late
 * by the sweep's grace.
 */
export const MAX_ARMED_ALARMS = 100_000;

/** The first retry of a failed `on-alarm` waits this long; each next one twice as long. */
export const ALARM_FIRST_RETRY_MS = 1_000;

/** The default ceiling of an alarm's retry backoff (`--alarm-retry-max-secs`): 5 minutes. */
export const ALARM_RETRY_MAX_MS = 300_000;

/** How often a node that follows an app reads its `current` for a new version (the spec: every 3 s). */
export const APP_POLL_MS = 3_000;

/**
 * Actors a node remembers to exist, for classes open only to existing ones
 * (access rule `existing`): an actor once created exists for ever, so a
 * second request for it needs no bucket read while it is remembered.
 */
export const MAX_KNOWN_ACTORS = 100_000;

/**
 * Transpiled components a node keeps in its cache (`<data-dir>/cache/components`)
 * beyond those of the classes it serves: the most recently used, so a
 * rollback needs no transpile; older ones are deleted when a version is applied.
 */
export const MAX_SPARE_CACHED_COMPONENTS = 32;
