/**
 * Helpers for tests that run several nodes on one bucket.
 *
 * @module
 */

import { type NodeProcess, runWasmkeep, startNode } from "./node_process.ts";
import { freePort } from "./loopback.ts";

/** A scratch directory on tmpfs when there is one: the file bucket fsyncs every object. */
export async function scratchDir(prefix: string): Promise<string> {
  try {
    return await Deno.makeTempDir({ dir: "/dev/shm", prefix });
  } catch {
    return await Deno.makeTempDir({ prefix });
  }
}

/**
 * The flags of cluster node `id`: plain HTTP between nodes, and a lease ttl
 * (every lease timing derives from it; 3 s makes a start check 4.5 s).
 */
export function nodeFlags(id: string, leaseTtlSecs = 3): string[] {
  return [
    "--node-id",
    id,
    "--cluster-plaintext",
    "accept",
    "--lease-ttl-secs",
    String(leaseTtlSecs),
  ];
}

/** Starts node `id` serving `actors` on `bucketUrl`, its data under `dir/<id>`. */
export function startClusterNode(
  id: string,
  dir: string,
  bucketUrl: string,
  actors: string[],
  options: {
    leaseTtlSecs?: number;
    env?: Record<string, string>;
    extra?: string[];
    denoArgs?: string[];
  } = {},
): Promise<NodeProcess> {
  return startNode(
    [
      ...actors,
      ...nodeFlags(id, options.leaseTtlSecs),
      "--data-dir",
      `${dir}/${id}`,
      "--bucket",
      bucketUrl,
      ...(options.extra ?? []),
    ],
    options.env,
    { denoArgs: options.denoArgs },
  );
}

/**
 * Starts node `id` with a cluster listener on a free loopback port, which
 * its peers reach over mutual TLS (plain HTTP between nodes refused unless
 * `accept`), serving `actors` on `bucketUrl`, lease ttl 3 s.
 */
export function startTlsClusterNode(
  id: string,
  dir: string,
  bucketUrl: string,
  actors: string[],
  options: { accept?: boolean; extra?: string[] } = {},
): Promise<NodeProcess> {
  const port = freePort();
  return startNode([
    ...actors,
    "--node-id",
    id,
    "--lease-ttl-secs",
    "3",
    "--data-dir",
    `${dir}/${id}`,
    "--bucket",
    bucketUrl,
    "--cluster-listen",
    `127.0.0.1:${port}`,
    "--cluster-advertise",
    `https://127.0.0.1:${port}`,
    ...(options.accept ? ["--cluster-plaintext", "accept"] : []),
    ...(options.extra ?? []),
  ]);
}

/** One request's status, body (trimmed) and the node that answered. */
export interface Answer {
  status: number;
  body: string;
  node: string | null;
  retryAfter: string | null;
}

/** Sends one request and reads the whole answer. */
export async function request(
  url: string,
  init: RequestInit = {},
): Promise<Answer> {
  const response = await fetch(url, init);
  return {
    status: response.status,
    body: (await response.text()).trim(),
    node: response.headers.get("x-wasmkeep-node"),
    retryAfter: response.headers.get("retry-after"),
  };
}

/** Runs `wasmkeep cluster status` on a bucket; returns its exit code and output. */
export async function clusterStatus(
  bucketUrl: string,
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return await runWasmkeep(["cluster", "status", "--bucket", bucketUrl], env);
}
