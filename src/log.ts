/**
 * A small structured logger: one line per record on stderr, `key=value`
 * fields after the message. Used instead of `@std/log`, which lives on JSR
 * (see docs/dependencies.md).
 *
 * @module
 */

/** Log levels, lowest first. */
export type LogLevel = "debug" | "info" | "warn" | "error";

const LEVEL_ORDER: Record<LogLevel, number> = { debug: 0, info: 1, warn: 2, error: 3 };

/** Extra fields of a log record. */
export type LogFields = Record<string, string | number | boolean | bigint | undefined | null>;

/**
 * Where log records go.
 *
 * @example
 * ```ts
 * import { createLogger } from "./log.ts";
 * const log = createLogger({ level: "info" });
 * log.info("node started", { node: "a" });
 * ```
 */
export interface Logger {
  /** Logs a record at level `debug` (dropped at the default level). */
  debug(message: string, fields?: LogFields): void;
  /** Logs a record at level `info`. */
  info(message: string, fields?: LogFields): void;
  /** Logs a record at level `warn`. */
  warn(message: string, fields?: LogFields): void;
  /** Logs a record at level `error`. */
  error(message: string, fields?: LogFields): void;
  /** A logger that adds `fields` to every record. */
  with(fields: LogFields): Logger;
}

/** Options of {@linkcode createLogger}. */
export interface LoggerOptions {
  /** Records below this level are dropped; default `info`. */
  level?: LogLevel;
  /** Receives each formatted line; default writes to stderr. */
  sink?: (line: string) => void;
  /** Timestamps; default the system clock. */
  now?: () => number;
}

function formatValue(value: string | number | boolean | bigint): string {
  const text = String(value);
  return /^[^\s"=]+$/.test(text) ? text : JSON.stringify(text);
}

/**
 * Creates a logger writing `time level message key=value…` lines.
 *
 * @example
 * ```ts
 * import { createLogger } from "./log.ts";
 * const lines: string[] = [];
 * createLogger({ sink: (l) => lines.push(l) }).warn("slow", { ms: 12 });
 * ```
 */
export function createLogger(options: LoggerOptions = {}, base: LogFields = {}): Logger {
  const threshold = LEVEL_ORDER[options.level ?? "info"];
  const encoder = new TextEncoder();
  const sink = options.sink ??
    ((line: string) => Deno.stderr.writeSync(encoder.encode(line + "\n")));
  const now = options.now ?? Date.now;
  const write = (level: LogLevel, message: string, fields?: LogFields) => {
    if (LEVEL_ORDER[level] < threshold) return;
    let line = `${new Date(now()).toISOString()} ${level.toUpperCase().padEnd(5)} ${message}`;
    for (const [key, value] of Object.entries({ ...base, ...fields })) {
      if (value !== undefined && value !== null) line += ` ${key}=${formatValue(value)}`;
    }
    sink(line);
  };
  return {
    debug: (m, f) => write("debug", m, f),
    info: (m, f) => write("info", m, f),
    warn: (m, f) => write("warn", m, f),
    error: (m, f) => write("error", m, f),
    with: (fields) => createLogger(options, { ...base, ...fields }),
  };
}
