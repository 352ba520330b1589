/**
 * A clean stop's hand-over of alarms (issue 19, the spec's "each pending
 * alarm moves to the new owner's timer, so it fires on time even after this
 * node stops"): the stopping node sends the alarms armed on its timer to a
 * live peer serving its app, signed like a call, in messages of at most
 * {@linkcode MAX_HANDOVER_ALARMS}; the peer arms them, and at each due time
 * fires it as its own (taking the actor, which the stopping node released).
 * Each message names the sender's app, for the peer to refuse another's
 * (the node decides). A peer that does not take them leaves them to the
 * next one; with none, the sweep fires them, late by the sweep's grace.
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

/** One hand-over message. */
export interface Handover {
  /**
   * `tenant/app` the sender serves, null for `--actor` classes; undefined
   * from a version that did not say (before issue 29).
   */
  app?: string | null;
  alarms: HandedAlarm[];
}

/**
 * The body of a hand-over message: the sender's app and its alarms.
 *
 * @example
 * ```ts
 * import { decodeHandover, encodeHandover } from "./alarm_handover.ts";
 * const key = { tenant: "acme", class: "reminder", name: "ann" };
 * decodeHandover(encodeHandover({ app: "acme/shop", alarms: [{ key, due: 5 }] }));
 * ```
 */
export function encodeHandover({ app, alarms }: Handover): Uint8Array {
  return new TextEncoder().encode(JSON.stringify({
    app,
    alarms: alarms.map(({ key, due }) => [key.tenant, key.class, key.name, due]),
  }));
}

/** A hand-over message read; throws a `TypeError` naming what is wrong. */
export function decodeHandover(body: Uint8Array): Handover {
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(body));
  } catch {
    throw new TypeError("the hand-over is not JSON");
  }
  const { app, alarms } = (value ?? {}) as { app?: unknown; alarms?: unknown };
  if (app !== undefined && app !== null && (typeof app !== "string" || app === "")) {
    throw new TypeError("the hand-over's app is tenant/app, or null");
  }
  if (!Array.isArray(alarms) || alarms.length > MAX_HANDOVER_ALARMS) {
    throw new TypeError(`the hand-over lists at most ${MAX_HANDOVER_ALARMS} alarms`);
  }
  return { app, alarms: alarms.map(decodeAlarm) };
}

function decodeAlarm(alarm: unknown): HandedAlarm {
  if (
    !Array.isArray(alarm) || alarm.length !== 4 ||
    !alarm.slice(0, 3).every((part) => typeof part === "string" && part !== "") ||
    !Number.isSafeInteger(alarm[3]) || alarm[3] < 0
  ) {
    throw new TypeError("a handed-over alarm is [tenant, class, name, due]");
  }
  const [tenant, className, name, due] = alarm as [string, string, string, number];
  return { key: { tenant, class: className, name }, due };
}

/** A live peer to hand alarms to. */
export interface HandoverPeer {
  node: string;
  address: string;
}

/** What {@linkcode handOverAlarms} needs. */
export interface HandoverOptions {
  alarms: readonly HandedAlarm[];
  /** `tenant/app` this node serves, undefined for `--actor` classes. */
  app: string | undefined;
  /** The live peers serving the same app, in the order to try them. */
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
    const body = encodeHandover({ app: options.app ?? null, alarms: part });
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
