/**
 * The socket opener (src/websockets/upgrade.ts) when the actor's route
 * cannot be found: an ownership record the bucket did not give is a 503 to
 * retry, a record that cannot be read a 500, as a request gets them, and
 * the client's place is given back; nothing is switched. (The simulator
 * found upgrades answered 500 while its bucket was out.)
 */

import assert from "node:assert/strict";
import type { ActorKey } from "../../src/actors/key.ts";
import { BucketUnavailable } from "../../src/bucket/errors.ts";
import { MalformedRecord } from "../../src/cluster/ownership.ts";
import { createLogger } from "../../src/log.ts";
import { systemClock } from "../../src/time/clock.ts";
import { ActorSockets } from "../../src/websockets/actor_sockets.ts";
import { socketOpener } from "../../src/websockets/upgrade.ts";

const key: ActorKey = { tenant: "default", class: "room", name: "a" };
const upgrade = { method: "GET", path: "/", query: "", headers: [], body: new Uint8Array() };

for (
  const [error, status, line] of [
    [
      new BucketUnavailable("GET owners/default/room/a: outage", { ambiguous: false }),
      503,
      "the bucket did not answer while looking up the actor; retry",
    ],
    [new MalformedRecord("owners/default/room/a", "not JSON"), 500, /malformed ownership record/],
  ] as const
) {
  Deno.test(`socket opener: a route that fails with ${error.name} is answered ${status}, the place given back`, async () => {
    const sockets = new ActorSockets({
      dispatch: () => Promise.reject(new Error("nothing runs")),
      log: createLogger({ level: "error" }),
      clock: systemClock,
    });
    let switched = 0;
    const open = socketOpener({
      sockets,
      clock: systemClock,
      route: () => Promise.reject(error),
      upgrade: () => {
        switched++;
        throw new Error("not switched");
      },
    });
    let released = 0;
    const answer = await open(
      key,
      new Request("http://node/actor/room/a"),
      upgrade,
      () => released++,
    );
    assert.equal(answer.status, status);
    const text = (await answer.text()).trim();
    if (typeof line === "string") assert.equal(text, line);
    else assert.match(text, line);
    assert.equal(answer.headers.get("retry-after"), "1");
    assert.equal(released, 1);
    assert.equal(switched, 0);
    assert.equal(sockets.count, 0);
  });
}
