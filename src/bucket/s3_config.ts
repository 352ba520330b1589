/**
 * From `s3://BUCKET[/PREFIX]` and the standard `AWS_*` variables to what the
 * S3 client needs, refusing plain HTTP unless asked for.
 *
 * @module
 */

/** Where a cluster's objects live in S3. */
export interface S3Location {
  /** The bucket's name. */
  bucket: string;
  /** The key prefix, empty or ending with `/`. */
  prefix: string;
}

/** How to reach the store. */
export interface S3Settings {
  /** The region to sign for. */
  region: string;
  /** A custom endpoint (MinIO, R2, moto…), addressed path-style. */
  endpoint?: string;
  /** Static credentials from the environment; absent: the SDK's default chain. */
  credentials?: { accessKeyId: string; secretAccessKey: string; sessionToken?: string };
}

/** Environment variables, as `Deno.env.toObject()` returns them. */
export type Env = Record<string, string | undefined>;

/**
 * Splits `s3://BUCKET[/PREFIX]`.
 *
 * @example
 * ```ts
 * import { parseS3Url } from "./s3_config.ts";
 * parseS3Url("s3://acme-wasmkeep/prod"); // { bucket: "acme-wasmkeep", prefix: "prod/" }
 * ```
 */
export function parseS3Url(url: string): S3Location {
  const match = /^s3:\/\/([^/]+)(?:\/(.*))?$/.exec(url);
  if (!match) throw new TypeError(`not an S3 bucket URL (s3://BUCKET[/PREFIX]): ${url}`);
  const path = (match[2] ?? "").replace(/^\/+|\/+$/g, "");
  return { bucket: match[1], prefix: path === "" ? "" : `${path}/` };
}

/**
 * Reads region, endpoint and credentials from `AWS_REGION` (or
 * `AWS_DEFAULT_REGION`, default `us-east-1`), `AWS_ENDPOINT` (or
 * `AWS_ENDPOINT_URL`), `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY` and
 * `AWS_SESSION_TOKEN`. An `http://` endpoint is refused unless
 * `AWS_ALLOW_HTTP` is `true` or `1`: requests would travel unencrypted.
 *
 * @example
 * ```ts
 * import { s3SettingsFromEnv } from "./s3_config.ts";
 * s3SettingsFromEnv({ AWS_ENDPOINT: "http://127.0.0.1:5055", AWS_ALLOW_HTTP: "true" });
 * ```
 */
export function s3SettingsFromEnv(env: Env): S3Settings {
  const endpoint = env.AWS_ENDPOINT || env.AWS_ENDPOINT_URL || undefined;
  if (endpoint !== undefined) {
    let protocol: string;
    try {
      protocol = new URL(endpoint).protocol;
    } catch {
      throw new TypeError(`AWS_ENDPOINT is not a URL: ${endpoint}`);
    }
    if (protocol === "http:" && !["true", "1"].includes(env.AWS_ALLOW_HTTP ?? "")) {
      throw new TypeError(
        `AWS_ENDPOINT ${endpoint} is plain http: requests and credentials would travel ` +
          `unencrypted; set AWS_ALLOW_HTTP=true to allow it (local testing only)`,
      );
    }
    if (protocol !== "http:" && protocol !== "https:") {
      throw new TypeError(`AWS_ENDPOINT must be an http(s) URL, not ${endpoint}`);
    }
  }
  const accessKeyId = env.AWS_ACCESS_KEY_ID;
  const secretAccessKey = env.AWS_SECRET_ACCESS_KEY;
  return {
    region: env.AWS_REGION || env.AWS_DEFAULT_REGION || "us-east-1",
    endpoint,
    credentials: accessKeyId && secretAccessKey
      ? { accessKeyId, secretAccessKey, sessionToken: env.AWS_SESSION_TOKEN || undefined }
      : undefined,
  };
}
