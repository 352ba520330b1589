/**
 * The node's open relays (src/cluster/relays.ts), over real TCP on
 * loopback: a revoke cuts the relays to the peers no longer trusted and
 * keeps the others, a stop cuts them all, and one over the bound is
 * refused with both its connections closed.
 */

import assert from "node:assert/strict";
import { Relays } from "../../src/cluster/relays.ts";
import { tcpPair } from "../../src/testing/loopback.ts";

/** A relay between a client and a peer, each an outer end the test holds. */
async function opened(relays: Relays, node: string, fingerprint?: string) {
  const [clientSide, client] = await tcpPair();
  const [peerSide, peer] = await tcpPair();
  const ended = relays.join({ node, fingerprint }, clientSide, peerSide);
  return { client, peer, ended };
}

/** Whether `conn` is still open: a byte written to the other end arrives. */
async function passes(from: Deno.Conn, to: Deno.Conn): Promise<boolean> {
  try {
    await from.write(new Uint8Array([7]));
    const buffer = new Uint8Array(1);
    return (await to.read(buffer)) === 1 && buffer[0] === 7;
  } catch {
    return false;
  }
}

Deno.test("relays: a revoke cuts the relays to the peers no longer trusted, within 500 ms, and keeps the others", async () => {
  const relays = new Relays();
  const toB = await opened(relays, "b", "FP:B");
  const toC = await opened(relays, "c", "FP:C");
  const plain = await opened(relays, "d");
  assert.equal(relays.size, 3);
  assert.ok(await passes(toB.client, toB.peer));

  const started = performance.now();
  const cut = relays.revoke((peer) =>
    peer.fingerprint === undefined || peer.fingerprint === "FP:C"
  );
  assert.equal(cut, 1);
  const end = await toB.ended;
  assert.equal(end?.reason, "cut");
  const buffer = new Uint8Array(4);
  assert.equal(await toB.client.read(buffer).catch(() => null), null, "the client's end closed");
  assert.ok(performance.now() - started < 500);
  assert.equal(relays.size, 2);
  assert.ok(await passes(toC.client, toC.peer), "the trusted peer's relay still carries bytes");
  assert.ok(await passes(plain.peer, plain.client), "and so does the plain one");

  await relays.closeAll();
  assert.equal((await toC.ended)?.reason, "cut");
  assert.equal((await plain.ended)?.reason, "cut");
  assert.equal(relays.size, 0);
  for (const conn of [toB, toC, plain].flatMap((r) => [r.client, r.peer])) conn.close();
});

Deno.test("relays: one over the bound is refused, both its connections closed", async () => {
  const relays = new Relays(1);
  const first = await opened(relays, "b", "FP:B");
  const [clientSide, client] = await tcpPair();
  const [peerSide, peer] = await tcpPair();
  assert.equal(relays.join({ node: "b", fingerprint: "FP:B" }, clientSide, peerSide), undefined);
  const buffer = new Uint8Array(4);
  assert.equal(await client.read(buffer).catch(() => null), null);
  assert.equal(await peer.read(buffer).catch(() => null), null);
  await relays.closeAll();
  await first.ended;
  for (const conn of [client, peer, first.client, first.peer]) conn.close();
});
