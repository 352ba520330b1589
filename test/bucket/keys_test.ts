import { assertEquals } from "./assert.ts";
import nodeAssert from "node:assert/strict";
import {
  actorPrefix,
  actorWalPrefix,
  alarmDuePrefix,
  alarmKey,
  appCurrentKey,
  CLUSTER_SECRET_KEY,
  nodeKey,
  ownerKey,
  probeKey,
} from "../../src/bucket/keys.ts";

const lobby = { tenant: "acme", class: "room", name: "lobby" };

Deno.test("keys: the spec's layout", () => {
  assertEquals(nodeKey("a"), "nodes/a");
  assertEquals(ownerKey(lobby), "owners/acme/room/lobby");
  assertEquals(actorPrefix(lobby), "actors/acme/room/lobby/");
  assertEquals(actorWalPrefix(lobby), "actors/acme/room/lobby/wal/");
  assertEquals(appCurrentKey("acme", "shop"), "apps/acme/shop/current");
  assertEquals(CLUSTER_SECRET_KEY, "cluster/secret");
  assertEquals(probeKey("00ff"), "probe/00ff");
});

Deno.test("keys: a name cannot reach into another actor's keys", () => {
  assertEquals(ownerKey({ ...lobby, name: "a/../b" }), "owners/acme/room/a%2F..%2Fb");
  nodeAssert.throws(() => ownerKey({ ...lobby, name: ".." }), TypeError);
  nodeAssert.throws(() => nodeKey(""), TypeError);
});

Deno.test("keys: alarm keys sort by due time", () => {
  const early = alarmKey(999, lobby), late = alarmKey(1_700_000_000_000, lobby);
  assertEquals(early, "alarms/000000000000999/acme/room/lobby");
  assertEquals(early < late, true);
  assertEquals(late.startsWith(alarmDuePrefix(1_700_000_000_000)), true);
  nodeAssert.throws(() => alarmKey(-1, lobby), RangeError);
});
