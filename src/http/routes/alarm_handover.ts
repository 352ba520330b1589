/**
 * A peer's hand-over of alarms at its clean stop (src/alarms/alarm_handover.ts):
 * believed only signed by a node of the cluster, then armed here, or
 * refused with 409 when the node will not arm them (another tenant's).
 *
 * @module
 */

import { ALARM_HANDOVER_PATH, decodeHandover } from "../../alarms/alarm_handover.ts";
import { failedAnswer, textResponse } from "../answers.ts";
import type { PortContext } from "../port_context.ts";
import { readBody } from "../request_head.ts";
import { bodyReadFailure } from "../unread_body.ts";
import { exactPath, type Incoming, type Route } from "./route.ts";

async function takeHandover(
  { request, url, headers }: Incoming,
  context: PortContext,
): Promise<Response> {
  if (request.method !== "POST") return textResponse(405, "alarms are handed over with POST");
  let body: Uint8Array;
  try {
    body = await readBody(request, headers.contentLength, context.maxBodyBytes);
  } catch (error) {
    return failedAnswer(bodyReadFailure(error, context.maxBodyBytes, () => undefined));
  }
  const verdict = context.verifyCall!({
    method: request.method,
    path: url.pathname + url.search,
    body,
    headers: request.headers,
  });
  if (!verdict) return textResponse(403, "alarms are handed over only by a node of the cluster");
  if (!verdict.ok) return textResponse(verdict.status, verdict.reason);
  let handover;
  try {
    handover = decodeHandover(body);
  } catch (error) {
    return textResponse(400, (error as Error).message);
  }
  const refused = context.armAlarms!(handover);
  if (refused !== undefined) return textResponse(409, refused);
  return new Response(null, { status: 204 });
}

/**
 * The hand-over route: served on a port that arms handed alarms and
 * believes signed calls.
 *
 * @example
 * ```ts
 * import { alarmHandover } from "./alarm_handover.ts";
 * const routes = [alarmHandover];
 * ```
 */
export const alarmHandover: Route = exactPath(
  ALARM_HANDOVER_PATH,
  takeHandover,
  (context) => context.armAlarms !== undefined && context.verifyCall !== undefined,
);
