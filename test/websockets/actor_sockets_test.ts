/**
 * ActorSockets told of this node's takes (src/websockets/actor_sockets.ts,
 * `took`), with recording sockets: a take that replaced another process's
 * record closes the sockets that had an event here with 1012, with no
 * close event, and calls off their events not sent yet; sockets whose open
 * waits for that take stay; a take of this process's own record closes
 * nothing. (The simulator found a room that went to another node and came
 * back by a request serving its old sockets on.)
 */

import assert from "node:assert/strict";
import type { ActorKey } from "../../src/actors/key.ts";
import type { SocketEvent } from "../../src/actors/protocol.ts";
import { createLogger } from "../../src/log.ts";
import { systemClock } from "../../src/time/clock.ts";
import { ActorSockets } from "../../src/websockets/actor_sockets.ts";
import { recordingSocket } from "../helpers/recording_socket.ts";

const key: ActorKey = { tenant: "default", class: "room", name: "a" };
const upgrade = { method: "GET", path: "/", query: "", headers: [], body: new Uint8Array() };

/** ActorSockets whose dispatches wait until the test sends them (`stillWanted` asked then). */
function socketsOfProcess(token: string) {
  const dispatched: { event: SocketEvent; send: () => boolean }[] = [];
  const sockets = new ActorSockets({
    dispatch: (_key, _request, event, stillWanted) => {
      const { promise, resolve } = Promise.withResolvers<boolean>();
      dispatched.push({
        event,
        send: () => {
          const wanted = stillWanted?.() ?? true;
          resolve(wanted);
          return wanted;
        },
      });
      return promise.then((wanted) =>
        wanted
          ? { kind: "response", response: { status: 200, headers: [], body: new Uint8Array() } }
          : { kind: "failed", status: 409, message: "called off unsent" }
      );
    },
    processToken: token,
    log: createLogger({ level: "error" }),
    clock: systemClock,
  });
  return { sockets, dispatched };
}

const tick = () => new Promise((resolve) => setTimeout(resolve, 0));

Deno.test("sockets told of a take from another process: the served ones close with 1012 and their unsent events are called off; one waiting for its open stays", async () => {
  const { sockets, dispatched } = socketsOfProcess("p1");
  const served = recordingSocket();
  const idServed = sockets.accept(key, upgrade, served.socket);
  served.client.open();
  assert.equal(dispatched.at(-1)!.event.kind, "open");
  assert.equal(dispatched.at(-1)!.send(), true, "sent: the socket is served here");
  await tick();
  // A message whose event waits for the take the next test step makes.
  served.client.message({ text: "hello" });
  const message = dispatched.at(-1)!;
  assert.deepEqual(message.event, {
    kind: "message",
    connection: idServed,
    message: { text: "hello" },
  });
  const waiting = recordingSocket();
  sockets.accept(key, upgrade, waiting.socket);
  waiting.client.open();
  const opening = dispatched.at(-1)!;

  // This node takes the actor again, from a record of another process.
  sockets.took(key, { generation: 7n, previous: { process: "p2" } });
  assert.deepEqual(served.closes, [[1012, "the actor moved to another node"]]);
  assert.deepEqual(waiting.closes, [], "its open waits for this very take");
  assert.equal(message.send(), false, "the served socket's message is not sent");
  assert.equal(opening.send(), true);
  await tick();
  const closeEvents = dispatched.filter((d) => d.event.kind === "close");
  assert.deepEqual(closeEvents, [], "no close event for a socket closed by the move");
  assert.deepEqual(sockets.connections(key).length, 1);
  assert.equal(sockets.lastHeld(key), 7n);
});

Deno.test("sockets told of a take of this process's own record close nothing", async () => {
  const { sockets, dispatched } = socketsOfProcess("p1");
  const served = recordingSocket();
  sockets.accept(key, upgrade, served.socket);
  served.client.open();
  dispatched.at(-1)!.send();
  await tick();
  sockets.took(key, { generation: 3n, previous: { process: "p1" } });
  sockets.took(key, { generation: 4n });
  assert.deepEqual(served.closes, []);
  served.client.message({ text: "still here" });
  assert.equal(dispatched.at(-1)!.send(), true);
  assert.equal(sockets.lastHeld(key), 4n);
});
