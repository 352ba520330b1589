import assert from "node:assert/strict";
import {
  type FrameBatching,
  FrameSender,
  MAX_FRAME_BYTES,
  readFrames,
} from "../../src/actors/frames.ts";
import { MessageTooLarge } from "../../src/actors/codec.ts";

for (const batching of ["microtask", "turn"] as const) {
  Deno.test(`frames cross a socket in order, small and large, batched by ${batching}`, () =>
    framesCross(batching));
}

async function framesCross(batching: FrameBatching) {
  const dir = await Deno.makeTempDir();
  const listener = Deno.listen({ transport: "unix", path: `${dir}/s.sock` });
  const client = await Deno.connect({ transport: "unix", path: `${dir}/s.sock` });
  const server = await listener.accept();
  try {
    const big = new Uint8Array(3 * 1024 * 1024).map((_, i) => i % 253);
    const sender = new FrameSender(client, batching);
    // Read while writing: a socket holds far less than the large frame.
    const reading = (async () => {
      const seen: number[] = [];
      for await (const frame of readFrames(server)) {
        const message = frame as { seq: number; body?: Uint8Array; text?: string; n?: bigint };
        seen.push(message.seq);
        if (message.seq === 2) assert.deepEqual(message.body, big);
        if (message.seq === 3) assert.equal(message.text, "é✓");
        if (message.seq >= 4) assert.equal(message.n, BigInt(message.seq));
        if (message.seq === 1003) break;
      }
      return seen;
    })();
    sender.send({ seq: 1, body: new Uint8Array([1, 2, 3]) });
    sender.send({ seq: 2, body: big });
    sender.send({ seq: 3, text: "é✓" });
    await sender.drain();
    for (let seq = 4; seq < 1004; seq++) sender.send({ seq, n: BigInt(seq) });
    await sender.drain();
    assert.deepEqual(await reading, Array.from({ length: 1003 }, (_, i) => i + 1));
    assert.throws(
      () => sender.send({ body: new Uint8Array(MAX_FRAME_BYTES + 1) }),
      MessageTooLarge,
    );
  } finally {
    client.close();
    server.close();
    listener.close();
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("a frame over the limit, or a connection closed mid-frame, ends the reading", async () => {
  const dir = await Deno.makeTempDir();
  const listener = Deno.listen({ transport: "unix", path: `${dir}/s.sock` });
  try {
    for (
      const [bytes, outcome] of [[[0xff, 0xff, 0xff, 0xff], "throws"], [
        [9, 0, 0, 0, 1],
        "ends",
      ]] as const
    ) {
      const client = await Deno.connect({ transport: "unix", path: `${dir}/s.sock` });
      const server = await listener.accept();
      const sender = new FrameSender(client);
      sender.send({ seq: 1 });
      await sender.drain();
      await client.write(new Uint8Array(bytes));
      client.close();
      const seen: unknown[] = [];
      const reading = (async () => {
        for await (const frame of readFrames(server)) seen.push(frame);
      })();
      if (outcome === "throws") await assert.rejects(reading, /over the limit/);
      else await reading;
      assert.deepEqual(seen, [{ seq: 1 }]);
      server.close();
    }
  } finally {
    listener.close();
    await Deno.remove(dir, { recursive: true });
  }
});
