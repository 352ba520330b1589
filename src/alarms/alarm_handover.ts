/**
 * A clean stop's hand-over of alarms (issue 19, the spec's "each pending
 * alarm moves to the new owner's timer, so it fires on time even after this
 * node stops"): the stopping node sends the alarms armed on its timer to a
 * live peer, signed like a call, in messages of at most
 * {@linkcode MAX_HANDOVER_ALARMS}; the peer arms them, and at each due time
 * fires it as its own (taking the actor, which the stopping node released).
 * A peer that does not take them leaves them to the next one; with none,
 * the sweep fires them, late by the sweep's grace.
 *
 * @module
 */

import type { ActorKey } from "../actor_key.ts";
import type { Logger } from "../log.ts";
import type { Clock } from "../time/clock.ts";

/** Where a node takes the alarms a peer hands over: `POST`, signed. */
export const ALARM_HANDOVER_PATH = "/_wasmkeep/alarms";

/** Alarms in one hand-over message (about 100 KiB of JSON). */
export const MAX_HANDOVER_ALARMS = 2_000;

/** How long a stop spends handing its alarms over, at most. */
export const HANDOVER_MS = 5_000;

/** One alarm handed over. */
export interface HandedAlarm {
  key: ActorKey;
  due: number;
}

/**
 * The body of a hand-over message: the alarms of one tenant.
 *
 * @example
 * ```ts
 * import { decodeHandover, encodeHandover } from "./alarm_handover.ts";
 * const key = { tenant: "default", class: "reminder", name: "ann" };
 * decodeHandover(encodeHandover([{ key, due: 5 }])); // [{ key, due: 5 }]
 * ```
 */
export function encodeHandover(alarms: readonly HandedAlarm[]): Uint8Array {
  return new TextEncoder().encode(JSON.stringify({
    alarms: alarms.map(({ key, due }) => [key.tenant, key.class, key.name, due]),
  }));
}

/** The alarms of a hand-over message; throws a `TypeError` naming what is wrong. */
export function decodeHandover(body: Uint8Array): HandedAlarm[] {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(body));
  } catch {
    throw new TypeError("the hand-over is not JSON");
  }
  const alarms = (value as { alarms?: unknown })?.alarms;
  if (!Array.isArray(alarms) || alarms.length > MAX_HANDOVER_ALARMS) {
    throw new TypeError(`the hand-over lists at most ${MAX_HANDOVER_ALARMS} alarms`);
  }
  return alarms.map((alarm) => {
    if (
      !Array.isArray(alarm) || alarm.length !== 4 ||
      !alarm.slice(0, 3).every((part) => typeof part === "string" && part !== "") ||
      !Number.isSafeInteger(alarm[3]) || alarm[3] < 0
    ) {
      throw new TypeError("a handed-over alarm is [tenant, class, name, due]");
    }
    const [tenant, className, name, due] = alarm as [string, string, string, number];
    return { key: { tenant, class: className, name }, due };
  });
}

/** A live peer to hand alarms to. */
export interface HandoverPeer {
  node: string;
  address: string;
}

/** What {@linkcode handOverAlarms} needs. */
export interface HandoverOptions {
  alarms: readonly HandedAlarm[];
  /** The live peers, in the order to try them. */
  peers: readonly HandoverPeer[];
  /** Sends one message to a peer: whether it took it. */
  send(peer: HandoverPeer, body: Uint8Array, first: HandedAlarm): Promise<boolean>;
  clock: Clock;
  log: Logger;
}

/**
 * Hands `alarms` over, message by message, each to the first peer that
 * takes it, within {@linkcode HANDOVER_MS}; resolves with how many were
 * taken (the rest fire by a sweep).
 */
export async function handOverAlarms(options: HandoverOptions): Promise<number> {
  const { alarms, peers, log } = options;
  if (alarms.length === 0) return 0;
  const deadline = options.clock.monotonic() + HANDOVER_MS;
  let taken = 0;
  for (let at = 0; at < alarms.length; at += MAX_HANDOVER_ALARMS) {
    const part = alarms.slice(at, at + MAX_HANDOVER_ALARMS);
    const body = encodeHandover(part);
    for (const peer of peers) {
      if (options.clock.monotonic() > deadline) break;
      const ok = await options.send(peer, body, part[0]).catch(() => false);
      if (ok) {
        taken += part.length;
        break;
      }
    }
  }
  if (taken < alarms.length) {
    log.warn("some alarms were not handed over; they fire by a peer's sweep, late", {
      handed_over: taken,
      left: alarms.length - taken,
    });
  } else log.info("alarms handed over", { alarms: taken });
  return taken;
}
