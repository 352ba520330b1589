/**
 * `wasmkeep cluster drain | undrain`, `actor move` and the drain states of
 * `cluster status`, run as an operator runs them: the real command line on a
 * file bucket, next to a real node (whose own heartbeats make it live, then
 * released when it stops) and heartbeats written with the real encoder for
 * the states no node of ours reports on demand (draining, stuck).
 */
import assert from "node:assert/strict";
import { FileBucket } from "../../../src/bucket/file.ts";
import { encodeHeartbeat, type Heartbeat } from "../../../src/cluster/heartbeat.ts";
import { decodeMoveRequest } from "../../../src/handover/move_request.ts";
import { COUNTER_WASM, runWasmkeep } from "../../../src/testing/node_process.ts";
import { scratchDir, startClusterNode } from "../../../src/testing/cluster.ts";
import { until } from "../../helpers/until.ts";

/** Heartbeats written every half second, dated now, as live nodes write theirs. */
function beating(bucket: FileBucket, heartbeats: Omit<Heartbeat, "at">[]): () => Promise<void> {
  let on = true;
  const loop = (async () => {
    while (on) {
      for (const h of heartbeats) {
        await bucket.put(`nodes/${h.nodeId}`, encodeHeartbeat({ ...h, at: Date.now() }));
      }
      await new Promise((resolve) => setTimeout(resolve, 500));
    }
  })();
  return async () => {
    on = false;
    await loop;
  };
}

function peer(nodeId: string, fields: Partial<Heartbeat> = {}): Omit<Heartbeat, "at"> {
  return {
    format: 2,
    nodeId,
    process: crypto.randomUUID().slice(0, 16),
    lease: "live",
    address: "http://127.0.0.1:1",
    readsSecrets: false,
    takesMoved: true,
    version: "0.1.0",
    state: "serving",
    ...fields,
  };
}

async function moveTarget(bucket: FileBucket, key: string): Promise<string | undefined> {
  const object = await bucket.get(key);
  return object ? decodeMoveRequest(object.body, key).to : undefined;
}

Deno.test("drain, undrain and actor move on a real node's bucket: live ids taken, mistyped ones refused, --force writes", async (t) => {
  const dir = await scratchDir("wk-drain-cli-");
  const url = `file://${dir}/bucket`;
  const bucket = new FileBucket(`${dir}/bucket`);
  const node = await startClusterNode("b", dir, url, ["--actor", `counter=${COUNTER_WASM}`]);
  // Peers serving --actor classes like b: one ready to take actors, one draining, one stuck.
  const stop = beating(bucket, [
    peer("c"),
    peer("d", { state: "draining" }),
    peer("e", { state: "stuck" }),
  ]);
  try {
    await until(
      "the peers' heartbeats are written",
      async () => (await bucket.head("nodes/e")) !== null,
    );

    await t.step(
      "drain of a mistyped id is refused in one line naming --force; --force writes it",
      async () => {
        const typo = await runWasmkeep(["cluster", "drain", "node-bb", "--bucket", url]);
        assert.equal(typo.code, 1, typo.stderr);
        assert.equal(typo.stdout, "");
        assert.equal(
          typo.stderr,
          "wasmkeep: cluster drain node-bb: no live node has the id node-bb (no heartbeat nodes/node-bb); " +
            "check the id with wasmkeep cluster status, or give --force to write the request anyway " +
            "(for a node about to start)\n",
        );
        assert.equal(await bucket.head("drains/node-bb"), null);

        const forced = await runWasmkeep([
          "cluster",
          "drain",
          "node-bb",
          "--bucket",
          url,
          "--force",
        ]);
        assert.equal(forced.code, 0, forced.stderr);
        assert.equal(
          forced.stdout,
          "drain requested for node-bb, which is not live (no heartbeat nodes/node-bb): " +
            "a process started with that id drains from its start\n",
        );
        assert.ok(await bucket.head("drains/node-bb"), "drains/node-bb written");

        // cluster status lists it and warns: it applies when that node starts.
        const status = await runWasmkeep(["cluster", "status", "--bucket", url]);
        assert.equal(status.code, 0, status.stderr);
        assert.match(status.stdout, /^drain requested: node-bb$/m);
        assert.match(
          status.stdout,
          /^warning: a drain request is waiting for node node-bb, which is not live: .*wasmkeep cluster undrain node-bb withdraws it$/m,
        );

        // undrain withdraws a request no node answers to, without --force.
        const undrain = await runWasmkeep(["cluster", "undrain", "node-bb", "--bucket", url]);
        assert.equal(undrain.code, 0, undrain.stderr);
        assert.equal(
          undrain.stdout,
          "drain request withdrawn for node-bb, which is not live (no heartbeat nodes/node-bb)\n",
        );
        assert.equal(await bucket.head("drains/node-bb"), null);
        // Once withdrawn, the same typo is refused again.
        const again = await runWasmkeep(["cluster", "undrain", "node-bb", "--bucket", url]);
        assert.equal(again.code, 1);
        assert.match(
          again.stderr,
          /^wasmkeep: cluster undrain node-bb: no live node has the id node-bb .*--force/,
        );
        assert.equal(again.stderr.trim().split("\n").length, 1);
      },
    );

    await t.step("drain of the live node writes drains/b; undrain deletes it", async () => {
      const drain = await runWasmkeep(["cluster", "drain", "b", "--bucket", url]);
      assert.equal(drain.code, 0, drain.stderr);
      assert.match(drain.stdout, /^drain requested for b\b/);
      assert.ok(await bucket.head("drains/b"), "drains/b written");
      const status = await runWasmkeep(["cluster", "status", "--bucket", url, "--json"]);
      assert.deepEqual(JSON.parse(status.stdout).drains, ["b"]);

      const undrain = await runWasmkeep(["cluster", "undrain", "b", "--bucket", url]);
      assert.equal(undrain.code, 0, undrain.stderr);
      assert.equal(
        undrain.stdout,
        `drain request withdrawn for b; it takes actors again (STATE serving in wasmkeep cluster status --bucket ${url})\n`,
      );
      assert.equal(await bucket.head("drains/b"), null);
      const none = await runWasmkeep(["cluster", "undrain", "b", "--bucket", url]);
      assert.equal(none.code, 0, none.stderr);
      assert.equal(none.stdout, "no drain request for b: nothing withdrawn\n");
    });

    await t.step(
      "actor move: written for a live target, refused for an unknown one unless forced, warned for a draining one",
      async () => {
        const key = "moves/default/counter/alice";
        const dead = await runWasmkeep([
          "actor",
          "move",
          "default/counter/alice",
          "--to",
          "nobody",
          "--bucket",
          url,
        ]);
        assert.equal(dead.code, 1, dead.stderr);
        assert.match(
          dead.stderr,
          /^wasmkeep: actor move default\/counter\/alice: no live node has the id nobody \(no heartbeat nodes\/nobody\); .*--force/,
        );
        assert.equal(await bucket.head(key), null);

        const forced = await runWasmkeep([
          "actor",
          "move",
          "default/counter/alice",
          "--to",
          "nobody",
          "--bucket",
          url,
          "--force",
        ]);
        assert.equal(forced.code, 0, forced.stderr);
        assert.match(
          forced.stderr,
          /^wasmkeep: warning: node nobody is not live \(no heartbeat nodes\/nobody\)/,
        );
        assert.equal(await moveTarget(bucket, key), "nobody");

        const before = Date.now();
        const moved = await runWasmkeep([
          "actor",
          "move",
          "default/counter/alice",
          "--to",
          "c",
          "--bucket",
          url,
        ]);
        assert.equal(moved.code, 0, moved.stderr);
        assert.equal(moved.stderr, "");
        const line = moved.stdout.match(
          /^move requested: default\/counter\/alice to c \(moves\/default\/counter\/alice\); the request expires at (\S+) \(in 5m\) if the actor has not moved by then\n$/,
        );
        assert.ok(line, moved.stdout);
        const expires = Date.parse(line[1]);
        assert.ok(expires >= before + 5 * 60_000 && expires <= Date.now() + 5 * 60_000, line[1]);
        assert.equal(await moveTarget(bucket, key), "c");

        const draining = await runWasmkeep([
          "actor",
          "move",
          "default/counter/alice",
          "--to",
          "d",
          "--bucket",
          url,
        ]);
        assert.equal(draining.code, 0, draining.stderr);
        assert.equal(
          draining.stderr,
          "wasmkeep: warning: node d may not take default/counter/alice now: it is draining; the request " +
            "is written, and the owner keeps default/counter/alice until node d may take it or the " +
            "request expires\n",
        );
        assert.match(draining.stdout, /^move requested: default\/counter\/alice to d /);
        assert.equal(await moveTarget(bucket, key), "d");

        // The real node is live: its id is taken (what else it says depends on its version).
        const toB = await runWasmkeep([
          "actor",
          "move",
          "default/counter/alice",
          "--to",
          "b",
          "--bucket",
          url,
        ]);
        assert.equal(toB.code, 0, toB.stderr);
        assert.equal(await moveTarget(bucket, key), "b");
      },
    );

    await t.step(
      "status: the STATE of each node and the stuck warning, in text and --json",
      async () => {
        const status = await runWasmkeep(["cluster", "status", "--bucket", url]);
        assert.equal(status.code, 0, status.stderr);
        assert.match(status.stdout, /^c +yes +\S+ +serving +0\.1\.0 /m);
        assert.match(status.stdout, /^d +yes +\S+ +draining +0\.1\.0 /m);
        assert.match(status.stdout, /^e +yes +\S+ +stuck +0\.1\.0 /m);
        assert.match(
          status.stdout,
          /^warning: node e is draining but stuck: it still holds actors or WebSockets and no other live node of its app takes them; start another node, or undrain one$/m,
        );
        const json = JSON.parse(
          (await runWasmkeep(["cluster", "status", "--bucket", url, "--json"])).stdout,
        );
        const states = Object.fromEntries(
          json.nodes.map((n: { id: string; state: string | null }) => [n.id, n.state]),
        );
        assert.deepEqual({ c: states.c, d: states.d, e: states.e }, {
          c: "serving",
          d: "draining",
          e: "stuck",
        });
        assert.ok(json.warnings.some((w: string) => w.startsWith("node e is draining but stuck")));
      },
    );

    await t.step(
      "a node that stopped is no longer live: drain refused, naming its released heartbeat",
      async () => {
        await node.stop();
        const drain = await runWasmkeep(["cluster", "drain", "b", "--bucket", url]);
        assert.equal(drain.code, 1, drain.stderr);
        assert.match(
          drain.stderr,
          /^wasmkeep: cluster drain b: no live node has the id b \(it stopped \(its heartbeat is released\)\); .*--force/,
        );
        const move = await runWasmkeep([
          "actor",
          "move",
          "default/counter/alice",
          "--to",
          "b",
          "--bucket",
          url,
        ]);
        assert.equal(move.code, 1, move.stderr);
      },
    );
  } finally {
    await stop();
    await node.stop();
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("drain, undrain and actor move: bad usage exits 2 naming the problem; --help exits 0", async () => {
  const url = "file:///nonexistent-wasmkeep-bucket";
  for (
    const [args, message] of [
      [["cluster", "drain", "--bucket", url], /cluster drain needs a node id/],
      [["cluster", "undrain", "Bad_Id", "--bucket", url], /'Bad_Id' is not a node id/],
      [["cluster", "drain", "b"], /cluster drain needs --bucket URL/],
      [["cluster", "drain", "b", "--bucket", url, "--force=yes"], /--force takes no value/],
      [["actor"], /actor needs a command: move/],
      [["actor", "pin"], /unknown command 'actor pin'/],
      [["actor", "move", "acme/room/lobby", "--bucket", url], /actor move needs --to NODE/],
      [["actor", "move", "--to", "c", "--bucket", url], /actor move needs an actor/],
      [["actor", "move", "acme/lobby", "--to", "c", "--bucket", url], /is not TENANT\/CLASS\/NAME/],
      [["actor", "move", "acme/room/lobby", "--to", "C", "--bucket", url], /'C' is not a node id/],
      [["actor", "move", "acme/room/lobby", "--to", "c"], /actor move needs --bucket URL/],
    ] as const
  ) {
    const { code, stderr } = await runWasmkeep([...args]);
    assert.equal(code, 2, `${args.join(" ")}: ${stderr}`);
    assert.match(stderr, message);
  }
  for (
    const [args, usage] of [
      [
        ["cluster", "drain", "--help"],
        /^Usage: wasmkeep cluster drain <node> --bucket URL \[--force\]$/m,
      ],
      [
        ["cluster", "undrain", "-h"],
        /^Usage: wasmkeep cluster undrain <node> --bucket URL \[--force\]$/m,
      ],
      [["actor", "--help"], /^Usage: wasmkeep actor <command>/],
      [["help", "actor"], /^Usage: wasmkeep actor <command>/],
      [
        ["actor", "move", "-h"],
        /^Usage: wasmkeep actor move TENANT\/CLASS\/NAME --to NODE --bucket URL \[--force\]$/m,
      ],
    ] as const
  ) {
    const { code, stdout } = await runWasmkeep([...args]);
    assert.equal(code, 0, args.join(" "));
    assert.match(stdout, usage);
  }
  const main = await runWasmkeep(["--help"]);
  assert.match(main.stdout, /^ {2}actor +move one actor to another node/m);
  assert.match(
    main.stdout,
    /^ {2}cluster +check a cluster; fence, forget, drain or undrain a node/m,
  );
});
