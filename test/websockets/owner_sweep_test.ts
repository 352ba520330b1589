/**
 * The owner sweep of a node's sockets (src/websockets/owner_sweep.ts) over
 * the real ActorSockets, with sockets that record what is done to them:
 * only the sockets of actors another node holds close, with 1012 and no
 * close event; a record that cannot be read waits for the next sweep.
 */

import assert from "node:assert/strict";
import type { ActorKey } from "../../src/actors/key.ts";
import type { SocketEvent } from "../../src/actors/protocol.ts";
import type { OwnerRecord } from "../../src/cluster/ownership.ts";
import { createLogger } from "../../src/log.ts";
import { systemClock } from "../../src/time/clock.ts";
import { ActorSockets } from "../../src/websockets/actor_sockets.ts";
import { movedSince, sweepMovedActors } from "../../src/websockets/owner_sweep.ts";
import { recordingSocket } from "../helpers/recording_socket.ts";

const key = (name: string): ActorKey => ({ tenant: "default", class: "room", name });

function record(node: string, state: "held" | "released", generation = 2n): OwnerRecord {
  return { version: 1, node, process: "p", generation, state, at: 0 };
}

Deno.test("owner sweep: moved means another node's record at a later generation than the sockets' last event here", () => {
  assert.equal(movedSince(record("b", "held", 3n), "a", 2n), true);
  assert.equal(movedSince(record("b", "released", 3n), "a", 2n), true, "taken and released since");
  assert.equal(movedSince(record("b", "held", 2n), "a", 2n), false, "not later: not since");
  assert.equal(movedSince(record("a", "released", 3n), "a", 2n), false, "this node's own");
  assert.equal(movedSince(record("b", "held", 3n), "a", undefined), false, "no event ran here yet");
  assert.equal(movedSince(undefined, "a", 2n), false);
});

Deno.test("owner sweep: the sockets of an actor another node took close with 1012, no close event; the others stay", async () => {
  const events: SocketEvent[] = [];
  const sockets = new ActorSockets({
    dispatch: (_key, _request, socket) => {
      events.push(socket);
      return Promise.resolve({
        kind: "response",
        response: { status: 200, headers: [], body: new Uint8Array() },
      });
    },
    log: createLogger({ level: "error" }),
    clock: systemClock,
  });
  const request = { method: "GET", path: "/", query: "", headers: [], body: new Uint8Array() };
  const made = new Map<string, ReturnType<typeof recordingSocket>[]>();
  for (const name of ["moved", "moved", "movedAndReleased", "released", "here", "unreadable"]) {
    const socket = recordingSocket();
    sockets.accept(key(name), request, socket.socket);
    made.set(name, [...(made.get(name) ?? []), socket]);
  }
  const records: Record<string, OwnerRecord> = {
    moved: record("b", "held"),
    // b took it and hibernated it since: its events ran where these sockets could not see them.
    movedAndReleased: record("b", "released"),
    // Released by this node itself: its sockets wake it here.
    released: record("a", "released"),
    here: record("a", "held"),
  };
  const read: string[] = [];
  const closed = await sweepMovedActors({
    actors: () => sockets.actors(),
    holdsHere: (k) => k.name === "here",
    movedAway: (k) => {
      read.push(k.name);
      if (k.name === "unreadable") return Promise.reject(new Error("the bucket is down"));
      // Each socket's last event ran here at generation 1.
      return Promise.resolve(movedSince(records[k.name], "a", 1n));
    },
    closeMoved: (k) => sockets.closeMoved(k),
    log: createLogger({ level: "error" }),
  });
  assert.equal(closed, 3);
  assert.deepEqual(
    read.sort(),
    ["moved", "movedAndReleased", "released", "unreadable"],
    "held here: no read",
  );
  for (const socket of [...made.get("moved")!, ...made.get("movedAndReleased")!]) {
    assert.deepEqual(socket.closes, [[1012, "the actor moved to another node"]]);
  }
  for (const name of ["released", "here", "unreadable"]) {
    assert.deepEqual(made.get(name)![0].closes, [], name);
  }
  await new Promise((resolve) => setTimeout(resolve, 0));
  assert.equal(events.filter((e) => e.kind === "close").length, 0, "no close event");
  assert.deepEqual(sockets.connections(key("moved")), []);
  assert.equal(sockets.count, 3);
});
