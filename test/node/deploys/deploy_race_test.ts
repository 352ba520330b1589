/**
 * Two items of issue 20 through real `wasmkeep deploy` processes, on the
 * file bucket and on moto:
 *
 * - two deploys at once: both processes are started before either is
 *   awaited, each changing something different (a configuration value of
 *   its own, and in the last race its component), and both are held at the
 *   read of their `--config` FIFO until both got there, so that they almost
 *   always overlap. Whether they do or not, at least one wins, a loser exits
 *   1 naming the winner's version, and `current` names the version the last
 *   winner printed, its seq one above the seq before per successful deploy,
 *   with every winner's version in its line of previous links. A loser
 *   leaves only its own version, which nothing links to.
 * - retention with `--version-retention-secs 0`: after eight deploys exactly
 *   the current version and the five before it remain, each removal printed;
 *   a rollback keeps the version it stepped back from (and the one whose
 *   content it restored) for good, and five rollbacks in a row can be made
 *   where a sixth finds its version collected.
 *
 * @module
 */

import assert from "node:assert/strict";
import { type Bucket, listAll } from "../../../src/bucket/bucket.ts";
import { appPrefix } from "../../../src/bucket/keys.ts";
import { openBucket } from "../../../src/bucket/open.ts";
import { readCurrent, readVersion } from "../../../src/deploy/app_objects.ts";
import { type AppVersion, componentHash } from "../../../src/deploy/manifest.ts";
import { runWasmkeep, TESTBED_V2_WASM, TESTBED_WASM } from "../../../src/testing/node_process.ts";
import { type BucketTarget, onBucket } from "../../helpers/bucket_target.ts";

const SHOP = { tenant: "acme", app: "shop" };
const VERSIONS = `${appPrefix("acme", "shop")}versions/`;

type Run = (...args: string[]) => Promise<{ code: number; stdout: string; stderr: string }>;

function runner(target: BucketTarget): Run {
  return (...args) => runWasmkeep(["deploy", ...args], target.env);
}

/** The version a successful deploy printed as current, with the one it printed as before. */
function reported(stdout: string): { id: string; seq: number; was: string | null } {
  const match = stdout.match(
    /^acme\/shop: version ([0-9a-f]{16}) \(seq (\d+)\) is current (?:\(was ([0-9a-f]{16}) \(seq \d+\)\)|\(its first version\))$/m,
  );
  assert.ok(match, `no "is current" line in:\n${stdout}`);
  return { id: match[1], seq: Number(match[2]), was: match[3] ?? null };
}

/** The `removed N old versions: ...` lines a deploy printed. */
function removals(stdout: string): string[] {
  return stdout.split("\n").filter((line) => line.startsWith("removed "));
}

/** The ids under `apps/acme/shop/versions/`, sorted. */
async function versionIds(bucket: Bucket): Promise<string[]> {
  const ids: string[] = [];
  for await (const object of listAll(bucket, VERSIONS)) ids.push(object.key.slice(VERSIONS.length));
  return ids.sort();
}

/** The line of previous links from `current`, current first, up to the first version not in the bucket. */
async function line(bucket: Bucket): Promise<{ id: string; version: AppVersion }[]> {
  const read = await readCurrent(bucket, SHOP);
  assert.ok(read, "the app has no current");
  const present = new Set(await versionIds(bucket));
  const entries: { id: string; version: AppVersion }[] = [];
  for (let id: string | null = read.current.version; id !== null && present.has(id);) {
    const version = await readVersion(bucket, SHOP, id);
    entries.push({ id, version });
    id = version.previous;
  }
  assert.ok(
    entries.length > 0,
    `current names ${read.current.version}, which is not in the bucket`,
  );
  assert.equal(entries[0].version.seq, read.current.seq, "current's seq is its version's");
  return entries;
}

/** What one contender of a race deploys: its own configuration value, and maybe a component. */
interface Contender {
  tag: string;
  wasm?: string;
}

/**
 * The races, each two deploys of a different change: configuration values
 * (which the two read at the same moment, so they almost always overlap),
 * then components as well (whose checks take long enough that they often
 * do not).
 */
const RACES: Contender[][] = [
  ...[1, 2, 3, 4].map((n) => [{ tag: `a-${n}` }, { tag: `b-${n}` }]),
  [{ tag: "a-5", wasm: TESTBED_V2_WASM }, { tag: "b-5", wasm: TESTBED_WASM }],
];

/** Whether a child process of this one holds `path` open. */
function heldByChild(path: string): boolean {
  for (const entry of Deno.readDirSync("/proc")) {
    if (!/^\d+$/.test(entry.name)) continue;
    try {
      const stat = Deno.readTextFileSync(`/proc/${entry.name}/stat`);
      if (Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) !== Deno.pid) continue;
      for (const fd of Deno.readDirSync(`/proc/${entry.name}/fd`)) {
        if (Deno.readLinkSync(`/proc/${entry.name}/fd/${fd.name}`) === path) return true;
      }
    } catch {
      // Gone meanwhile.
    }
  }
  return false;
}

/**
 * Runs one deploy per contender, all started before any is awaited, each
 * reading its `--config` from a FIFO. The FIFOs are held open here, so a
 * deploy's open returns at once and its read waits; once every deploy holds
 * its FIFO (or exited), each gets its value and, at the same moment, the end
 * of its file: the deploys go on from there together, past the start-up of
 * their processes, which would otherwise set them apart.
 */
async function deployTogether(
  run: Run,
  base: string[],
  dir: string,
  contenders: Contender[],
): Promise<{ code: number; stdout: string; stderr: string }[]> {
  const gates: { path: string; file: Deno.FsFile }[] = [];
  try {
    for (const { tag } of contenders) {
      const path = `${dir}/${tag}.fifo`;
      const made = await new Deno.Command("mkfifo", { args: [path], stderr: "piped" }).output();
      assert.ok(made.success, new TextDecoder().decode(made.stderr));
      // Read and write: opening a FIFO so does not wait for the other end.
      gates.push({
        path: Deno.realPathSync(path),
        file: await Deno.open(path, { read: true, write: true }),
      });
    }
    const exited = contenders.map(() => false);
    const running = contenders.map((c, i) =>
      run(
        ...base,
        ...(c.wasm ? ["--actor", `testbed=${c.wasm}`] : []),
        "--config",
        `testbed=${gates[i].path}`,
      ).finally(() => exited[i] = true)
    );
    while (!gates.every((gate, i) => exited[i] || heldByChild(gate.path))) {
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    for (const [i, gate] of gates.entries()) {
      await gate.file.write(new TextEncoder().encode(`DEPLOY=${contenders[i].tag}\n`));
    }
    for (const gate of gates.splice(0)) gate.file.close();
    return await Promise.all(running);
  } finally {
    for (const gate of gates) gate.file.close();
  }
}

/**
 * Deploys the app once, then runs the {@linkcode RACES}, checking after
 * each what issue 20 asks of two deploys at once.
 */
async function races(target: BucketTarget, dir: string): Promise<void> {
  const run = runner(target);
  const base = ["--app", "acme/shop", "--bucket", target.url];
  await Deno.writeTextFile(`${dir}/initial.env`, "DEPLOY=initial\n");
  const first = await run(
    ...base,
    "--actor",
    `testbed=${TESTBED_WASM}`,
    "--config",
    `testbed=${dir}/initial.env`,
  );
  assert.equal(first.code, 0, first.stderr);
  assert.equal(reported(first.stdout).seq, 1);

  const bucket = openBucket(target.url, { env: target.env });
  try {
    for (const [race, contenders] of RACES.entries()) {
      const before = (await readCurrent(bucket, SHOP))!.current;
      const versionsBefore = new Set(await versionIds(bucket));
      const results = await deployTogether(run, base, dir, contenders);
      const outputs = results.map((r, i) =>
        `${contenders[i].tag}: exit ${r.code}\n${r.stdout}${r.stderr}`
      );
      const context = `race ${race + 1}:\n${outputs.join("\n")}`;

      const won = results.flatMap((r, i) =>
        r.code === 0 ? [{ contender: contenders[i], ...reported(r.stdout) }] : []
      );
      const lost = results.flatMap((r, i) => r.code === 0 ? [] : [{ contender: contenders[i], r }]);
      assert.ok(won.length >= 1, `no deploy won\n${context}`);
      won.sort((x, y) => x.seq - y.seq);
      const winner = won[won.length - 1];
      for (const { r } of lost) {
        assert.equal(r.code, 1, context);
        assert.equal(r.stdout, "", context);
        assert.equal(
          r.stderr.trim(),
          `wasmkeep: deploy acme/shop: another deploy made version ${winner.id} (seq ${winner.seq}) ` +
            "current while this one was written; run deploy again",
          context,
        );
      }
      // Winners in turn: each built on the one before it, the first on the current before the race.
      won.forEach((w, i) => {
        assert.equal(w.seq, before.seq + 1 + i, context);
        assert.equal(w.was, i === 0 ? before.version : won[i - 1].id, context);
      });

      // current names the last winner's version, its seq counting every successful deploy.
      const read = await readCurrent(bucket, SHOP);
      assert.deepEqual(
        read?.current,
        { version: winner.id, seq: before.seq + won.length },
        context,
      );
      const entries = await line(bucket);
      assert.deepEqual(
        entries.slice(0, won.length + 1).map((e) => e.id),
        [...won.map((w) => w.id).reverse(), before.version],
        `every winner's version is in current's line\n${context}`,
      );
      // Each winner's version is what that process asked for on what it was built on.
      for (const w of won) {
        const version = entries.find((e) => e.id === w.id)!.version;
        const builtOn = entries.find((e) => e.id === w.was)!.version;
        assert.equal(version.seq, w.seq, context);
        assert.deepEqual(Object.keys(version.classes), ["testbed"], context);
        assert.deepEqual(version.classes.testbed.config, { DEPLOY: w.contender.tag }, context);
        assert.equal(
          version.classes.testbed.component,
          w.contender.wasm
            ? await componentHash(await Deno.readFile(w.contender.wasm))
            : builtOn.classes.testbed.component,
          context,
        );
      }

      // Each process wrote one version; a loser's is its own, off the line, and not current.
      const added = (await versionIds(bucket)).filter((id) => !versionsBefore.has(id));
      assert.equal(added.length, 2, `${added.join(", ")}\n${context}`);
      const offLine = added.filter((id) => !won.some((w) => w.id === id));
      assert.equal(offLine.length, lost.length, context);
      for (const id of offLine) {
        const left = await readVersion(bucket, SHOP, id);
        assert.equal(left.seq, before.seq + 1, context);
        assert.equal(left.previous, before.version, context);
        assert.deepEqual(left.classes.testbed.config, { DEPLOY: lost[0].contender.tag }, context);
      }
    }
  } finally {
    await bucket.close();
  }
}

Deno.test("two deploy processes at once on a file bucket: a loser fails naming the winner, and current is the version the last winner printed", () =>
  onBucket("file", "prod", races));

Deno.test("two deploy processes at once on moto: a loser fails naming the winner, and current is the version the last winner printed", () =>
  onBucket("moto", "prod", races));

/**
 * Deploys once per number `n` (its seq; each deploy a new configuration
 * value `n`, the first also giving the component); returns the ids, and
 * checks that each printed the removal of what `removed(n, earlier)` says
 * (`earlier`: the ids of this call's deploys before it), and nothing else.
 */
async function deployNumbered(
  run: Run,
  base: string[],
  dir: string,
  numbers: number[],
  removed: (n: number, earlier: string[]) => string[],
): Promise<string[]> {
  const ids: string[] = [];
  for (const n of numbers) {
    const file = `${dir}/deploy-${n}.env`;
    await Deno.writeTextFile(file, `DEPLOY=${n}\n`);
    const actor = n === 1 ? ["--actor", `testbed=${TESTBED_WASM}`] : [];
    const result = await run(...base, ...actor, "--config", `testbed=${file}`);
    assert.equal(result.code, 0, result.stderr);
    assert.equal(result.stderr, "");
    const mine = reported(result.stdout);
    assert.equal(mine.seq, n);
    const gone = removed(n, ids);
    ids.push(mine.id);
    assert.deepEqual(
      removals(result.stdout),
      gone.length === 0
        ? []
        : [`removed ${gone.length} old version${gone.length === 1 ? "" : "s"}: ${gone.join(", ")}`],
      `deploy ${n}:\n${result.stdout}`,
    );
  }
  return ids;
}

async function retentionCycle(target: BucketTarget, dir: string): Promise<void> {
  const run = runner(target);
  const base = ["--app", "acme/shop", "--bucket", target.url, "--version-retention-secs", "0"];
  const bucket = openBucket(target.url, { env: target.env });
  try {
    // v[1]..v[8] (v[0] unused): the seventh deploy removes v[1], the eighth v[2].
    const v = [
      "",
      ...await deployNumbered(
        run,
        base,
        dir,
        [1, 2, 3, 4, 5, 6, 7, 8],
        (n, earlier) => n >= 7 ? [earlier[n - 7]] : [],
      ),
    ];
    assert.deepEqual(await versionIds(bucket), v.slice(3).sort());
    assert.deepEqual((await line(bucket)).map((e) => e.id), v.slice(3).reverse());

    // A rollback from v8 to v7's content: a new version r9 whose previous is v6. Its line
    // (r9, v6 .. v3) is shorter than six, so nothing goes; v8 (stepped back from) and v7 stay.
    const back = await run(...base, "--rollback");
    assert.equal(back.code, 0, back.stderr);
    assert.match(
      back.stdout,
      new RegExp(
        `^rolled back acme/shop to the content of version ${v[7]} \\(seq 7\\), from ${
          v[8]
        } \\(seq 8\\)$`,
        "m",
      ),
    );
    const r9 = reported(back.stdout);
    assert.equal(r9.seq, 9);
    assert.deepEqual(removals(back.stdout), []);
    const r9Version = await readVersion(bucket, SHOP, r9.id);
    assert.equal(r9Version.rolledBackFrom, v[8]);
    assert.equal(r9Version.previous, v[6]);
    assert.deepEqual(r9Version.classes.testbed.config, { DEPLOY: "7" });
    assert.deepEqual(await versionIds(bucket), [...v.slice(3), r9.id].sort());

    // Three deploys on top: d11 removes v3, d12 v4; v7 and v8 are off the line and stay.
    const [d10, d11, d12] = await deployNumbered(
      run,
      base,
      dir,
      [10, 11, 12],
      (n) => n === 11 ? [v[3]] : n === 12 ? [v[4]] : [],
    );
    assert.deepEqual(
      await versionIds(bucket),
      [v[5], v[6], v[7], v[8], r9.id, d10, d11, d12].sort(),
    );
    assert.deepEqual(
      (await line(bucket)).map((e) => e.id),
      [d12, d11, d10, r9.id, v[6], v[5]],
    );

    // The current version and the five before it: five rollbacks in a row, none removing
    // anything; the sixth would step back to v4, collected.
    const restoredSeq = [
      [d11, 11],
      [d10, 10],
      [r9.id, 9],
      [v[6], 6],
      [v[5], 5],
    ] as const;
    let from = { id: d12, seq: 12 };
    const rolledBack: string[] = [];
    for (const [restored, seq] of restoredSeq) {
      const result = await run(...base, "--rollback");
      assert.equal(result.code, 0, result.stderr);
      assert.ok(
        result.stdout.includes(
          `rolled back acme/shop to the content of version ${restored} (seq ${seq}), ` +
            `from ${from.id} (seq ${from.seq})\n`,
        ),
        result.stdout,
      );
      assert.deepEqual(removals(result.stdout), []);
      const now = reported(result.stdout);
      assert.equal(now.seq, from.seq + 1);
      rolledBack.push(now.id);
      from = now;
    }
    const sixth = await run(...base, "--rollback");
    assert.equal(sixth.code, 1, sixth.stdout);
    assert.match(
      sixth.stderr,
      new RegExp(
        `^wasmkeep: deploy acme/shop: the version before current, ${v[4]}, cannot be read: `,
        "m",
      ),
    );
    assert.deepEqual(
      await versionIds(bucket),
      [v[5], v[6], v[7], v[8], r9.id, d10, d11, d12, ...rolledBack].sort(),
    );
    assert.deepEqual(await readCurrent(bucket, SHOP).then((r) => r?.current), {
      version: from.id,
      seq: 17,
    });
  } finally {
    await bucket.close();
  }
}

Deno.test("retention through the CLI on moto: current and the five before it stay, rollbacks keep what they stepped back from", () =>
  onBucket("moto", "prod", retentionCycle));

Deno.test("retention through the CLI on a file bucket: current and the five before it stay, rollbacks keep what they stepped back from", () =>
  onBucket("file", "prod", retentionCycle));
