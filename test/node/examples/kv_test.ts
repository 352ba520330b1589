import assert from "node:assert/strict";
import { KV_WASM, withNode } from "../../../src/testing/node_process.ts";

async function text(response: Response): Promise<string> {
  return await response.text();
}

for (const abi of ["auto", "jco"]) {
  Deno.test(`the key-value example stores, lists, counts, batches and deletes (--abi ${abi})`, async () => {
    await withNode(["--actor", `kv=${KV_WASM}`, "--abi", abi], async (node) => {
      const store = `${node.url}/actor/kv/notes`;
      const put = (key: string, body: BodyInit) =>
        fetch(`${store}/${key}`, { method: "PUT", body });

      const created = await put("greeting", "hello");
      assert.equal(created.status, 201);
      await created.body?.cancel();
      const replaced = await put("greeting", "hello again");
      assert.equal(replaced.status, 200);
      await replaced.body?.cancel();
      assert.equal(await text(await fetch(`${store}/greeting`)), "hello again");

      const binary = new Uint8Array(70_000).map((_, i) => i % 251);
      assert.equal((await put("photo", binary)).status, 201);
      const photo = await fetch(`${store}/photo`);
      assert.deepEqual(new Uint8Array(await photo.arrayBuffer()), binary, "a blob survives intact");

      for (const key of ["g1", "g2", "g3", "h1"]) {
        await (await put(key, key.toUpperCase())).body?.cancel();
      }
      assert.equal(
        await text(await fetch(`${store}/?prefix=g&limit=10`)),
        "g1\ng2\ng3\ngreeting\n",
      );
      assert.equal(await text(await fetch(`${store}/?prefix=g&limit=2`)), "g1\ng2\n");
      assert.equal(await text(await fetch(`${store}/?prefix=g&after=g2`)), "g3\ngreeting\n");
      assert.equal((await text(await fetch(`${store}/?count`))).trim(), "6");

      const batch = await fetch(`${store}/_batch`, { method: "POST", body: "b1=one\nb2=two" });
      assert.equal(batch.status, 200);
      await batch.body?.cancel();
      assert.equal(await text(await fetch(`${store}/b2`)), "two");
      const broken = await fetch(`${store}/_batch`, {
        method: "POST",
        body: "b3=three\nnot a pair",
      });
      assert.equal(broken.status, 400);
      await broken.body?.cancel();
      const rolledBack = await fetch(`${store}/b3`);
      assert.equal(rolledBack.status, 404, "a failed batch leaves nothing behind");
      await rolledBack.body?.cancel();

      const removed = await fetch(`${store}/g1`, { method: "DELETE" });
      assert.equal(removed.status, 204);
      await removed.body?.cancel();
      const gone = await fetch(`${store}/g1`);
      assert.equal(gone.status, 404);
      await gone.body?.cancel();
      assert.equal((await text(await fetch(`${store}/?count`))).trim(), "7");

      const other = await fetch(`${node.url}/actor/kv/other/?count`);
      assert.equal((await text(other)).trim(), "0", "each actor has its own database");
    });
  });
}
