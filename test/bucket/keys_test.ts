import { assertEquals } from "./assert.ts";
import nodeAssert from "node:assert/strict";
import {
  actorPrefix,
  actorWalPrefix,
  alarmDuePrefix,
  alarmKey,
  alarmTenantPrefix,
  appCurrentKey,
  CLUSTER_SECRET_KEY,
  nodeKey,
  ownerKey,
  parseAlarmKey,
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

Deno.test("keys: alarm keys sort by due time within their tenant, and read back", () => {
  const early = alarmKey(999, lobby), late = alarmKey(1_700_000_000_000, lobby);
  assertEquals(early, "alarms/acme/000000000000999/room/lobby");
  assertEquals(early < late, true);
  assertEquals(late.startsWith(alarmDuePrefix("acme", 1_700_000_000_000)), true);
  // Every alarm due by a time sorts before the next millisecond's prefix.
  assertEquals(alarmKey(1000, { ...lobby, name: "zzz" }) < alarmDuePrefix("acme", 1001), true);
  assertEquals(early.startsWith(alarmTenantPrefix("acme")), true);
  nodeAssert.throws(() => alarmKey(-1, lobby), RangeError);
  const odd = { tenant: "acme", class: "room", name: "a/b c" };
  assertEquals(parseAlarmKey(alarmKey(42, odd)), { dueMs: 42, actor: odd });
  assertEquals(parseAlarmKey("alarms/acme/42/room/lobby"), undefined);
  assertEquals(parseAlarmKey("alarms/acme/000000000000042/room"), undefined);
  assertEquals(parseAlarmKey("owners/acme/room/lobby"), undefined);
});
