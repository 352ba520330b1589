/**
 * What the documented-commands test needs to run a doc's commands as a user
 * would: the fenced blocks marked `<!-- commands-test: NAME -->`, a clean
 * copy of the checkout, shell lines run with bash, background servers, and
 * the `curl` lines checked against the answer their comment documents.
 *
 * @module
 */

import { freePort } from "../../src/testing/loopback.ts";
import assert from "node:assert/strict";

/** The repository root. */
export const ROOT: string = new URL("../../", import.meta.url).pathname;

/**
 * The lines of the fenced block marked `<!-- commands-test: NAME -->` in
 * `file` (relative to the root): a command continued with `\` is one line.
 *
 * @example
 * ```ts ignore
 * import { markedBlock } from "./doc_commands.ts";
 * const lines = await markedBlock("README.md", "demo");
 * ```
 */
export async function markedBlock(file: string, name: string): Promise<string[]> {
  const text = await Deno.readTextFile(`${ROOT}${file}`);
  const marker = `<!-- commands-test: ${name} -->`;
  const at = text.indexOf(marker);
  assert.ok(at >= 0, `${file} has no block marked ${marker}`);
  const open = text.indexOf("```", at);
  const start = text.indexOf("\n", open) + 1;
  const end = text.indexOf("\n```", start);
  assert.ok(open >= 0 && end > start, `${file}: no fenced block after ${marker}`);
  return text.slice(start, end).replaceAll("\\\n", " ").split("\n")
    .filter((line) => line.trim() !== "");
}

/**
 * The lines of every ```sh block of `file`, each block's first line the
 * way to tell it: for docs no marker has been put in yet.
 *
 * @example
 * ```ts ignore
 * import { shBlocks } from "./doc_commands.ts";
 * const blocks = await shBlocks("examples/greeter/README.md");
 * ```
 */
export async function shBlocks(file: string): Promise<string[][]> {
  const text = await Deno.readTextFile(`${ROOT}${file}`);
  return [...text.matchAll(/```sh\n([\s\S]*?)\n```/g)].map((block) =>
    block[1].replaceAll("\\\n", " ").split("\n").filter((line) => line.trim() !== "")
  );
}

/** A line without its trailing `# comment`; a comment line is "". */
export function command(line: string): string {
  if (line.trim().startsWith("#")) return "";
  return line.replace(/\s+#\s.*$/, "").trim();
}

/** A line's trailing comment, without `# `. */
export function comment(line: string): string {
  return line.match(/\s#\s(.*)$/)?.[1]?.trim() ?? "";
}

/**
 * A copy of the checkout's tracked files, as they are on disk, outside the
 * repository: what a fresh clone holds, with no `.wasmkeep/` or `dist/`.
 *
 * @example
 * ```ts ignore
 * import { cleanClone } from "./doc_commands.ts";
 * const dir = await cleanClone();
 * ```
 */
export async function cleanClone(): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "wasmkeep-clone-" });
  assert.ok(!dir.startsWith(ROOT), `${dir} is inside the repository`);
  const listed = await new Deno.Command("git", {
    args: ["ls-files", "-z", "--cached", "--others", "--exclude-standard"],
    cwd: ROOT,
    stdout: "piped",
  }).output();
  assert.ok(listed.success, "git ls-files failed");
  const files = new TextDecoder().decode(listed.stdout).split("\0").filter(Boolean);
  for (const file of files) {
    const from = `${ROOT}${file}`;
    try {
      if (!Deno.statSync(from).isFile) continue;
    } catch {
      continue; // Deleted in the working tree.
    }
    const to = `${dir}/${file}`;
    await Deno.mkdir(to.slice(0, to.lastIndexOf("/")), { recursive: true });
    await Deno.copyFile(from, to);
  }
  return dir;
}

/** What a shell line printed and how it ended. */
export interface LineOutput {
  code: number;
  stdout: string;
  stderr: string;
}

/** Runs `line` with bash in `cwd` with `env` added to the process's own. */
export async function runLine(
  line: string,
  cwd: string,
  env: Record<string, string> = {},
): Promise<LineOutput> {
  const output = await new Deno.Command("bash", {
    args: ["-c", line],
    cwd,
    env: { NO_COLOR: "1", DENO_NO_UPDATE_CHECK: "1", ...env },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).output();
  const decoder = new TextDecoder();
  return {
    code: output.code,
    stdout: decoder.decode(output.stdout),
    stderr: decoder.decode(output.stderr),
  };
}

/** A server started from a doc's line. */
export interface Background {
  /** Everything it wrote so far, both streams. */
  logs(): string;
  /** Sends `signal` (default SIGTERM) and waits for its exit. */
  stop(signal?: Deno.Signal): Promise<Deno.CommandStatus>;
}

/**
 * Starts `line` with bash (`exec`, so the signal reaches the command itself)
 * in `cwd`, and waits until `http://127.0.0.1:PORT/_wasmkeep/ready` answers
 * 200 (within 60 s).
 */
export async function startServer(
  line: string,
  port: number,
  cwd: string,
  env: Record<string, string> = {},
): Promise<Background> {
  const child = new Deno.Command("bash", {
    args: ["-c", `exec ${line}`],
    cwd,
    env: { NO_COLOR: "1", DENO_NO_UPDATE_CHECK: "1", ...env },
    stdin: "null",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  let text = "";
  const read = async (stream: ReadableStream<Uint8Array>) => {
    for await (const chunk of stream.pipeThrough(new TextDecoderStream())) text += chunk;
  };
  const reading = Promise.all([read(child.stdout), read(child.stderr)]);
  let exited = false;
  child.status.then(() => exited = true);
  const stop = async (signal: Deno.Signal = "SIGTERM") => {
    try {
      child.kill(signal);
    } catch {
      // Exited already.
    }
    const status = await child.status;
    await reading;
    return status;
  };
  const deadline = Date.now() + 60_000;
  while (true) {
    if (exited) {
      await reading;
      throw new Error(`${line} exited before it was ready:\n${text}`);
    }
    const ready = await fetch(`http://127.0.0.1:${port}/_wasmkeep/ready`)
      .then(async (response) => (await response.body?.cancel(), response.status === 200))
      .catch(() => false);
    if (ready) break;
    if (Date.now() > deadline) {
      await stop("SIGKILL");
      throw new Error(`${line} was not ready within 60 s:\n${text}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  return { logs: () => text, stop };
}

/**
 * Runs a documented `curl` line and checks the answer against its comment:
 * the body is the whole comment (`# hello, ann`) or, when a comma starts a
 * remark, the comment before it (`# 2, with x-wasmkeep-node: a`); a comment
 * of three digits is the status (`# 201`); an `x-wasmkeep-node: X` in the
 * comment is checked too. A line without a comment must only succeed.
 */
export async function checkCurl(line: string, cwd: string): Promise<void> {
  const expected = comment(line);
  // With the head always, to read the status and the node.
  const out = await runLine(command(line).replace(/^curl /, "curl -s -i "), cwd);
  assert.equal(out.code, 0, `${line}: curl failed: ${out.stderr}`);
  const split = out.stdout.indexOf("\r\n\r\n");
  const head = out.stdout.slice(0, split);
  const body = out.stdout.slice(split + 4).trim();
  const status = head.match(/^HTTP\/1\.1 (\d{3}) /)?.[1];
  assert.match(status ?? "", /^2\d\d$/, `${line}: ${head}`);
  if (expected === "") return;
  if (/^\d{3}$/.test(expected)) {
    assert.equal(status, expected, `${line}: ${head}`);
    return;
  }
  const want = body === expected ? expected : expected.split(",")[0].trim();
  assert.equal(body, want, `${line}: answered ${JSON.stringify(body)}`);
  const node = expected.match(/x-wasmkeep-node: ([a-z0-9-]+)/)?.[1];
  if (node !== undefined) {
    assert.match(head, new RegExp(`^x-wasmkeep-node: ${node}\\r?$`, "im"), `${line}: ${head}`);
  }
}

/**
 * Each `127.0.0.1:PORT` and `localhost:PORT` of `lines` given a free port
 * instead: the documented ports may be taken on a shared machine.
 */
export function freePorts(lines: string[]): { lines: string[]; ports: Map<number, number> } {
  const ports = new Map<number, number>();
  for (const line of lines) {
    for (const [, port] of line.matchAll(/(?:127\.0\.0\.1|localhost|0\.0\.0\.0):(\d{4,5})/g)) {
      if (!ports.has(Number(port))) ports.set(Number(port), freePort());
    }
  }
  const moved = lines.map((line) =>
    line.replace(
      /((?:127\.0\.0\.1|localhost|0\.0\.0\.0):)(\d{4,5})/g,
      (_, host, port) => `${host}${ports.get(Number(port))}`,
    )
  );
  return { lines: moved, ports };
}
