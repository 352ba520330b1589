/**
 * Every command README.md and docs/ show, run as a user would on a clean
 * clone (the checkout's files copied outside the repository), on loopback.
 * Each block is read from the markdown (`<!-- commands-test: NAME -->`), so
 * a command edited there is the command run here; a line a test does not
 * run is named in it verbatim, so editing that line fails the test too.
 *
 * Where a documented command cannot run as written, the nearest local
 * equivalent runs: the documented ports are swapped for free ones (a shared
 * machine may hold them), `/tmp/wasmkeep-bucket` for a bucket of the test's
 * own, and `jsr:@wasmkeep/cli` for the clone's `mod.ts`.
 *
 * @module
 */

import assert from "node:assert/strict";
import {
  type Background,
  checkCurl,
  cleanClone,
  command,
  freePorts,
  markedBlock,
  ROOT,
  runLine,
  shBlocks,
  startServer,
} from "./doc_commands.ts";
import { freePort } from "../../src/testing/loopback.ts";

const clone = await cleanClone();
const scratch = await Deno.makeTempDir({ prefix: "wasmkeep-doc-commands-" });
const DENO_JSON = JSON.parse(await Deno.readTextFile(`${ROOT}deno.json`));
globalThis.addEventListener("unload", () => {
  for (const dir of [clone, scratch]) Deno.removeSync(dir, { recursive: true });
});

/** `wasmkeep` installed from the clone as the README says, once, into `scratch/install`. */
let installed: string | undefined;
async function installWasmkeep(): Promise<string> {
  if (installed !== undefined) return installed;
  const [install, help, jsrLine] = await markedBlock("README.md", "install");
  assert.equal(command(install), "deno install -g -A -n wasmkeep --config deno.json main.ts");
  // --root keeps the test's install out of ~/.deno.
  const out = await runLine(`${command(install)} --root ${scratch}/install`, clone);
  assert.equal(out.code, 0, out.stderr);
  installed = `${scratch}/install/bin`;
  assert.equal(jsrLine, undefined, "the install block holds two lines");
  const helped = await runLine(command(help), scratch, {
    PATH: `${installed}:${Deno.env.get("PATH")}`,
  });
  assert.equal(helped.code, 0, helped.stderr);
  assert.match(helped.stdout, /^WasmKeep \S+: durable WebAssembly actors/);
  return installed;
}

function pathWith(bin: string): Record<string, string> {
  return { PATH: `${bin}:${Deno.env.get("PATH")}` };
}

Deno.test("README: the wasmkeep command, installed from a clone, and the JSR form names the package's ./cli export", async () => {
  await installWasmkeep();
  const text = await Deno.readTextFile(`${ROOT}README.md`);
  const [, flags, jsr] =
    text.match(/deno install -g -A ((?:--unstable-\S+ )*)-n wasmkeep (jsr:\S+)/) ??
      [];
  assert.equal(jsr, `jsr:${DENO_JSON.name}/cli`);
  // A package's deno.json is not read when it runs from JSR: its switches are flags there.
  const unstable: string[] = DENO_JSON.unstable ?? [];
  assert.deepEqual(
    flags.trim().split(/\s+/).filter(Boolean),
    unstable.map((u) => `--unstable-${u}`),
  );
  assert.equal(DENO_JSON.exports["./cli"], "./main.ts");
});

Deno.test("README: deno task demo, the requests shown, Ctrl-C and start again", async () => {
  const [demo, test] = await markedBlock("README.md", "demo");
  assert.equal(command(demo), "deno task demo");
  // The whole suite is what CI runs around this test.
  assert.equal(command(test), "deno task test");
  const requests = await markedBlock("README.md", "demo-requests");
  // The task's own command, its port swapped for a free one as the requests' are.
  const task = `${DENO_JSON.tasks.demo}`;
  const { lines, ports } = freePorts([task, ...requests]);
  const port = ports.get(8080);
  assert.ok(port !== undefined, `the demo does not listen on 8080: ${task}`);
  const [serve, ...curls] = lines;
  let node = await startServer(serve, port, clone);
  try {
    for (const line of curls) await checkCurl(line, clone);
    // Ctrl-C, then the same command again: the next POST answers 3.
    const stopped = await node.stop("SIGINT");
    assert.equal(stopped.code, 0, node.logs());
    node = await startServer(serve, port, clone);
    const post = curls.find((line) => command(line).startsWith("curl -X POST"))!;
    const again = await runLine(command(post), clone);
    assert.equal(again.stdout.trim(), "3");
  } finally {
    await node.stop();
  }
});

Deno.test("README: a cluster on one machine, its requests, cluster status, and the library snippet on its bucket", async () => {
  const block = await markedBlock("README.md", "cluster");
  const [assign, ...rest] = block;
  assert.match(command(assign), /^B=file:\/\/\/tmp\/wasmkeep-bucket$/);
  // The test's own bucket in place of a shared /tmp path.
  const env = { B: `file://${scratch}/cluster-bucket` };
  const { lines, ports } = freePorts(rest);
  const servers = lines.filter((line) => command(line).endsWith("&"));
  assert.equal(servers.length, 2);
  const listenOf = (line: string) => Number(line.match(/--listen 127\.0\.0\.1:(\d+)/)![1]);
  const nodes = await Promise.all(
    servers.map((line) => startServer(command(line).slice(0, -1), listenOf(line), clone, env)),
  );
  try {
    for (const line of lines) {
      if (servers.includes(line) || command(line) === "") continue;
      if (command(line).startsWith("curl")) await checkCurl(line, clone);
      else {
        assert.match(command(line), /^deno run -A main\.ts cluster status --bucket \$B$/);
        const out = await runLine(command(line), clone, env);
        assert.equal(out.code, 0, out.stderr);
        assert.match(out.stdout, /^a +yes /m);
        assert.match(out.stdout, /^b +yes /m);
        assert.match(out.stdout, /^2 of 2 nodes live; TLS: 2 with a cluster listener/m);
      }
    }
    assert.ok(ports.has(8081) && ports.has(8082), "the nodes listen on 8081 and 8082");

    // The library snippet, from a program outside the repository, with the
    // permissions the README gives it.
    const snippet = (await markedBlock("README.md", "library")).join("\n");
    const modUrl = new URL(`file://${clone}/mod.ts`).href;
    const program = snippet.replace(`"jsr:@wasmkeep/cli"`, JSON.stringify(modUrl))
      .replace("file:///tmp/wasmkeep-bucket", env.B);
    assert.notEqual(program, snippet);
    assert.ok(program.includes(modUrl) && program.includes(env.B), program);
    // Outside the repository and the clone; removed with the scratch directory.
    const consumer = `${scratch}/consumer`;
    await Deno.mkdir(consumer);
    await Deno.writeTextFile(`${consumer}/status.ts`, program + "\n");
    const [fileRun, s3Run] = await markedBlock("README.md", "library-run");
    assert.equal(command(fileRun), "deno run --allow-read status.ts");
    // Needs an S3 store; the file:// line is what runs here.
    assert.equal(command(s3Run), "deno run --allow-read --allow-env --allow-net status.ts");
    const out = await runLine(command(fileRun), consumer);
    assert.equal(out.code, 0, out.stderr);
    const printed = out.stdout.trim().split("\n").map((line) => line.split(" ").slice(0, 2));
    assert.deepEqual(printed.sort(), [["a", "true"], ["b", "true"]]);
  } finally {
    await Promise.all(nodes.map((node) => node.stop()));
  }
});

/**
 * Runs a block's lines in `cwd` in order: `serve` in the background on a
 * free port (in place of its `--listen`, or of the default 127.0.0.1:8080),
 * `curl` checked against its comment, anything else to a zero exit.
 * `deno task demo` is the task's command. Returns the servers it started,
 * all stopped by then.
 */
async function runBlock(lines: string[], cwd: string, env: Record<string, string> = {}) {
  const port = freePort();
  const servers: Background[] = [];
  try {
    for (const line of lines) {
      let cmd = command(line);
      if (cmd === "") continue;
      if (cmd === "deno task demo") cmd = DENO_JSON.tasks.demo;
      if (/ serve /.test(cmd)) {
        cmd = /--listen \S+/.test(cmd)
          ? cmd.replace(/--listen \S+/, `--listen 127.0.0.1:${port}`)
          : `${cmd} --listen 127.0.0.1:${port}`;
        servers.push(await startServer(cmd, port, cwd, env));
      } else if (cmd.startsWith("curl")) {
        await checkCurl(line.replace("localhost:8080", `localhost:${port}`), cwd);
      } else {
        const out = await runLine(cmd, cwd, env);
        assert.equal(out.code, 0, `${cmd}: ${out.stderr}`);
      }
    }
  } finally {
    for (const server of servers) await server.stop();
  }
  return servers.length;
}

Deno.test("docs/deploying.md: the walk-through, with the installed wasmkeep", async () => {
  const bin = await installWasmkeep();
  const block = await markedBlock("docs/deploying.md", "walk-through");
  assert.equal(await runBlock(block, clone, pathWith(bin)), 1, "the walk-through starts a node");
});

Deno.test("examples: the counter's, the key-value store's and the greeter's commands", async () => {
  const bin = await installWasmkeep();
  const [counter, build] = await shBlocks("examples/counter/README.md");
  assert.equal(command(counter[0]), "deno task demo");
  // Rebuilding needs clang and lld; the built .wasm files are committed.
  assert.deepEqual(build, ["deno run -A examples/build.ts"]);
  await Deno.remove(`${clone}/.wasmkeep/demo`, { recursive: true }).catch(() => {});
  assert.equal(await runBlock(counter, clone), 1);
  const [kv, kvBuild] = await shBlocks("examples/kv/README.md");
  assert.deepEqual(kvBuild, ["deno run -A examples/build.ts"]);
  // The line that stores a photo needs one.
  await Deno.writeFile(`${clone}/photo.jpg`, new Uint8Array([0xff, 0xd8, 0xff, 0xd9]));
  assert.equal(await runBlock(kv, clone), 1);
  const [greeter] = await shBlocks("examples/greeter/README.md");
  assert.match(command(greeter[1]), /^wasmkeep serve --actor greeter=/);
  assert.equal(await runBlock(greeter, clone, pathWith(bin)), 1);
});

Deno.test("every deno task sim command in README.md and docs/ uses flags and variants the simulator lists", async () => {
  const help = await runLine("deno task sim --help", ROOT);
  const variants = await runLine("deno task sim --variants", ROOT);
  assert.equal(help.code, 0, help.stderr);
  assert.equal(variants.code, 0, variants.stderr);
  const files = ["README.md"];
  for await (const entry of Deno.readDir(`${ROOT}docs`)) {
    if (entry.name.endsWith(".md")) files.push(`docs/${entry.name}`);
  }
  let checked = 0;
  for (const file of files) {
    for (const block of await shBlocks(file)) {
      for (const line of block) {
        const sim = command(line).match(/deno task sim\b([^>&;]*)/)?.[1];
        if (sim === undefined) continue;
        for (const flag of sim.match(/--[a-z][a-z-]*/g) ?? []) {
          assert.ok(help.stdout.includes(`  ${flag} `), `${file}: ${line}: no ${flag}`);
        }
        const variant = sim.match(/--variant (\S+)/)?.[1];
        if (variant !== undefined) {
          assert.match(variants.stdout, new RegExp(`^\\s*${variant}\\b`, "m"), `${file}: ${line}`);
        }
        checked++;
      }
    }
  }
  assert.ok(checked >= 8, `only ${checked} sim commands found`);
});

Deno.test("every wasmkeep command in README.md, docs/ and the examples uses flags its --help lists", async () => {
  const helps = new Map<string, string>();
  const files = ["README.md"];
  for (const dir of ["docs", "examples"]) {
    for await (const entry of Deno.readDir(`${ROOT}${dir}`)) {
      if (entry.name.endsWith(".md")) files.push(`${dir}/${entry.name}`);
      if (entry.isDirectory) {
        const readme = `${dir}/${entry.name}/README.md`;
        if (await Deno.stat(`${ROOT}${readme}`).then(() => true, () => false)) files.push(readme);
      }
    }
  }
  let checked = 0;
  for (const file of files) {
    for (const block of await shBlocks(file)) {
      for (const line of block) {
        const match = command(line).match(
          /(?:^|&& )(?:wasmkeep|deno run -A main\.ts) ((?:cluster )?[a-z]+)(.*)$/,
        );
        if (!match) continue;
        const [, sub, rest] = match;
        if (!helps.has(sub)) {
          const help = await runLine(`deno run -A main.ts ${sub} --help`, ROOT);
          assert.equal(help.code, 0, `${file}: ${sub} --help: ${help.stderr}`);
          helps.set(sub, help.stdout);
        }
        for (const flag of rest.match(/(?<=\s)--[a-z][a-z-]*/g) ?? []) {
          assert.ok(helps.get(sub)!.includes(flag), `${file}: ${command(line)}: no ${flag}`);
        }
        checked++;
      }
    }
  }
  assert.ok(checked >= 12, `only ${checked} wasmkeep commands found`);
});
