/**
 * The simulator watches a node through the observers its parts are built
 * with (src/node/observers.ts), never by replacing a part's method: each
 * node's parts, and their classes' prototypes, are frozen as soon as the
 * node is built, so an assignment to one of them throws (modules are
 * strict) and the seed fails.
 */

import assert from "node:assert/strict";
import { runSeed } from "../../sim/world.ts";
import { formatFailure } from "../../sim/main.ts";
import { VARIANTS } from "../../sim/variants.ts";
import type { NodeParts } from "../../src/node/assemble.ts";

/** What the node is built from, not a part of its own: the seams and plain settings. */
const NOT_PARTS = new Set<keyof NodeParts>([
  "options",
  "clock",
  "random",
  "log",
  "seamBucket",
  "identity",
  "timing",
  "listener",
]);

/** Freezes `part` and the prototypes of its class and the classes above it. */
function freeze(part: unknown): void {
  if (part === null || (typeof part !== "object" && typeof part !== "function")) return;
  Object.freeze(part);
  for (
    let proto = Object.getPrototypeOf(part);
    proto && proto !== Object.prototype && proto !== Function.prototype;
    proto = Object.getPrototypeOf(proto)
  ) {
    Object.freeze(proto);
  }
}

/** Every part of a built node, the cluster plane's own parts among them. */
function freezeParts(parts: NodeParts): number {
  let frozen = 0;
  for (const [name, part] of Object.entries(parts)) {
    if (NOT_PARTS.has(name as keyof NodeParts)) continue;
    freeze(part);
    frozen++;
  }
  const plane = parts.plane;
  if (plane) {
    for (const part of [plane.peers, plane.lease, plane.membership, plane.holders]) {
      freeze(part);
      frozen++;
    }
  }
  return frozen;
}

Deno.test("sim: no method of a node's parts is replaced (its parts frozen once built)", async () => {
  let nodes = 0;
  const built = (parts: NodeParts) => {
    assert.ok(freezeParts(parts) > 20);
    nodes++;
  };
  // Seeds with forwards, kept requests and alarms; the planted forward-resends too.
  const runs = [
    { seed: 1 },
    { seed: 2 },
    { seed: 6 },
    { seed: 3, variant: VARIANTS["forward-resends"] },
  ];
  for (const run of runs) {
    const result = await runSeed({ ...run, durationMs: 60_000, built });
    // The planted variant may be caught, but by an invariant, not by a part that would not change.
    const watched = result.ok ||
      (run.variant &&
        !["simulator-error", "start-failed", "unhandled-rejection"].includes(
          result.violation!.kind,
        ));
    if (!watched) assert.fail(formatFailure(result, {}));
    assert.ok(result.stats.takes > 0 && result.stats.forwards > 0, JSON.stringify(result.stats));
  }
  assert.ok(nodes >= 8);
});
