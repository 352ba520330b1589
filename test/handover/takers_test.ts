import assert from "node:assert/strict";
import {
  alarmTakers,
  pickTaker,
  whyNotSameApp,
  whyNotTaker,
  whyRefuseAlarms,
} from "../../src/handover/takers.ts";
import type { Heartbeat } from "../../src/cluster/heartbeat.ts";

const beat = (overrides: Partial<Heartbeat>): Heartbeat => ({
  format: 2,
  nodeId: "b",
  process: "p",
  at: 0,
  lease: "live",
  address: "http://b",
  app: "acme/shop",
  readsSecrets: false,
  takesMoved: true,
  version: "0.3.0",
  state: "serving",
  ...overrides,
});
const from = { nodeId: "a", app: "acme/shop" };

Deno.test("takers: only a live node of the same app, serving, that takes moved actors", () => {
  assert.equal(whyNotTaker(beat({}), true, from), undefined);
  assert.equal(whyNotTaker(beat({ nodeId: "a" }), true, from), "it is this node");
  assert.equal(whyNotTaker(beat({}), false, from), "it is not live");
  assert.equal(whyNotTaker(beat({ lease: "released" }), true, from), "it is not live");
  assert.equal(
    whyNotTaker(beat({ app: "globex/shop" }), true, from),
    "it serves another tenant (globex)",
  );
  assert.match(
    whyNotTaker(beat({ app: "acme/admin" }), true, from)!,
    /acme\/admin, not acme\/shop/,
  );
  assert.equal(
    whyNotTaker(beat({ app: undefined }), true, { nodeId: "a", app: undefined }),
    undefined,
  );
  assert.equal(whyNotTaker(beat({ state: "draining" }), true, from), "it is draining");
  assert.match(whyNotTaker(beat({ takesMoved: false }), true, from)!, /does not take moved/);
});

Deno.test("takers: each actor goes to one node, spread over them, and a skipped node's share moves", () => {
  const takers = ["b", "c", "d"].map((node) => ({ node, address: `http://${node}` }));
  const counts = new Map<string, number>();
  for (let i = 0; i < 3000; i++) {
    const actor = { tenant: "t", class: "c", name: `n${i}` };
    const first = pickTaker(takers, actor)!.node;
    assert.equal(pickTaker(takers, actor)!.node, first, "the same node every time");
    counts.set(first, (counts.get(first) ?? 0) + 1);
    const without = pickTaker(takers, actor, new Set(["b"]))!.node;
    if (first !== "b") assert.equal(without, first, "only b's share moves");
    else assert.notEqual(without, "b");
  }
  for (const node of ["b", "c", "d"]) {
    assert.ok(counts.get(node)! > 800, `${node}: ${counts.get(node)}`);
  }
  assert.equal(
    pickTaker(takers, { tenant: "t", class: "c", name: "x" }, new Set(["b", "c", "d"])),
    undefined,
  );
});

Deno.test("takers: a clean stop's alarms go to live nodes of the same app, serving ones first, whatever their version", () => {
  assert.equal(
    whyNotSameApp(beat({ state: "draining", takesMoved: false }), true, from),
    undefined,
  );
  assert.equal(whyNotSameApp(beat({ nodeId: "a" }), true, from), "it is this node");
  assert.equal(whyNotSameApp(beat({ lease: "fenced" }), true, from), "it is not live");
  assert.equal(
    whyNotSameApp(beat({ app: "globex/shop" }), true, from),
    "it serves another tenant (globex)",
  );
  // --actor classes are the default tenant's, not an app of it.
  assert.equal(
    whyNotSameApp(beat({ app: undefined }), true, { nodeId: "a", app: "default/shop" }),
    "it serves --actor classes, not default/shop",
  );
  const live = [
    beat({ nodeId: "a" }),
    beat({ nodeId: "b", state: "draining" }),
    beat({ nodeId: "c", app: "globex/shop" }),
    beat({ nodeId: "d", takesMoved: false }),
    beat({ nodeId: "e", app: undefined }),
    beat({ nodeId: "f", state: "stuck" }),
  ].map((heartbeat) => ({ nodeId: heartbeat.nodeId, heartbeat }));
  assert.deepEqual(alarmTakers(live, from).map((view) => view.nodeId), ["d", "b", "f"]);
  assert.deepEqual(alarmTakers(live, { nodeId: "x", app: undefined }).map((v) => v.nodeId), [
    "e",
  ]);
});

Deno.test("takers: a node refuses handed alarms of another tenant, or from a node of another app", () => {
  const own = "acme/shop";
  const key = (tenant: string) => ({ tenant, class: "reminder", name: "ann" });
  assert.equal(whyRefuseAlarms([key("acme")], "acme/shop", own), undefined);
  // A sender that did not name its app: the alarms' tenant decides.
  assert.equal(whyRefuseAlarms([key("acme")], undefined, own), undefined);
  assert.equal(
    whyRefuseAlarms([key("acme"), key("globex")], "acme/shop", own),
    "this node serves tenant acme, not globex: no alarm armed",
  );
  assert.equal(
    whyRefuseAlarms([key("globex")], undefined, own),
    "this node serves tenant acme, not globex: no alarm armed",
  );
  assert.equal(
    whyRefuseAlarms([key("acme")], "acme/admin", own),
    "this node serves acme/shop, not acme/admin: no alarm armed",
  );
  const actors = undefined;
  assert.equal(whyRefuseAlarms([key("default")], null, actors), undefined);
  assert.equal(
    whyRefuseAlarms([key("default")], "default/shop", actors),
    "this node serves --actor classes, not default/shop: no alarm armed",
  );
});
