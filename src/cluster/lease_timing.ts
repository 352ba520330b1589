/**
 * Every timing of node leases, derived from one ttl as the spec lists them
 * (docs/adr/0004-node-leases.md): with the default 10 s ttl, a heartbeat
 * every 3 s, a lease valid 8 s after its last write, a watch of 6 s before
 * a fence, a fence no sooner than 15 s after the last write.
 *
 * @module
 */

/** The default lease ttl: a heartbeat older than this is not live. */
export const DEFAULT_LEASE_TTL_MS = 10_000;

/** All lease timings, in milliseconds. */
export interface LeaseTiming {
  /** A heartbeat written longer ago than this is not live. */
  ttlMs: number;
  /** How often a node writes its heartbeat and lists its peers' (at most a third of the ttl). */
  periodMs: number;
  /** Taken off the ttl for the node's own lease, against clock skew and slow writes. */
  safetyMs: number;
  /** The node's own lease is valid this long after its last write was sent (ttl − safety). */
  validMs: number;
  /** Added to the ttl before a dead node may be fenced. */
  graceMs: number;
  /** A peer may be fenced once its last write is this old (ttl + grace). */
  fenceAfterMs: number;
  /** The longest a heartbeat write may take before it counts as failed. */
  writeTimeoutMs: number;
  /** A peer must be seen unchanged this long before it is fenced (a third of the ttl + write timeout). */
  watchMs: number;
  /** Clock skew between nodes the timings tolerate. */
  skewMs: number;
}

/**
 * The timings for a ttl.
 *
 * @example
 * ```ts
 * import { leaseTiming } from "./lease_timing.ts";
 * const t = leaseTiming();
 * t.periodMs; // 3000
 * t.validMs; // 8000
 * t.fenceAfterMs; // 15000
 * ```
 */
export function leaseTiming(ttlMs = DEFAULT_LEASE_TTL_MS): LeaseTiming {
  if (!(ttlMs >= 1000)) throw new RangeError(`a lease ttl of ${ttlMs} ms is too short`);
  // The spec's defaults, scaled: 3 s, 2 s, 5 s, 2.7 s and 1 s of a 10 s ttl.
  const periodMs = Math.floor((ttlMs * 3) / 10);
  const safetyMs = ttlMs / 5;
  const graceMs = ttlMs / 2;
  const writeTimeoutMs = (ttlMs * 27) / 100;
  return {
    ttlMs,
    periodMs,
    safetyMs,
    validMs: ttlMs - safetyMs,
    graceMs,
    fenceAfterMs: ttlMs + graceMs,
    writeTimeoutMs,
    watchMs: Math.round(ttlMs / 3 + writeTimeoutMs),
    skewMs: ttlMs / 10,
  };
}
