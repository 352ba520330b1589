/**
 * A loopback proxy in front of an S3 server that counts the requests
 * through it, by method and by the first part of the key under the bucket's
 * prefix (`alarms`, `actors`, `owners`, `nodes`, …), listings apart: what a
 * node and its executors ask of the bucket, seen from the bucket's side.
 *
 * @module
 */

/** Requests counted, by `METHOD part` (`LIST part` for a listing). */
export type RequestCounts = Record<string, number>;

/** A running counting proxy. */
export interface CountingProxy {
  /** `http://127.0.0.1:PORT`, the endpoint to give the node instead of the server's. */
  endpoint: string;
  /** The counts since the start or the last reset. */
  counts(): RequestCounts;
  reset(): void;
  stop(): Promise<void>;
}

/** What a request is about: `METHOD part` of its key under `prefix` (the bucket's). */
function requestClass(method: string, url: URL, bucket: string, prefix: string): string {
  const path = decodeURIComponent(url.pathname).slice(`/${bucket}/`.length);
  if (method === "GET" && url.searchParams.has("list-type")) {
    const listed = (url.searchParams.get("prefix") ?? "").slice(prefix.length);
    return `LIST ${listed.split("/")[0]}`;
  }
  const key = path.startsWith(prefix) ? path.slice(prefix.length) : path;
  return `${method} ${key.split("/")[0]}`;
}

/**
 * Starts a proxy to `target` for the objects of `bucket` under `prefix`
 * (with its trailing slash).
 *
 * @example
 * ```ts
 * import { startCountingProxy } from "./counting_proxy.ts";
 * declare const moto: { endpoint: string; bucket: string };
 * const proxy = startCountingProxy(moto.endpoint, moto.bucket, "bench/");
 * // … the node runs with AWS_ENDPOINT=proxy.endpoint …
 * console.log(proxy.counts()["PUT alarms"]);
 * ```
 */
export function startCountingProxy(
  target: string,
  bucket: string,
  prefix: string,
  options: {
    /** How long to hold a request of class `which` (`GET apps`, …) before sending it on; 0 by default. */
    delayMs?: (which: string) => number;
  } = {},
): CountingProxy {
  let counts: RequestCounts = {};
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (request) => {
    const url = new URL(request.url);
    const which = requestClass(request.method, url, bucket, prefix);
    counts[which] = (counts[which] ?? 0) + 1;
    const delay = options.delayMs?.(which) ?? 0;
    if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
    const body = request.body ? new Uint8Array(await request.arrayBuffer()) : undefined;
    const answer = await fetch(`${target}${url.pathname}${url.search}`, {
      method: request.method,
      headers: request.headers,
      body,
      redirect: "manual",
    });
    return new Response(answer.body, { status: answer.status, headers: answer.headers });
  });
  return {
    endpoint: `http://127.0.0.1:${server.addr.port}`,
    counts: () => ({ ...counts }),
    reset: () => void (counts = {}),
    stop: () => server.shutdown(),
  };
}
