/**
 * One app per tenant per prefix (until each app owns its actors' state,
 * ADR 0007): actors are keyed by tenant, class and name, so two apps of one
 * tenant on one prefix would share actors. A node checks at start that no
 * live node on its prefix serves another app of its tenant. It reads what
 * `cluster status` reads (the heartbeats and the apps' `current`), so it
 * sits in cluster/, above the app names of deploy/.
 *
 * @module
 */

import type { Bucket } from "../bucket/bucket.ts";
import { readClusterStatus } from "./status.ts";
import { type AppName, appNameString } from "../deploy/app_name.ts";

/** What a node starting for `app` finds of its tenant's other apps. */
export interface TenantApps {
  /** A live node (not this one) serving another app of the tenant, if any. */
  liveOther?: { node: string; app: string };
  /** Other apps of the tenant with a `current` (two of one tenant predate the check). */
  deployedOthers: string[];
}

/**
 * Reads the heartbeats and the apps' `current` objects: the live nodes of
 * another app of `app`'s tenant, and its other deployed apps.
 *
 * @example
 * ```ts
 * import { tenantApps } from "./tenant_apps.ts";
 * import type { Bucket } from "../bucket/bucket.ts";
 * declare const bucket: Bucket;
 * const found = await tenantApps(bucket, { tenant: "acme", app: "shop" }, "a", Date.now, 10_000);
 * if (found.liveOther) throw new Error(`node ${found.liveOther.node} serves ${found.liveOther.app}`);
 * ```
 */
export async function tenantApps(
  bucket: Bucket,
  app: AppName,
  self: string,
  now: () => number,
  ttlMs: number,
): Promise<TenantApps> {
  const status = await readClusterStatus(bucket, "", { now, ttlMs });
  const mine = appNameString(app);
  const ofTenant = (name: string | undefined) =>
    name !== undefined && name !== mine && name.split("/")[0] === app.tenant;
  const live = status.nodes.find((node) =>
    node.live && node.id !== self && ofTenant(node.heartbeat?.app)
  );
  return {
    ...(live ? { liveOther: { node: live.id, app: live.heartbeat!.app! } } : {}),
    deployedOthers: status.apps.map((a) => a.app).filter(ofTenant),
  };
}
