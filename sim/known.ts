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
 * left (the rule of 6e86d15); fixed by `TakeOptions.mayWrite`:
 * `take-without-lease`, a process paused with a take in flight that resumed
 * after a new process of its node id took the actor and superseded its hold
 * (seed 379). A kind no longer listed here fails the run if it shows again.
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
export const KNOWN: Record<string, KnownViolation> = {};
