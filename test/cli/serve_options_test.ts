import assert from "node:assert/strict";
import { serveOptions } from "../../cli/serve.ts";
import type { NodeOptions } from "../../src/node/mod.ts";

function cluster(...flags: string[]): NonNullable<NodeOptions["cluster"]> {
  const options = serveOptions([
    "--actor",
    "counter=examples/counter/counter.wasm",
    "--node-id",
    "a",
    "--bucket",
    "s3://b",
    "--cluster-plaintext",
    "accept",
    ...flags,
  ]);
  assert.ok(options !== "help" && options.cluster);
  return options.cluster;
}

Deno.test("the failover wait defaults to the lease timing's", () => {
  // The spec's 25 s: ttl + grace 15, watch 6, a period 3, a second 1.
  assert.equal(cluster().failoverWaitMs, 25_000);
  // With a 3 s ttl: 4.5 + 1.81 + 0.9 + 1, in whole seconds.
  assert.equal(cluster("--lease-ttl-secs", "3").failoverWaitMs, 8_000);
  assert.equal(
    cluster("--lease-ttl-secs", "3", "--failover-wait-secs", "40").failoverWaitMs,
    40_000,
  );
  assert.equal(cluster("--failover-wait-secs", "0").failoverWaitMs, 0);
});

Deno.test("a --config file is read to its bound, not to its size: a device or a pipe that never ends is refused", () => {
  assert.throws(
    () =>
      serveOptions([
        "--actor",
        "counter=examples/counter/counter.wasm",
        "--config",
        "counter=/dev/zero",
      ]),
    /--config counter=\/dev\/zero: the file is larger than 1048576 bytes/,
  );
});
