/**
 * A deployed version and the app's `current` (ADR 0008): what `wasmkeep
 * deploy` writes and nodes following the app read.
 *
 * A version is one JSON object, `apps/<tenant>/<app>/versions/<id>`, whose
 * id is the first 16 hex digits of the SHA-256 of its bytes: its classes
 * (each a component by the SHA-256 of its bytes, under `components/`, with
 * its access rule, configuration and required names), a link to the
 * version before it, and its seq. `current` names the version nodes serve,
 * `{"version":"<id>","seq":<n>}`, and moves only by a conditional write.
 *
 * @module
 */

import { type AccessRule, formatAccessRule, OPEN, parseAccessRule } from "./access_rule.ts";
import { classNameProblem } from "../actors/key.ts";

/** The format a version is written in; a node refuses any other. */
export const VERSION_FORMAT = 1;

/** Largest version object read: every class's configuration is in it. */
export const MAX_VERSION_BYTES = 4 * 1024 * 1024;

/** Largest `current` object read. */
export const MAX_CURRENT_BYTES = 4096;

/** Most classes one version carries. */
export const MAX_APP_CLASSES = 256;

/** One class of a version. */
export interface ClassVersion {
  /** Hex SHA-256 of the component's bytes (its object under `components/`). */
  component: string;
  /** The component's size in bytes. */
  size: number;
  /** The class's access rule; `open` when it has none. */
  access: AccessRule;
  /** Named values `config.get` returns, as parsed from `--config`. */
  config: Record<string, string>;
  /** Names that must be set before the class runs (`--requires`). */
  requires: string[];
}

/** A deployed version. */
export interface AppVersion {
  /** `tenant/app`. */
  app: string;
  /** One more than the seq of the version that was current when it was written. */
  seq: number;
  /**
   * The line of deploys it belongs to: 16 hex digits drawn by the first
   * deploy of an app (one that found no `current`), kept by every deploy
   * and rollback after it. An actor's seq counts within its line: the next
   * app of a tenant, or an app deployed again after its `current` was
   * deleted, starts a line of its own at seq 1. Absent in versions
   * written before lines.
   */
  line?: string;
  /** The version it follows in the line of previous links; `null` for the first. */
  previous: string | null;
  /** For a rollback: the version it stepped back from (never collected). */
  rolledBackFrom?: string;
  /**
   * Whether this version or one before it deployed access rules or
   * configuration (ADR 0013): from then on a node's `--access` is refused.
   */
  rulesDeployed: boolean;
  /** When the deploy wrote it, on the deploying machine's clock (ms since the epoch). */
  writtenAt: number;
  classes: Record<string, ClassVersion>;
}

/** What `current` says. */
export interface AppCurrent {
  /** The id of the version served. */
  version: string;
  seq: number;
}

/** A version or `current` that cannot be read: the message names the object and why. */
export class ManifestError extends Error {
  /**
   * @example
   * ```ts
   * import { ManifestError } from "./manifest.ts";
   * new ManifestError("apps/acme/shop/current", "not JSON").message;
   * ```
   */
  constructor(readonly key: string, readonly problem: string) {
    super(`${key} cannot be read: ${problem}`);
    this.name = "ManifestError";
  }
}

const HEX64 = /^[0-9a-f]{64}$/;
const VERSION_ID = /^[0-9a-f]{16}$/;

/**
 * Whether `id` is a version id: 16 lower-case hex digits.
 *
 * @example
 * ```ts
 * import { isVersionId } from "./manifest.ts";
 * isVersionId("9cf4de9152d8dd29"); // true
 * ```
 */
export function isVersionId(id: string): boolean {
  return VERSION_ID.test(id);
}

async function sha256Hex(bytes: Uint8Array): Promise<string> {
  const digest = await crypto.subtle.digest("SHA-256", bytes as Uint8Array<ArrayBuffer>);
  return Array.from(new Uint8Array(digest), (b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * Hex SHA-256 of a component's bytes: its name under `components/`.
 *
 * @example
 * ```ts
 * import { componentHash } from "./manifest.ts";
 * await componentHash(new Uint8Array([0])); // "6e340b9c..."
 * ```
 */
export function componentHash(bytes: Uint8Array): Promise<string> {
  return sha256Hex(bytes);
}

function sortedRecord<T>(record: Record<string, T>): Record<string, T> {
  return Object.fromEntries(Object.entries(record).sort(([a], [b]) => a < b ? -1 : 1));
}

/**
 * The bytes of a version and its id. Classes and values are written in
 * name order, so one content has one id.
 *
 * @example
 * ```ts
 * import { encodeVersion } from "./manifest.ts";
 * const { id } = await encodeVersion({ app: "acme/shop", seq: 1, previous: null,
 *   rulesDeployed: false, writtenAt: 0, classes: {} });
 * ```
 */
export async function encodeVersion(
  version: AppVersion,
): Promise<{ id: string; bytes: Uint8Array }> {
  const classes: Record<string, unknown> = {};
  for (const [name, c] of Object.entries(sortedRecord(version.classes))) {
    classes[name] = {
      component: c.component,
      size: c.size,
      access: formatAccessRule(c.access),
      config: sortedRecord(c.config),
      requires: [...c.requires].sort(),
    };
  }
  const json = {
    format: VERSION_FORMAT,
    app: version.app,
    seq: version.seq,
    ...(version.line !== undefined ? { line: version.line } : {}),
    previous: version.previous,
    ...(version.rolledBackFrom ? { rolledBackFrom: version.rolledBackFrom } : {}),
    rulesDeployed: version.rulesDeployed,
    writtenAt: version.writtenAt,
    classes,
  };
  const bytes = new TextEncoder().encode(JSON.stringify(json, null, 1) + "\n");
  return { id: (await sha256Hex(bytes)).slice(0, 16), bytes };
}

function parseJson(bytes: Uint8Array, key: string, max: number): Record<string, unknown> {
  if (bytes.length > max) throw new ManifestError(key, `larger than ${max} bytes`);
  let value: unknown;
  try {
    value = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch {
    throw new ManifestError(key, "not JSON");
  }
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    throw new ManifestError(key, "not a JSON object");
  }
  return value as Record<string, unknown>;
}

const isSeq = (value: unknown): value is number =>
  typeof value === "number" && Number.isSafeInteger(value) && value >= 1;

/**
 * Reads a version; `key` names it in errors. A version of another format,
 * or one whose fields are not what {@linkcode encodeVersion} writes, is
 * refused (a node keeps the version it has).
 *
 * @example
 * ```ts
 * import { decodeVersion, encodeVersion } from "./manifest.ts";
 * const { bytes } = await encodeVersion({ app: "acme/shop", seq: 1, previous: null,
 *   rulesDeployed: false, writtenAt: 0, classes: {} });
 * decodeVersion(bytes, "apps/acme/shop/versions/x").seq; // 1
 * ```
 */
export function decodeVersion(bytes: Uint8Array, key: string): AppVersion {
  const json = parseJson(bytes, key, MAX_VERSION_BYTES);
  if (json.format !== VERSION_FORMAT) {
    throw new ManifestError(
      key,
      `format ${JSON.stringify(json.format)}, not ${VERSION_FORMAT} (written by another WasmKeep?)`,
    );
  }
  if (typeof json.app !== "string") throw new ManifestError(key, "no app");
  if (!isSeq(json.seq)) throw new ManifestError(key, "the seq is not a positive integer");
  if (json.line !== undefined && (typeof json.line !== "string" || !isVersionId(json.line))) {
    throw new ManifestError(key, "the line is not 16 hex digits");
  }
  if (
    json.previous !== null && (typeof json.previous !== "string" || !isVersionId(json.previous))
  ) {
    throw new ManifestError(key, "previous is not a version id");
  }
  if (
    json.rolledBackFrom !== undefined &&
    (typeof json.rolledBackFrom !== "string" || !isVersionId(json.rolledBackFrom))
  ) {
    throw new ManifestError(key, "rolledBackFrom is not a version id");
  }
  if (typeof json.rulesDeployed !== "boolean") throw new ManifestError(key, "no rulesDeployed");
  if (typeof json.writtenAt !== "number" || !Number.isFinite(json.writtenAt)) {
    throw new ManifestError(key, "no writtenAt");
  }
  const raw = json.classes;
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) {
    throw new ManifestError(key, "no classes");
  }
  const entries = Object.entries(raw as Record<string, unknown>);
  if (entries.length > MAX_APP_CLASSES) {
    throw new ManifestError(key, `more than ${MAX_APP_CLASSES} classes`);
  }
  const classes: Record<string, ClassVersion> = {};
  for (const [name, value] of entries) {
    classes[name] = decodeClass(key, name, value);
  }
  return {
    app: json.app,
    seq: json.seq,
    ...(json.line !== undefined ? { line: json.line as string } : {}),
    previous: json.previous as string | null,
    ...(json.rolledBackFrom ? { rolledBackFrom: json.rolledBackFrom as string } : {}),
    rulesDeployed: json.rulesDeployed,
    writtenAt: json.writtenAt,
    classes,
  };
}

function decodeClass(key: string, name: string, value: unknown): ClassVersion {
  const problem = classNameProblem(name);
  if (problem) throw new ManifestError(key, `class '${name}': ${problem}`);
  if (typeof value !== "object" || value === null) {
    throw new ManifestError(key, `class '${name}' is not an object`);
  }
  const c = value as Record<string, unknown>;
  if (typeof c.component !== "string" || !HEX64.test(c.component)) {
    throw new ManifestError(key, `class '${name}' names no component`);
  }
  if (typeof c.size !== "number" || !Number.isSafeInteger(c.size) || c.size < 0) {
    throw new ManifestError(key, `class '${name}' has no size`);
  }
  let access = OPEN;
  try {
    access = parseAccessRule(String(c.access ?? "open"));
  } catch (error) {
    throw new ManifestError(key, `class '${name}': ${(error as Error).message}`);
  }
  const config = c.config ?? {};
  if (
    typeof config !== "object" || config === null || Array.isArray(config) ||
    !Object.values(config).every((v) => typeof v === "string")
  ) {
    throw new ManifestError(key, `class '${name}': config is not names and strings`);
  }
  const requires = c.requires ?? [];
  if (!Array.isArray(requires) || !requires.every((n) => typeof n === "string")) {
    throw new ManifestError(key, `class '${name}': requires is not a list of names`);
  }
  return {
    component: c.component,
    size: c.size,
    access,
    config: config as Record<string, string>,
    requires: requires as string[],
  };
}

/**
 * The bytes of `current`.
 *
 * @example
 * ```ts
 * import { encodeCurrent } from "./manifest.ts";
 * new TextDecoder().decode(encodeCurrent({ version: "9cf4de9152d8dd29", seq: 1 }));
 * // '{"version":"9cf4de9152d8dd29","seq":1}\n'
 * ```
 */
export function encodeCurrent(current: AppCurrent): Uint8Array {
  return new TextEncoder().encode(
    JSON.stringify({ version: current.version, seq: current.seq }) + "\n",
  );
}

/**
 * Reads `current`; `key` names it in errors.
 *
 * @example
 * ```ts
 * import { decodeCurrent, encodeCurrent } from "./manifest.ts";
 * decodeCurrent(encodeCurrent({ version: "9cf4de9152d8dd29", seq: 2 }), "current").seq; // 2
 * ```
 */
export function decodeCurrent(bytes: Uint8Array, key: string): AppCurrent {
  const json = parseJson(bytes, key, MAX_CURRENT_BYTES);
  if (typeof json.version !== "string" || !isVersionId(json.version) || !isSeq(json.seq)) {
    throw new ManifestError(key, 'not { "version": "<16 hex digits>", "seq": <n> }');
  }
  return { version: json.version, seq: json.seq };
}
