/**
 * The example reminder (examples/reminder, issue 19 item 6) through two
 * real node processes on moto: its alarm set through one node fires on its
 * owner and is counted; set again through the other node (forwarded), it
 * fires again; bad input is refused with a clear message.
 */

import assert from "node:assert/strict";
import { request, scratchDir, startClusterNode } from "../../../src/testing/cluster.ts";
import { startMoto } from "../../../src/testing/moto.ts";
import { REMINDER_WASM } from "../../../src/testing/node_process.ts";
import { until } from "../../helpers/until.ts";

const REMINDER = ["--actor", `reminder=${REMINDER_WASM}`];

Deno.test("examples/reminder: POST ?in= sets its alarm that many seconds ahead and answers the due time; GET counts the firings, through either node (moto)", async () => {
  const dir = await scratchDir("wk-reminder-");
  const moto = await startMoto();
  const bucketUrl = `s3://${moto.bucket}/reminder`;
  try {
    const [a, b] = await Promise.all([
      startClusterNode("a", dir, bucketUrl, REMINDER, { env: moto.env }),
      startClusterNode("b", dir, bucketUrl, REMINDER, { env: moto.env }),
    ]);
    try {
      const tea = `${a.url}/actor/reminder/tea`;
      assert.deepEqual(
        [(await request(tea)).body, (await request(tea)).node],
        ["0", "a"],
      );
      const before = Date.now();
      const set = await request(`${tea}?in=1`, { method: "POST" });
      assert.equal(set.status, 200, set.body);
      const due = Number(set.body);
      assert.ok(due >= before + 1_000 && due <= Date.now() + 1_000, `due ${due - before} ms on`);
      assert.equal((await request(tea)).body, "0");
      await until("it fired", async () => (await request(tea)).body === "1", 10_000);
      assert.ok(Date.now() >= due);

      // Through b, which forwards to a: set again, fired again, counted on.
      const viaB = `${b.url}/actor/reminder/tea`;
      const again = await request(`${viaB}?in=1`, { method: "POST" });
      assert.deepEqual([again.status, again.node], [200, "a"]);
      await until("it fired again", async () => (await request(viaB)).body === "2", 10_000);

      for (const query of ["", "?in=", "?in=soon", "?in=-1", "?in=1.5", "?in=315360001"]) {
        const refused = await request(`${tea}${query}`, { method: "POST" });
        assert.equal(refused.status, 400, query);
        assert.match(refused.body, /give \?in=<seconds>/);
      }
      const put = await request(tea, { method: "PUT" });
      assert.equal(put.status, 405);
      assert.equal((await request(tea)).body, "2");
    } finally {
      await Promise.all([a.stop(), b.stop()]);
    }
  } finally {
    await moto.stop();
    await Deno.remove(dir, { recursive: true });
  }
});
