/**
 * Deliberately broken variants of the cluster code, each expressed through a
 * parameter the real code takes (its lease timings, the `canTakeFrom` of a
 * take, what its bucket does with a condition): the simulator must catch
 * each within `bound` seeds, counted from seed 1 (`test/sim/sim_test.ts`
 * checks it).
 *
 * @module
 */

import type { PutOptions } from "../src/bucket/bucket.ts";
import type { LeaseTiming } from "../src/cluster/lease_timing.ts";
import type { ReplicationBreak } from "./executor_host.ts";

/** How a variant breaks the real code. */
export interface Variant {
  name: string;
  /** What is broken, for the output and docs/testing.md. */
  description: string;
  /** Changes the lease timings every piece of the node is given. */
  timing?: (timing: LeaseTiming) => LeaseTiming;
  /**
   * Replaces the rule of a take: `not-live` frees an actor whose holder is
   * merely not live in this node's view (the ADR says only a fence or a
   * release frees it).
   */
  takeRule?: "not-live";
  /** Changes a process's writes to its own heartbeat. */
  ownHeartbeatPut?: (options: PutOptions) => PutOptions;
  /**
   * Breaks replication (sim/executor_host.ts): `stale-generation`, uploads under
   * the actor's first generation, unconditioned; `trust-local`, the restore is
   * shown no history past a cleanly closed local file; `executor-as-is`, the
   * executor's runtime as it was before b0ea67d (it ran events after the lease ran out).
   */
  replication?: ReplicationBreak;
  /**
   * A forward that failed (503 or 504: the request may have been written
   * and run) is sent once more: the forwarder's rule, never resend what the
   * peer may have read, dropped.
   */
  resendForwards?: boolean;
  /** How long a forwarded request waits for its answer (ClusterPlane's `answerTimeoutMs`). */
  answerTimeoutMs?: number;
  /**
   * The memory of holders (ClusterPlane's `holders`): `sticky` keeps the
   * first holder it learned of an actor, and a "not held" answer does not
   * make it forget.
   */
  holders?: "sticky";
  /**
   * The node never notices that a room with sockets moved (the node's
   * `socketsIgnoreMoves`): its takes look as if they replaced nobody's
   * record, and the read before a message says the room did not move.
   */
  socketsIgnoreMoves?: boolean;
  /**
   * The alarm sweep's grace (the node's `alarmSweepGraceMs`): 0 fires every
   * overdue alarm at once, its owner alive or not.
   */
  alarmSweepGraceMs?: number;
  /**
   * The executor serves an actor that ran a later version of the app than
   * its own instead of refusing it (the runtime's `planted.servesBehind`).
   */
  servesBehind?: boolean;
  /**
   * An alarm is stored with its actor but not listed in the bucket's index
   * (the runtime's `planted.alarmNotListed`): only its holder's timer knows it.
   */
  alarmNotListed?: boolean;
  /** The invariants expected to catch it (any violation counts as caught). */
  caughtBy: string[];
  /**
   * Seeds within which the simulator catches it: the longest run of seeds without a catch
   * among seeds 1 to 300 (1 to 50 for the replication variants, 1 to 100 for those of
   * forwarding), rounded up (the test counts from seed 1).
   */
  bound: number;
}

/** The broken variants, by name. */
export const VARIANTS: Record<string, Variant> = {
  "no-safety-margin": {
    name: "no-safety-margin",
    description: "the lease is valid for the whole ttl after its last write and peers fence it " +
      "as soon as the ttl has passed on their clock (safety and grace both 0): only clock " +
      "skew separates the end of a lease from a fence",
    timing: (t) => ({ ...t, safetyMs: 0, validMs: t.ttlMs, graceMs: 0, fenceAfterMs: t.ttlMs }),
    caughtBy: [
      "fenced-while-valid",
      "fenced-healthy-node",
      "two-holders",
      "event-while-other-holds",
    ],
    bound: 25,
  },
  "fence-early": {
    name: "fence-early",
    description: "peers fence a node once its last write is half a ttl old (fenceAfterMs below " +
      "the ttl and below the lease's own validity)",
    timing: (t) => ({ ...t, fenceAfterMs: t.ttlMs / 2 }),
    caughtBy: [
      "fenced-while-valid",
      "fenced-healthy-node",
      "two-holders",
      "event-while-other-holds",
      // Seed 15 since socket clients joined the workload (issue 18): a node fenced early
      // forwards to a holder that said "not held"; not seen with the real timings.
      "stale-holder-trusted",
    ],
    // Since a fence frees a node's actors only once fenceAfterMs old on the
    // taker's clock (5ebd1cc), fewer early fences end in two holders:
    // 13 % of seeds 1-100, the longest run without 30.
    bound: 40,
  },
  "take-from-not-live": {
    name: "take-from-not-live",
    description: "a take frees an actor whose holder is merely not live in the taker's view " +
      "(canTakeFrom: !membership.isLive) instead of fenced or released",
    takeRule: "not-live",
    // Two takes at once may land in either order: the older generation's
    // events after the newer's are the first sign then.
    caughtBy: ["two-holders", "event-while-other-holds", "event-generation-backwards"],
    // 2 of seeds 1-25 (9, 15) before the alarm clients; 1 of 1-60 (45) with them, every
    // run's order changed by their requests and the sweep.
    bound: 50,
  },
  "no-watch": {
    name: "no-watch",
    description: "no watch before a fence (watchMs 0): a peer is fenced on the first listing " +
      "that shows its last write old enough, and a node fences right after its own lease " +
      "came back, so after an outage nodes fence each other before they could renew",
    timing: (t) => ({ ...t, watchMs: 0 }),
    caughtBy: ["fenced-healthy-node"],
    bound: 30,
  },
  "fence-late": {
    name: "fence-late",
    description: "peers wait four ttls after a node's last write before they fence it " +
      "(fenceAfterMs 40 s): a dead node's actors stay held past the spec's bound",
    timing: (t) => ({ ...t, fenceAfterMs: 4 * t.ttlMs }),
    caughtBy: ["dead-node-not-fenced"],
    bound: 15,
  },
  "heartbeat-ignores-fence": {
    name: "heartbeat-ignores-fence",
    description: "heartbeat writes reach the store without their condition (a store that " +
      "ignores If-Match, or a lease that writes unconditionally): a fenced node writes over " +
      "its fence",
    ownHeartbeatPut: ({ signal }) => ({ signal }),
    caughtBy: ["heartbeat-after-fence", "two-holders", "event-while-other-holds"],
    bound: 15,
  },
  "upload-not-fenced": {
    name: "upload-not-fenced",
    description: "uploads are not fenced by generation: every hold writes its base and LTX " +
      "files under the actor's first generation instead of its own, without the create-only " +
      "condition, so an earlier holder's late upload lands among or over the current one's",
    replication: "stale-generation",
    caughtBy: [
      "upload-wrong-generation",
      "chain-differs",
      "history-unrestorable",
      "durable-write-lost",
      "txid-backwards",
      "replay-differs",
    ],
    bound: 5,
  },
  "restore-trusts-local": {
    name: "restore-trusts-local",
    description: "the restore trusts a cleanly closed local file without checking it against " +
      "the bucket's chain: it is shown no history past the file's .pos, finds the file " +
      "current, and the hold goes on from it",
    replication: "trust-local",
    caughtBy: [
      "durable-write-lost",
      "txid-backwards",
      "chain-differs",
      "history-unrestorable",
      "replay-differs",
    ],
    bound: 10,
  },
  "executor-as-is": {
    name: "executor-as-is",
    description: "the executor's runtime as it was before b0ea67d: it runs every event the " +
      "node sent, however late (events queued behind a bucket wait run after the node's lease " +
      "ran out, before discard-all arrives), and its discard-all spares actors still waking, " +
      "whose queued events wake them at the dropped generation",
    replication: "executor-as-is",
    caughtBy: [
      "event-outside-lease",
      "event-while-other-holds",
      "durable-write-lost",
      "txid-backwards",
      "chain-differs",
    ],
    bound: 10,
  },
  "forward-resends": {
    name: "forward-resends",
    description: "a forwarded request whose peer did not answer (a connection that broke or " +
      "was reset after the request was written, or an answer that did not come within 30 s) " +
      "is sent again: an event the peer ran runs twice",
    resendForwards: true,
    caughtBy: ["op-ran-twice"],
    // 7 % of seeds 1-60 with the holder memory, first at 43 (docs/testing.md).
    bound: 45,
  },
  "trust-not-held": {
    name: "trust-not-held",
    description: "a remembered holder is trusted after it said it does not hold the actor: the " +
      "memory of holders keeps the first holder it learned, and a 'not held' answer does not " +
      "make it forget, so the node keeps sending the actor's requests to a node that said no",
    holders: "sticky",
    caughtBy: ["stale-holder-trusted"],
    // 70 % of seeds 1-30, the longest run without 3.
    bound: 10,
  },
  "forward-waits-forever": {
    name: "forward-waits-forever",
    description: "a forwarded request waits ten minutes for its peer's answer instead of 30 s: " +
      "a request sent to a node that froze waits as long as the freeze",
    answerTimeoutMs: 600_000,
    caughtBy: ["forward-past-bound", "request-past-bound"],
    bound: 15,
  },
  "sockets-ignore-moves": {
    name: "sockets-ignore-moves",
    description: "a node never notices that a room with sockets open there moved: neither " +
      "the read of its record before a message nor its takes (whom each took the room " +
      "from) tell it, so a room another node held meanwhile serves its old sockets on " +
      "instead of closing them with 1012",
    socketsIgnoreMoves: true,
    caughtBy: ["socket-after-move"],
    // 5 % of seeds 1-60 (7, 22, 44), the longest run without 22.
    bound: 25,
  },
  "alarm-sweep-early": {
    name: "alarm-sweep-early",
    description: "the alarm sweep fires every overdue alarm it lists at once, instead of only " +
      "those overdue by more than a lease period plus grace: a live owner's alarm is taken " +
      "from it (the actor moved to the sweeping node) instead of fired by the owner",
    alarmSweepGraceMs: 0,
    caughtBy: ["alarm-swept-early"],
    bound: 10,
  },
  "serves-behind": {
    name: "serves-behind",
    description: "a node serves an actor that ran a later version of the app before it caught " +
      "up: its executor does not refuse an actor whose recorded deploy seq is above its own " +
      "(no 503 behind, no check of the app at once), so the actor runs older code than it ran",
    servesBehind: true,
    caughtBy: ["older-code"],
    // 4 of seeds 1-30 (3, 15, 16, 29), the longest run without 12.
    bound: 20,
  },
  "alarm-not-listed": {
    name: "alarm-not-listed",
    description: "an alarm set is stored with its actor but never listed under alarms/: once " +
      "its holder dies, no sweep finds it, and an actor nobody asks for never fires",
    alarmNotListed: true,
    caughtBy: ["alarm-not-fired"],
    // 8 of seeds 1-60 (19, 24, 33, 40, 48, 50, 57, 58), the longest run without 18.
    bound: 25,
  },
};
