/**
 * What the clients of a chaos test saw, and the invariants checked on it
 * (issue 6): acknowledged durable writes are in every later read, reads
 * never go back, no two histories of one actor are served at once, and no
 * request waits past its bound.
 *
 * Two kinds of actors make the checks exact. A durable-only actor gets
 * `POST /durable` and `GET /rows`: its row count is the number of durable
 * writes that ran, so the acknowledged ones before a read are a lower bound
 * of what it reads and those sent before it ended an upper bound. A mixed
 * actor gets plain writes that insert a tag unique to the request and answer
 * the whole table in row order (`INSERT ... RETURNING`), durable writes, and
 * reads of the whole table: every answer is a state of the actor's
 * database, so states can be compared.
 *
 * @module
 */

/** What a request was for. */
export type OpKind = "read" | "plain" | "durable";

/** One request as a client saw it. */
export interface Op {
  actor: string;
  /** `durable`: only durable writes and row counts; `mixed`: tagged plain writes too. */
  group: "durable" | "mixed";
  kind: OpKind;
  /** The node id it was sent to, and which process of it (0 the first). */
  sentTo: string;
  incarnation: number;
  /** `Date.now()` when it was sent and when its answer (or error) came. */
  start: number;
  end: number;
  status?: number;
  body?: string;
  /** `x-wasmkeep-node`: the node that ran it. */
  node?: string | null;
  /** Why there is no answer (connection refused or reset, the client's own limit). */
  error?: string;
  /** A plain write's tag. */
  tag?: string;
}

/** The row a durable write inserts (testbed.c). */
export const DURABLE_ROW = "durable";

/** The table in row order, as mixed actors' reads and plain writes answer it. */
export const TABLE_SQL = "SELECT group_concat(x, ',') FROM (SELECT x FROM t ORDER BY rowid)";

/** The SQL of a mixed actor's plain write of `tag`: insert it, answer the table. */
export function plainWriteSql(tag: string): string {
  return `INSERT INTO t(x) VALUES ('${tag}') RETURNING (${TABLE_SQL})`;
}

/** The rows a mixed actor's answer lists, in row order. */
export function rowsOf(op: Op): string[] {
  return op.body ? op.body.split(",") : [];
}

/** Durable rows seen by a successful read (or mixed plain write), else undefined. */
export function durableSeen(op: Op): number | undefined {
  if (op.status !== 200 || op.kind === "durable") return undefined;
  if (op.group === "durable") return Number(op.body);
  if (op.kind === "read" || op.kind === "plain") {
    return rowsOf(op).filter((row) => row === DURABLE_ROW).length;
  }
  return undefined;
}

const describe = (op: Op) =>
  `${op.kind} sent to ${op.sentTo}#${op.incarnation} at ${op.start}, answered ${
    op.status ?? op.error
  } by ${op.node ?? "-"} at ${op.end}`;

/**
 * Durable writes against what reads saw, per actor: at least every durable
 * write acknowledged before the read started, at most every one sent before
 * it ended, and never fewer than a read that ended before it started.
 */
export function checkDurable(ops: Op[]): string[] {
  const problems: string[] = [];
  for (const [actor, mine] of byActor(ops)) {
    const durable = mine.filter((op) => op.kind === "durable");
    const acked = durable.filter((op) => op.status === 200).map((op) => op.end).sort(ascending);
    const sent = durable.map((op) => op.start).sort(ascending);
    const reads = mine.filter((op) => durableSeen(op) !== undefined);
    for (const read of reads) {
      const seen = durableSeen(read)!;
      const atLeast = countBelow(acked, read.start);
      const atMost = countBelow(sent, read.end);
      if (seen < atLeast) {
        problems.push(
          `${actor}: an acknowledged durable write is missing: ${seen} durable rows, ${atLeast} acknowledged before (${
            describe(read)
          })`,
        );
      }
      if (seen > atMost) {
        problems.push(
          `${actor}: ${seen} durable rows, only ${atMost} durable writes were sent (${
            describe(read)
          })`,
        );
      }
    }
    // Monotonic reads: the most any read that ended before this one started saw.
    const byEnd = [...reads].sort((a, b) => a.end - b.end);
    const most: Op[] = [];
    for (const read of byEnd) {
      const last = most.at(-1);
      most.push(last && durableSeen(last)! >= durableSeen(read)! ? last : read);
    }
    const ends = byEnd.map((op) => op.end);
    for (const read of reads) {
      const before = countBelow(ends, read.start);
      if (before === 0) continue;
      const earlier = most[before - 1];
      if (durableSeen(earlier)! > durableSeen(read)!) {
        problems.push(
          `${actor}: a read went back from ${durableSeen(earlier)} to ${
            durableSeen(read)
          } durable rows (${describe(earlier)}; then ${describe(read)})`,
        );
      }
    }
  }
  return problems;
}

/** Why a plain write acknowledged by `node` at `from` could be gone by `to`, if anything says so. */
export type LossExcuse = (node: string, from: number, to: number) => string | undefined;

/** What {@linkcode checkStates} found. */
export interface StatesReport {
  problems: string[];
  /** Acknowledged plain writes lost, each with its node's excuse. */
  losses: string[];
}

/**
 * The states mixed actors' answers show, per actor:
 *
 * - every row is the tag of a plain write sent before the answer, or a
 *   durable row, and no tag is there twice (no write ran twice);
 * - a plain write's own answer holds its tag;
 * - all states agree on the order of the tags they share, and no state puts
 *   a tag after one whose write was acknowledged before the first was sent;
 * - a tag once missing from a state that started after it was seen never
 *   comes back: a state without it, followed by one with it, means two
 *   histories of the actor were served at once (two owners), or a lost
 *   write was brought back;
 * - an acknowledged plain write is lost only if its node could lose it
 *   (`excuse`: it died, paused past its lease, or dropped its actors).
 */
export function checkStates(ops: Op[], excuse: LossExcuse): StatesReport {
  const report: StatesReport = { problems: [], losses: [] };
  for (const [actor, mine] of byActor(ops.filter((op) => op.group === "mixed"))) {
    checkActorStates(actor, mine, excuse, report);
  }
  return report;
}

function checkActorStates(actor: string, ops: Op[], excuse: LossExcuse, report: StatesReport) {
  const problems = report.problems;
  const writes = new Map<string, Op>();
  for (const op of ops) if (op.kind === "plain") writes.set(op.tag!, op);
  const states = ops.filter((op) => op.status === 200 && op.kind !== "durable")
    .sort((a, b) => a.start - b.start);
  const tagsOf = new Map<Op, Set<string>>();
  const after = new Map<string, Set<string>>();
  for (const state of states) {
    const tags = rowsOf(state).filter((row) => row !== DURABLE_ROW);
    tagsOf.set(state, new Set(tags));
    if (tags.length !== new Set(tags).size) {
      problems.push(`${actor}: a tag is there twice, a write ran twice (${describe(state)})`);
    }
    if (state.kind === "plain" && !tags.includes(state.tag!)) {
      problems.push(`${actor}: a plain write's answer lacks its own tag ${state.tag}`);
    }
    for (const [i, tag] of tags.entries()) {
      const write = writes.get(tag);
      if (!write || write.start > state.end) {
        problems.push(`${actor}: row ${tag} was never written before (${describe(state)})`);
        continue;
      }
      const next = tags[i + 1];
      if (next === undefined) continue;
      if (!after.has(tag)) after.set(tag, new Set());
      after.get(tag)!.add(next);
      const nextWrite = writes.get(next);
      if (nextWrite?.status === 200 && nextWrite.end < write.start) {
        problems.push(
          `${actor}: ${next} (acknowledged at ${nextWrite.end}) comes after ${tag} (sent at ${write.start}) in ${
            describe(state)
          }`,
        );
      }
    }
  }
  const cycle = findCycle(after);
  if (cycle) problems.push(`${actor}: states disagree on the order of ${cycle.join(", ")}`);

  // When each tag was first known to be in the actor's history: its own
  // acknowledged answer, or the first state that showed it.
  const known = new Map<string, Op>();
  for (const state of states) {
    for (const tag of tagsOf.get(state)!) {
      const first = known.get(tag);
      if (!first || state.end < first.end) known.set(tag, state);
    }
  }
  const byKnown = [...known].sort((a, b) => a[1].end - b[1].end);
  const lost = new Map<string, Op>();
  let next = 0;
  const seen: string[] = [];
  for (const state of states) {
    while (next < byKnown.length && byKnown[next][1].end < state.start) {
      seen.push(byKnown[next++][0]);
    }
    const tags = tagsOf.get(state)!;
    for (const tag of seen) {
      if (tags.has(tag)) continue;
      const first = lost.get(tag);
      if (!first || state.end < first.end) lost.set(tag, state);
    }
  }
  for (const [tag, missing] of lost) {
    const back = states.find((state) => state.start > missing.end && tagsOf.get(state)!.has(tag));
    if (back) {
      problems.push(
        `${actor}: ${tag} was seen (${describe(known.get(tag)!)}), missing (${
          describe(missing)
        }), then seen again (${
          describe(back)
        }): a lost write came back (two histories served at once, or a restore that brought it back)`,
      );
    }
    const write = writes.get(tag)!;
    if (write.status !== 200) continue;
    const why = excuse(write.node!, write.start, missing.start);
    const line =
      `${actor}: plain write ${tag} acknowledged by ${write.node} at ${write.end}, missing at ${missing.start} (${
        describe(missing)
      }): ${why ?? "nothing explains it"}`;
    report.losses.push(line);
    if (!why) problems.push(`acknowledged plain write lost while its node stayed up: ${line}`);
  }
}

/** The spec's bounds on how long one request may wait, for a node that is not paused. */
export interface RequestBounds {
  /** A GET without a body: a failover wait, then a forward. */
  getMs: number;
  /** Anything else: never kept, at most a forward. */
  otherMs: number;
}

/**
 * Requests that took longer than their bound, not counting the time the
 * node they were sent to was paused (`pausedMs`): a stopped process answers
 * nothing, whatever the spec says. A request with no answer at all within
 * the client's own limit breaks its bound too.
 */
export function checkBounds(
  ops: Op[],
  bounds: RequestBounds,
  pausedMs: (op: Op) => number,
): string[] {
  const problems: string[] = [];
  for (const op of ops) {
    const bound = op.kind === "read" ? bounds.getMs : bounds.otherMs;
    const waited = op.end - op.start - pausedMs(op);
    if (waited > bound) {
      problems.push(`${op.actor}: waited ${waited} ms, bound ${bound} ms (${describe(op)})`);
    }
  }
  return problems;
}

function byActor(ops: Op[]): Map<string, Op[]> {
  const map = new Map<string, Op[]>();
  for (const op of ops) {
    if (!map.has(op.actor)) map.set(op.actor, []);
    map.get(op.actor)!.push(op);
  }
  return map;
}

const ascending = (a: number, b: number) => a - b;

/** How many of the sorted `values` are below `limit`. */
function countBelow(values: number[], limit: number): number {
  let [low, high] = [0, values.length];
  while (low < high) {
    const mid = (low + high) >> 1;
    if (values[mid] < limit) low = mid + 1;
    else high = mid;
  }
  return low;
}

/**
 * Tags on a cycle of the "comes right after" relation (Kahn's algorithm:
 * what is left once every tag with nothing before it is taken away), or
 * undefined when there is none.
 */
function findCycle(after: Map<string, Set<string>>): string[] | undefined {
  const before = new Map<string, number>();
  for (const [tag, nexts] of after) {
    if (!before.has(tag)) before.set(tag, 0);
    for (const next of nexts) before.set(next, (before.get(next) ?? 0) + 1);
  }
  const free = [...before].filter(([, count]) => count === 0).map(([tag]) => tag);
  while (free.length > 0) {
    const tag = free.pop()!;
    before.delete(tag);
    for (const next of after.get(tag) ?? []) {
      const count = before.get(next)! - 1;
      before.set(next, count);
      if (count === 0) free.push(next);
    }
  }
  return before.size > 0 ? [...before.keys()].slice(0, 10) : undefined;
}
