/**
 * Violations the simulator finds in the real code as it is, each traced to
 * its cause. The simulator counts them and goes on (so the other invariants
 * keep being checked on every seed); `--strict` makes them fail the run.
 * `test/sim/sim_test.ts` checks that each is still reproduced by its seed:
 * once the code is fixed, that test fails, and the entry (and the
 * classification in sim/world.ts that names it) goes.
 *
 * A violation counts as known only when it can be tied to its cause: two
 * holders of an actor where a take written without a valid lease wrote a
 * generation between theirs. Anything else fails the run.
 *
 * Found earlier and fixed in 6e86d15: a take on a view of a replaced process
 * (canTakeFrom), an event sent after dropAll or after the lease ran out, and
 * an older take superseding a newer hold of the same process (ActorHost);
 * fixed in ac3b08a: a record of a replaced process never freed once its node
 * left (the rule of 6e86d15).
 *
 * @module
 */

/** One known violation. */
export interface KnownViolation {
  kind: string;
  /** Where the bug is, and what it does. */
  description: string;
  /** A seed of the real code (default options) that shows it. */
  seed: number;
}

/** The known violations, by kind. */
export const KNOWN: Record<string, KnownViolation> = {
  "take-without-lease": {
    kind: "take-without-lease",
    description: "OwnershipRecords.take (from ActorHost) writes the record whatever the " +
      "process's lease. A process frozen with a take in flight, while a new process of its " +
      "node id started and took the actor, resumes and finishes the take: the record names " +
      "its node, so it takes it without asking canTakeFrom, superseding the new process's " +
      "hold; ActorHost releases it (its lease is not valid), the record says released, and " +
      "another node takes the actor while the new process still uses its hold",
    seed: 379,
  },
};
