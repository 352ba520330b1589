/**
 * The client port of a simulated node, standing in for `Deno.serve`: the
 * real HTTP/1.1 server of the cluster listener (`src/net/h1/server.ts`)
 * over a simulated connection, its waits on the node's clock, handing each
 * request to the node's real handler (`createClientHandler` of
 * `src/http/client_handler.ts`), and each WebSocket upgrade to it too
 * (`sockets.ts`).
 *
 * @module
 */

import type { ByteConn } from "../src/net/h1/connection.ts";
import { DeadlineQueue } from "../src/net/deadlines.ts";
import { serveHttp1 } from "../src/net/h1/server.ts";
import { MAX_SOCKET_MESSAGE_BYTES } from "../src/limits.ts";
import type { Clock, Random } from "../src/time/clock.ts";
import { answerUpgrade } from "./sockets.ts";

/** The largest request head read (as the cluster port's). */
const MAX_HEAD_BYTES = 64 * 1024;
/** The largest request body read; the workload's are far smaller. */
const MAX_BODY_BYTES = 1024 * 1024;
/** An idle kept-alive connection is closed after this long (the forwarder closes its own at 30 s). */
const IDLE_TIMEOUT_MS = 60_000;

/**
 * Serves one connection until it ends: each request to `handler`, each
 * answer written back. Never rejects (a broken connection is closed).
 *
 * @example
 * ```ts ignore
 * net.listen("a.sim:8080", endpoint, (conn) =>
 *   void serveConnection(conn, handler, "a.sim:8080", clock, random));
 * ```
 */
export function serveConnection(
  conn: ByteConn,
  handler: (request: Request) => Promise<Response>,
  authority: string,
  clock: Clock,
  random: Random,
): Promise<void> {
  return serveHttp1(conn, {
    handler,
    upgrade: (request) =>
      answerUpgrade(request, handler, {
        clock,
        random,
        maxMessageBytes: MAX_SOCKET_MESSAGE_BYTES,
      }),
    url: (host, target) => `http://${host ?? authority}${target}`,
    maxHeadBytes: MAX_HEAD_BYTES,
    maxBodyBytes: MAX_BODY_BYTES,
    idle: new DeadlineQueue(clock, IDLE_TIMEOUT_MS, () => false),
  });
}
