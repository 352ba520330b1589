/**
 * The {@linkcode Bucket} on an S3-compatible store, through the AWS SDK, with
 * the client's bounds of the spec's "Replication" section:
 *
 * - every request is abandoned after {@linkcode REQUEST_TIMEOUT_MS};
 * - a read that hears nothing for {@linkcode READ_SILENCE_MS} is resent;
 * - a 5xx, 429 or 408 answer, or a request that could not be sent, is resent
 *   ({@linkcode CLIENT_MAX_TRIES} tries, jittered backoff);
 * - a write (PUT, DELETE) is never resent after a timeout or a broken
 *   connection: it may have been applied, and the caller decides;
 * - a 409 ConditionalRequestConflict is resent after a short pause, as S3's
 *   documentation says ({@linkcode CONFLICT_MAX_TRIES} tries).
 *
 * The SDK's own retries are off, so every wait is on the {@linkcode Clock}.
 *
 * @module
 */

// Only the types: the SDK itself is loaded by the first request (loadSdk), so
// that a program on a file:// bucket never evaluates it. Evaluating it reads
// AWS_* variables, which would make such a program need --allow-env.
// A full npm: specifier, not deno.json's bare name: a program importing this
// package by URL has no import map of ours (docs/dependencies.md).
// deno-lint-ignore no-import-prefix
import type { S3Client } from "npm:@aws-sdk/client-s3@3.1175.0";
import { type Clock, type Random, systemClock, systemRandom } from "../time/clock.ts";
import { describeError } from "../describe_error.ts";
import type {
  Bucket,
  CallOptions,
  DeleteOptions,
  ListOptions,
  ListPage,
  ObjectInfo,
  PutOptions,
  StoredObject,
} from "./bucket.ts";
import {
  CLIENT_MAX_TRIES,
  CLIENT_RETRY_BASE_MS,
  CONFLICT_MAX_TRIES,
  CONFLICT_RETRY_MS,
  READ_SILENCE_MS,
  REQUEST_TIMEOUT_MS,
} from "./bounds.ts";
import { BucketRequestError, BucketUnavailable, PreconditionFailed } from "./errors.ts";
import { pageSize } from "./paging.ts";
import {
  type Env,
  parseS3Url,
  type S3Location,
  type S3Settings,
  s3SettingsFromEnv,
} from "./s3_config.ts";
import { deadline, DeadlineExceeded, raceSignal } from "./timers.ts";

/** How an {@linkcode S3Bucket} is built. */
export interface S3BucketOptions {
  /** Times every wait; default the system clock. */
  clock?: Clock;
  /** Jitters backoffs; default the system's random source. */
  random?: Random;
  /** Overrides {@linkcode REQUEST_TIMEOUT_MS} (tests of the bounds only). */
  requestTimeoutMs?: number;
  /** Overrides {@linkcode READ_SILENCE_MS} (tests of the bounds only). */
  readSilenceMs?: number;
}

/** Error codes of a request that never left this machine: resending it is safe. */
const NOT_SENT_CODES = new Set([
  "ECONNREFUSED",
  "ENOTFOUND",
  "EAI_AGAIN",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "EADDRNOTAVAIL",
  "ConnectionRefused",
]);

/** The AWS SDK's S3 module (its type only: loadSdk loads it). */
type Sdk = typeof import("npm:@aws-sdk/client-s3@3.1175.0");

let sdk: Promise<Sdk> | undefined;

/** Loads the AWS SDK once per process, at the first request of any S3Bucket. */
function loadSdk(): Promise<Sdk> {
  // deno-lint-ignore no-import-prefix
  sdk ??= import("npm:@aws-sdk/client-s3@3.1175.0");
  return sdk;
}

/** A client and the SDK module its commands come from. */
interface Connection {
  sdk: Sdk;
  client: S3Client;
}

type Op = "GET" | "HEAD" | "PUT" | "DELETE" | "LIST";

/** What a try learned: a result, or why to try again. */
type Outcome<T> =
  | { done: true; value: T }
  | { done: false; error: unknown; resend: "backoff" | "conflict" | "no" };

/**
 * A {@linkcode Bucket} on S3 or an S3-compatible store.
 *
 * @example Opening the bucket of `s3://wasmkeep-demo/prod` on a local moto
 * ```ts
 * import { S3Bucket } from "./s3.ts";
 * const bucket = S3Bucket.fromUrl("s3://wasmkeep-demo/prod", {
 *   AWS_ENDPOINT: "http://127.0.0.1:5055", AWS_ALLOW_HTTP: "true",
 *   AWS_ACCESS_KEY_ID: "test", AWS_SECRET_ACCESS_KEY: "test",
 * });
 * await bucket.close();
 * ```
 */
export class S3Bucket implements Bucket {
  readonly #location: S3Location;
  readonly #settings: S3Settings;
  readonly #clock: Clock;
  readonly #random: Random;
  readonly #requestTimeoutMs: number;
  readonly #readSilenceMs: number;
  #connection: Promise<Connection> | undefined;

  /** A bucket at `location`, reached with `settings`; the client is made by the first request. */
  constructor(location: S3Location, settings: S3Settings, options: S3BucketOptions = {}) {
    this.#location = location;
    this.#settings = settings;
    this.#clock = options.clock ?? systemClock;
    this.#random = options.random ?? systemRandom;
    this.#requestTimeoutMs = options.requestTimeoutMs ?? REQUEST_TIMEOUT_MS;
    this.#readSilenceMs = options.readSilenceMs ?? READ_SILENCE_MS;
  }

  /**
   * The bucket of `s3://BUCKET[/PREFIX]`, configured from `env`.
   *
   * @example
   * ```ts
   * import { S3Bucket } from "./s3.ts";
   * const bucket = S3Bucket.fromUrl("s3://acme-wasmkeep/prod", Deno.env.toObject());
   * await bucket.close();
   * ```
   */
  static fromUrl(url: string, env: Env, options: S3BucketOptions = {}): S3Bucket {
    return new S3Bucket(parseS3Url(url), s3SettingsFromEnv(env), options);
  }

  /** Reads a whole object, or `null`. */
  get(key: string, options: CallOptions = {}): Promise<StoredObject | null> {
    return this.#call("GET", key, options.signal, async ({ sdk, client }, signal, silence) => {
      const out = await client.send(
        new sdk.GetObjectCommand({ Bucket: this.#location.bucket, Key: this.#fullKey(key) }),
        { abortSignal: signal },
      );
      silence.extend();
      const body = await readBody(
        out.Body as AsyncIterable<Uint8Array> | undefined,
        signal,
        () => silence.extend(),
      );
      return { body, etag: out.ETag ?? "", lastModified: out.LastModified?.getTime() ?? 0 };
    });
  }

  /** Reads an object's metadata, or `null`. */
  head(key: string, options: CallOptions = {}): Promise<ObjectInfo | null> {
    return this.#call("HEAD", key, options.signal, async ({ sdk, client }, signal) => {
      const out = await client.send(
        new sdk.HeadObjectCommand({ Bucket: this.#location.bucket, Key: this.#fullKey(key) }),
        { abortSignal: signal },
      );
      return {
        key,
        etag: out.ETag ?? "",
        size: out.ContentLength ?? 0,
        lastModified: out.LastModified?.getTime() ?? 0,
      };
    });
  }

  /** Writes an object with `If-None-Match: *` or `If-Match` as asked. */
  async put(key: string, body: Uint8Array, options: PutOptions = {}): Promise<{ etag: string }> {
    const etag = await this.#call("PUT", key, options.signal, async ({ sdk, client }, signal) => {
      const out = await client.send(
        new sdk.PutObjectCommand({
          Bucket: this.#location.bucket,
          Key: this.#fullKey(key),
          Body: body,
          ContentLength: body.length,
          IfNoneMatch: options.ifNoneMatch,
          IfMatch: options.ifMatch,
        }),
        { abortSignal: signal },
      );
      return out.ETag ?? "";
    }, options.ifNoneMatch ? "ifNoneMatch" : "ifMatch");
    if (etag === null) throw new PreconditionFailed(key, "ifMatch");
    return { etag };
  }

  /** Deletes an object; with `ifMatch`, only that version. */
  async delete(key: string, options: DeleteOptions = {}): Promise<void> {
    const tries = { mayHaveApplied: false };
    const done = await this.#call(
      "DELETE",
      key,
      options.signal,
      async ({ sdk, client }, signal) => {
        await client.send(
          new sdk.DeleteObjectCommand({
            Bucket: this.#location.bucket,
            Key: this.#fullKey(key),
            IfMatch: options.ifMatch,
          }),
          { abortSignal: signal },
        );
        return true;
      },
      "ifMatch",
      tries,
    );
    if (done === null && options.ifMatch !== undefined) {
      // After a try answered 5xx, the object may be missing because that try
      // deleted it.
      throw new PreconditionFailed(key, "ifMatch", { maybeOwnWrite: tries.mayHaveApplied });
    }
  }

  /** Lists one page in lexicographic order (ListObjectsV2). */
  async list(prefix: string, options: ListOptions = {}): Promise<ListPage> {
    const base = this.#location.prefix;
    const page = await this.#call(
      "LIST",
      prefix,
      options.signal,
      async ({ sdk, client }, signal) => {
        const out = await client.send(
          new sdk.ListObjectsV2Command({
            Bucket: this.#location.bucket,
            Prefix: base + prefix,
            StartAfter: options.startAfter === undefined ? undefined : base + options.startAfter,
            ContinuationToken: options.continuationToken,
            MaxKeys: pageSize(options.maxKeys),
          }),
          { abortSignal: signal },
        );
        return {
          objects: (out.Contents ?? []).map((o) => ({
            key: (o.Key ?? "").slice(base.length),
            etag: o.ETag ?? "",
            size: o.Size ?? 0,
            lastModified: o.LastModified?.getTime() ?? 0,
          })),
          continuationToken: out.IsTruncated ? out.NextContinuationToken : undefined,
        };
      },
    );
    return page ?? { objects: [] };
  }

  /** Closes the client's connections. */
  async close(): Promise<void> {
    const connection = this.#connection;
    if (connection === undefined) return;
    // A client that failed to load has nothing to close.
    const opened = await connection.catch(() => undefined);
    opened?.client.destroy();
  }

  /** The SDK and a client, made at the first request. */
  #connect(): Promise<Connection> {
    this.#connection ??= loadSdk().then((sdk) => ({ sdk, client: newClient(sdk, this.#settings) }));
    return this.#connection;
  }

  #fullKey(key: string): string {
    return this.#location.prefix + key;
  }

  /**
   * Runs `request` with the bounds, resending as the module says. Resolves to
   * `null` when the store answers 404 for the key; `report.mayHaveApplied`
   * then says whether an earlier try of a write was answered 5xx.
   */
  async #call<T>(
    op: Op,
    key: string,
    signal: AbortSignal | undefined,
    request: (
      connection: Connection,
      signal: AbortSignal,
      silence: { extend(): void },
    ) => Promise<T>,
    condition: "ifNoneMatch" | "ifMatch" = "ifMatch",
    report: { mayHaveApplied: boolean } = { mayHaveApplied: false },
  ): Promise<T | null> {
    const write = op === "PUT" || op === "DELETE";
    let tries = 0, conflicts = 0;
    let mayHaveApplied = false;
    const connection = await this.#connect();
    while (true) {
      signal?.throwIfAborted();
      tries++;
      const total = deadline(this.#clock, this.#requestTimeoutMs, `${op} ${key}`, signal);
      const silence = write
        ? undefined
        : deadline(this.#clock, this.#readSilenceMs, `${op} ${key}`, total.signal);
      const outcome: Outcome<T | null> = await request(
        connection,
        silence?.signal ?? total.signal,
        {
          extend: () => silence?.extend(),
        },
      ).then(
        (value) => ({ done: true as const, value }),
        (error) => classify<T>(error, op, signal),
      ).finally(() => {
        silence?.done();
        total.done();
      });
      if (outcome.done) {
        report.mayHaveApplied = mayHaveApplied;
        return outcome.value;
      }
      const error = outcome.error;
      if (error instanceof PreconditionFailed || isStatus(error, 412)) {
        throw new PreconditionFailed(key, condition, {
          maybeOwnWrite: mayHaveApplied,
          cause: error,
        });
      }
      if (outcome.resend === "conflict" && ++conflicts < CONFLICT_MAX_TRIES) {
        tries--;
        await this.#clock.sleep(this.#jitter(CONFLICT_RETRY_MS, conflicts), signal);
        continue;
      }
      // A write answered 5xx may have been applied before the store failed.
      if (write && statusOf(error) !== undefined && statusOf(error)! >= 500) mayHaveApplied = true;
      if (outcome.resend === "backoff" && tries < CLIENT_MAX_TRIES) {
        await this.#clock.sleep(this.#jitter(CLIENT_RETRY_BASE_MS, tries), signal);
        continue;
      }
      throw toBucketError(error, op, this.#fullKey(key), write, mayHaveApplied);
    }
  }

  /** Full jitter over an exponential backoff. */
  #jitter(baseMs: number, attempt: number): number {
    return this.#random.next() * baseMs * 2 ** (attempt - 1);
  }
}

/** An S3 client with the SDK's own retries and guesses turned off. */
function newClient(sdk: Sdk, settings: S3Settings): S3Client {
  return new sdk.S3Client({
    region: settings.region,
    endpoint: settings.endpoint,
    forcePathStyle: settings.endpoint !== undefined,
    // Left out, the SDK would run its default chain (~/.aws, SSO, container
    // and instance metadata): only where the user opted in (s3_config.ts).
    credentials: settings.credentials === "default-chain" ? undefined : settings.credentials,
    // Not "auto", which AWS_DEFAULTS_MODE or ~/.aws/config may ask for: it
    // asks the instance metadata service for the region.
    defaultsMode: "legacy",
    // The endpoint is the AWS_ENDPOINT variables' (s3_config.ts), never an
    // endpoint_url from ~/.aws/config, which would skip the plain-http check.
    ignoreConfiguredEndpointUrls: true,
    maxAttempts: 1,
    // Checksums by default are refused by some S3-compatible stores; conditions need none.
    requestChecksumCalculation: "WHEN_REQUIRED",
    responseChecksumValidation: "WHEN_REQUIRED",
  });
}

/** Decides what a failed try means; 404 for a key is an answer, not a failure. */
function classify<T>(error: unknown, op: Op, signal?: AbortSignal): Outcome<T | null> {
  if (signal?.aborted) throw signal.reason;
  const status = statusOf(error);
  const write = op === "PUT" || op === "DELETE";
  if (status === 404 && !isCode(error, "NoSuchBucket")) return { done: true, value: null };
  if (status === 409 && isCode(error, "ConditionalRequestConflict")) {
    return { done: false, error, resend: "conflict" };
  }
  if (status !== undefined) {
    const transient = status === 408 || status === 429 || (status >= 500 && status !== 501);
    return { done: false, error, resend: transient ? "backoff" : "no" };
  }
  // No answer: a timeout, a silence, a broken connection, or a request never sent.
  if (!write || notSent(error)) return { done: false, error, resend: "backoff" };
  return { done: false, error, resend: "no" };
}

function toBucketError(
  error: unknown,
  op: Op,
  key: string,
  write: boolean,
  mayHaveApplied: boolean,
): Error {
  const status = statusOf(error);
  const transient = status === undefined || status === 408 || status === 429 ||
    (status >= 500 && status !== 501);
  const what = `${op} ${key}`;
  // A write an earlier try of which was answered 5xx may have been applied,
  // whatever the last try was answered: that must not be lost.
  if (!transient && !(write && mayHaveApplied)) {
    const code = codeOf(error);
    return new BucketRequestError(
      `${what}: ${status} ${code ?? ""} ${describeError(error)}`.trim(),
      {
        status,
        code,
        cause: error,
      },
    );
  }
  const ambiguous = write && (mayHaveApplied || (status === undefined && !notSent(error)));
  const why = !transient
    ? `${status} ${codeOf(error) ?? ""}, after a try answered 5xx that may have been applied`
    : status !== undefined
    ? `${status} ${codeOf(error) ?? ""}`.trim()
    : error instanceof DeadlineExceeded
    ? error.message
    : `no answer (${describeError(error)})`;
  return new BucketUnavailable(`${what}: ${why}`, { ambiguous, status, cause: error });
}

/** Reads a response body chunk by chunk, so silence between chunks is noticed. */
async function readBody(
  body: AsyncIterable<Uint8Array> | undefined,
  signal: AbortSignal,
  onChunk: () => void,
): Promise<Uint8Array> {
  if (!body) return new Uint8Array();
  const chunks: Uint8Array[] = [];
  const iterator = body[Symbol.asyncIterator]();
  try {
    while (true) {
      const next = await raceSignal(iterator.next(), signal);
      if (next.done) break;
      chunks.push(next.value);
      onChunk();
    }
  } catch (e) {
    (body as { destroy?: () => void }).destroy?.();
    throw e;
  }
  const out = new Uint8Array(chunks.reduce((n, c) => n + c.length, 0));
  let at = 0;
  for (const chunk of chunks) {
    out.set(chunk, at);
    at += chunk.length;
  }
  return out;
}

function statusOf(error: unknown): number | undefined {
  const status = (error as { $metadata?: { httpStatusCode?: number } })?.$metadata?.httpStatusCode;
  return typeof status === "number" ? status : undefined;
}

function isStatus(error: unknown, status: number): boolean {
  return statusOf(error) === status;
}

function codeOf(error: unknown): string | undefined {
  const e = error as { Code?: string; name?: string } | undefined;
  return e?.Code ?? e?.name;
}

function isCode(error: unknown, code: string): boolean {
  return codeOf(error) === code;
}

/** True when the request provably never reached the store. */
function notSent(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e && depth < 4; depth++) {
    const code = (e as { code?: string }).code;
    if (code && NOT_SENT_CODES.has(code)) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}
