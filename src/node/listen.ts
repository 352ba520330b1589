/**
 * The node's client listener as a seam: `serve` listens with `Deno.serve`;
 * the simulator on its own network (sim/network.ts).
 *
 * @module
 */

import type { Logger } from "../log.ts";
import { NodeStartError } from "./options.ts";

/** A listening client listener. */
export interface ClientListener {
  /** `http://host:port` it listens on (the port chosen when 0 was asked). */
  readonly url: string;
  /** Stops taking connections; resolves once the open ones ended. */
  shutdown(): Promise<void>;
}

/** Listens for clients with `handler`; throws when it cannot. */
export type ClientListen = (handler: (request: Request) => Promise<Response>) => ClientListener;

/**
 * `Deno.serve` on `hostname:port`: a request the handler fails is answered
 * 500 and logged; an address that cannot be bound is a `NodeStartError`
 * naming `--listen`. The node runs with Deno's new request abort (deno.json
 * `"unstable": ["no-legacy-abort"]`, or `--unstable-no-legacy-abort` where
 * no config is read): `request.signal` aborts only when the client left,
 * which is all the node reads it for, and the runtime logs no line about
 * the legacy abort on successful responses.
 *
 * @example
 * ```ts
 * import { denoListen } from "./listen.ts";
 * import { createLogger } from "../log.ts";
 * const listen = denoListen("127.0.0.1", 8080, createLogger());
 * const listener = listen((request) => Promise.resolve(new Response("ok")));
 * await listener.shutdown();
 * ```
 */
export function denoListen(hostname: string, port: number, log: Logger): ClientListen {
  return (handler) => {
    let server: Deno.HttpServer<Deno.NetAddr>;
    try {
      server = Deno.serve({
        hostname,
        port,
        onListen: () => {},
        onError: (error) => {
          log.error("request failed", { error: String(error) });
          return new Response("internal error\n", { status: 500 });
        },
      }, handler);
    } catch (error) {
      throw new NodeStartError(
        `cannot listen on ${hostname}:${port} (--listen): ${(error as Error).message}`,
      );
    }
    const addr = server.addr;
    const host = addr.hostname.includes(":") ? `[${addr.hostname}]` : addr.hostname;
    return { url: `http://${host}:${addr.port}`, shutdown: () => server.shutdown() };
  };
}
