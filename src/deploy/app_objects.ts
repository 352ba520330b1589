/**
 * Reading an app's objects in the bucket: its `current`, a version, a
 * component. Both `wasmkeep deploy` and the nodes that follow the app read
 * through here, so they never disagree on a key or a bound.
 *
 * @module
 */

import type { Bucket, CallOptions } from "../bucket/bucket.ts";
import { appComponentKey, appCurrentKey, appVersionKey } from "../bucket/keys.ts";
import { MAX_COMPONENT_BYTES } from "../actors/component.ts";
import type { AppName } from "./app_name.ts";
import {
  type AppCurrent,
  type AppVersion,
  componentHash,
  decodeCurrent,
  decodeVersion,
  ManifestError,
} from "./manifest.ts";

/** `current` as read, with the etag a conditional write moves it from. */
export interface ReadCurrent {
  current: AppCurrent;
  etag: string;
  /** When the bucket wrote it (ms since the epoch, the bucket's clock). */
  lastModified: number;
}

/**
 * The app's `current`, or `null` when it has none. A `current` that cannot
 * be read throws {@linkcode ManifestError}; a bucket that does not answer
 * throws its error.
 *
 * @example
 * ```ts
 * import { readCurrent } from "./app_objects.ts";
 * import type { Bucket } from "../bucket/bucket.ts";
 * declare const bucket: Bucket;
 * const read = await readCurrent(bucket, { tenant: "acme", app: "shop" });
 * read?.current.seq;
 * ```
 */
export async function readCurrent(
  bucket: Bucket,
  name: AppName,
  options?: CallOptions,
): Promise<ReadCurrent | null> {
  const key = appCurrentKey(name.tenant, name.app);
  const object = await bucket.get(key, options);
  if (!object) return null;
  return {
    current: decodeCurrent(object.body, key),
    etag: object.etag,
    lastModified: object.lastModified,
  };
}

/**
 * The version `id` of the app. A missing one throws {@linkcode ManifestError}
 * (a `current` names only versions written before it).
 *
 * @example
 * ```ts
 * import { readVersion } from "./app_objects.ts";
 * import type { Bucket } from "../bucket/bucket.ts";
 * declare const bucket: Bucket;
 * const version = await readVersion(bucket, { tenant: "acme", app: "shop" }, "9cf4de9152d8dd29");
 * ```
 */
export async function readVersion(
  bucket: Bucket,
  name: AppName,
  id: string,
  options?: CallOptions,
): Promise<AppVersion> {
  const key = appVersionKey(name.tenant, name.app, id);
  const object = await bucket.get(key, options);
  if (!object) throw new ManifestError(key, "no such object");
  return decodeVersion(object.body, key);
}

/**
 * The component `sha256` of the app, checked against its name: an object
 * whose bytes hash otherwise is refused, so a node never runs code that is
 * not what the version names.
 *
 * @example
 * ```ts
 * import { readComponent, readVersion } from "./app_objects.ts";
 * import type { Bucket } from "../bucket/bucket.ts";
 * declare const bucket: Bucket;
 * const name = { tenant: "acme", app: "shop" };
 * const version = await readVersion(bucket, name, "9cf4de9152d8dd29");
 * const bytes = await readComponent(bucket, name, version.classes.counter.component);
 * ```
 */
export async function readComponent(
  bucket: Bucket,
  name: AppName,
  sha256: string,
  options?: CallOptions,
): Promise<Uint8Array> {
  const key = appComponentKey(name.tenant, name.app, sha256);
  const object = await bucket.get(key, options);
  if (!object) throw new ManifestError(key, "no such object");
  if (object.body.length > MAX_COMPONENT_BYTES) {
    throw new ManifestError(key, `larger than ${MAX_COMPONENT_BYTES} bytes`);
  }
  if (await componentHash(object.body) !== sha256) {
    throw new ManifestError(key, "its bytes do not match its SHA-256");
  }
  return object.body;
}
