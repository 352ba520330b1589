/**
 * What the deploy tests through real node processes share: deploying the
 * app acme/shop, asking a testbed actor through a node, and waiting for a
 * node to serve a version.
 *
 * @module
 */

import assert from "node:assert/strict";
import { request } from "../../../src/testing/cluster.ts";
import { type NodeProcess, runWasmkeep } from "../../../src/testing/node_process.ts";
import { until } from "../../helpers/until.ts";

export const APP = ["--app", "acme/shop"];

/** `wasmkeep deploy --app acme/shop --bucket URL ARGS`, which must succeed. */
export async function deploy(url: string, env: Record<string, string>, ...args: string[]) {
  const run = await runWasmkeep(["deploy", ...APP, "--bucket", url, ...args], env);
  assert.equal(run.code, 0, `deploy ${args.join(" ")}: ${run.stderr}`);
  return run;
}

/** GET `path` of testbed actor `name` through `node`. */
export function get(node: NodeProcess, name: string, path: string, className = "testbed") {
  return request(`${node.url}/actor/${className}/${name}${path}`);
}

/** An actors.call of `target` (`class/name/path?query`) by the actor caller/c through `node`. */
export function callVia(node: NodeProcess, target: string) {
  return get(node, "c", `/call?${encodeURIComponent(target)}`, "caller");
}

/**
 * The answer's head to a WebSocket upgrade for testbed actor `name` through
 * `node`, as a client reads it on the wire: its status line and headers.
 */
export async function upgradeHead(node: NodeProcess, name: string): Promise<string> {
  const port = Number(new URL(node.url).port);
  const conn = await Deno.connect({ hostname: "127.0.0.1", port });
  try {
    await conn.write(new TextEncoder().encode(
      `GET /actor/testbed/${name} HTTP/1.1\r\nhost: 127.0.0.1\r\nupgrade: websocket\r\n` +
        "connection: upgrade\r\nsec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n" +
        "sec-websocket-version: 13\r\n\r\n",
    ));
    let head = "";
    const buffer = new Uint8Array(4096);
    while (!head.includes("\r\n\r\n")) {
      const n = await conn.read(buffer);
      if (n === null) break;
      head += new TextDecoder().decode(buffer.subarray(0, n));
    }
    return head.slice(0, head.indexOf("\r\n\r\n")).toLowerCase();
  } finally {
    conn.close();
  }
}

/** Waits until actor `name` answers `version` to `/version` through `node`; the ms it took. */
export async function servesVersion(
  node: NodeProcess,
  name: string,
  version: string,
  withinMs: number,
): Promise<number> {
  const start = Date.now();
  await until(`${name} on ${node.url} runs version ${version}`, async () => {
    const answer = await get(node, name, "/version");
    return answer.status === 200 && answer.body === version;
  }, withinMs);
  return Date.now() - start;
}
