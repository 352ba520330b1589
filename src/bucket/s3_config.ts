/**
 * From `s3://BUCKET[/PREFIX]` and the standard `AWS_*` variables to what the
 * S3 client needs, refusing plain HTTP unless asked for, and a start without
 * credentials unless the AWS SDK's own chain is asked for.
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
  /**
   * Static credentials, or `"default-chain"`: the AWS SDK's own provider
   * chain (`~/.aws` profiles, SSO, container and instance roles), which may
   * ask the instance metadata service, so only where the user opted in.
   */
  credentials:
    | { accessKeyId: string; secretAccessKey: string; sessionToken?: string }
    | "default-chain";
}

/**
 * The `AWS_*` variables cannot make a working S3 client; the message names
 * the variable and the fix. A `TypeError`, as any malformed setting.
 *
 * @example
 * ```ts
 * import { S3ConfigError, s3SettingsFromEnv } from "./s3_config.ts";
 * try {
 *   s3SettingsFromEnv({});
 * } catch (e) {
 *   if (e instanceof S3ConfigError) console.error(e.message); // names AWS_ACCESS_KEY_ID...
 * }
 * ```
 */
export class S3ConfigError extends TypeError {
  /** Always `"S3ConfigError"`. */
  override name = "S3ConfigError";
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
 * `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`), `AWS_ACCESS_KEY_ID`,
 * `AWS_SECRET_ACCESS_KEY` and `AWS_SESSION_TOKEN`. An `http://` endpoint is
 * refused unless `AWS_ALLOW_HTTP` is `true` or `1`: requests would travel
 * unencrypted. Without both keys it throws {@linkcode S3ConfigError}, unless
 * `WASMKEEP_S3_CREDENTIALS=default-chain` hands the credentials to the AWS
 * SDK's own chain.
 *
 * @example
 * ```ts
 * import { s3SettingsFromEnv } from "./s3_config.ts";
 * s3SettingsFromEnv({
 *   AWS_ENDPOINT: "http://127.0.0.1:5055", AWS_ALLOW_HTTP: "true",
 *   AWS_ACCESS_KEY_ID: "test", AWS_SECRET_ACCESS_KEY: "test",
 * });
 * ```
 */
export function s3SettingsFromEnv(env: Env): S3Settings {
  return {
    region: env.AWS_REGION || env.AWS_DEFAULT_REGION || "us-east-1",
    endpoint: endpointFromEnv(env),
    credentials: credentialsFromEnv(env),
  };
}

const ENDPOINT_VARIABLES = ["AWS_ENDPOINT", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"];

function endpointFromEnv(env: Env): string | undefined {
  const name = ENDPOINT_VARIABLES.find((name) => env[name]);
  if (name === undefined) return undefined;
  const endpoint = env[name]!;
  let protocol: string;
  try {
    protocol = new URL(endpoint).protocol;
  } catch {
    throw new S3ConfigError(`${name} is not a URL: ${endpoint}`);
  }
  if (protocol === "http:" && !["true", "1"].includes(env.AWS_ALLOW_HTTP ?? "")) {
    throw new S3ConfigError(
      `${name} ${endpoint} is plain http: requests and credentials would travel ` +
        `unencrypted; set AWS_ALLOW_HTTP=true to allow it (local testing only)`,
    );
  }
  if (protocol !== "http:" && protocol !== "https:") {
    throw new S3ConfigError(`${name} must be an http(s) URL, not ${endpoint}`);
  }
  return endpoint;
}

function credentialsFromEnv(env: Env): S3Settings["credentials"] {
  const source = env.WASMKEEP_S3_CREDENTIALS || "env";
  if (source !== "env" && source !== "default-chain") {
    throw new S3ConfigError(
      `WASMKEEP_S3_CREDENTIALS must be env (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY) or ` +
        `default-chain (the AWS SDK's own chain), not '${source}'`,
    );
  }
  const accessKeyId = env.AWS_ACCESS_KEY_ID;
  const secretAccessKey = env.AWS_SECRET_ACCESS_KEY;
  // Half a key pair is a mistake either way: the SDK's chain would skip it unnoticed.
  if (accessKeyId && !secretAccessKey) {
    throw new S3ConfigError(
      "AWS_SECRET_ACCESS_KEY is not set but AWS_ACCESS_KEY_ID is: set both, the key's id and its secret",
    );
  }
  if (secretAccessKey && !accessKeyId) {
    throw new S3ConfigError(
      "AWS_ACCESS_KEY_ID is not set but AWS_SECRET_ACCESS_KEY is: set both, the key's id and its secret",
    );
  }
  if (source === "default-chain") return "default-chain";
  if (!accessKeyId || !secretAccessKey) {
    throw new S3ConfigError(
      "no S3 credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN " +
        "with temporary credentials; AWS_REGION and AWS_ENDPOINT say where the bucket is), or set " +
        "WASMKEEP_S3_CREDENTIALS=default-chain to use the AWS SDK's own chain " +
        "(~/.aws profiles, SSO, container and instance roles)",
    );
  }
  return { accessKeyId, secretAccessKey, sessionToken: env.AWS_SESSION_TOKEN || undefined };
}
