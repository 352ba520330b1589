/**
 * A small command-line parser: flags declared once give both the parsing and
 * the help text. Used instead of `@std/cli`, which lives on JSR (see
 * docs/dependencies.md). Errors name the flag and what would fix it.
 *
 * @module
 */

/** One flag of a command. */
export interface FlagSpec {
  /** Name without the leading dashes. */
  name: string;
  /** One letter that also gives a boolean flag after one dash: `h` for `-h`. */
  short?: string;
  /** `string` flags take a value; `boolean` flags take none. */
  kind: "string" | "integer" | "boolean";
  /** May be given several times; values are collected in order. */
  multiple?: boolean;
  /** Placeholder of the value in the help text. */
  value?: string;
  /** Smallest value accepted, for integers. */
  min?: number;
  /** Largest value accepted, for integers. */
  max?: number;
  description: string;
  /** Shown in the help text; not applied by the parser. */
  defaultText?: string;
}

/** Parsed flags and positional arguments. */
export interface ParsedArgs {
  flags: Record<string, string | number | boolean | string[] | undefined>;
  positionals: string[];
}

/** A usage error: the CLI prints it and exits with status 2. */
export class UsageError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "UsageError";
  }
}

/**
 * Parses `args` against `specs`.
 *
 * @example
 * ```ts
 * import { parseArgs } from "./args.ts";
 * const parsed = parseArgs(["--listen", ":8080", "app.wasm"], [
 *   { name: "listen", kind: "string", description: "address" },
 * ], "serve");
 * parsed.flags.listen; // ":8080"
 * ```
 */
export function parseArgs(args: string[], specs: FlagSpec[], command: string): ParsedArgs {
  const byName = new Map(specs.map((spec) => [spec.name, spec]));
  const byShort = new Map(
    specs.filter((spec) => spec.short && spec.kind === "boolean").map((spec) => [
      `-${spec.short}`,
      spec,
    ]),
  );
  const flags: ParsedArgs["flags"] = {};
  const positionals: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    if (arg === "--") {
      positionals.push(...args.slice(i + 1));
      break;
    }
    const short = byShort.get(arg);
    if (short) {
      flags[short.name] = true;
      continue;
    }
    if (!arg.startsWith("--") || arg === "--") {
      if (arg.startsWith("-") && arg !== "-") {
        throw new UsageError(
          `unknown flag ${arg} for '${command}'; flags start with two dashes (see wasmkeep ${command} --help)`,
        );
      }
      positionals.push(arg);
      continue;
    }
    const eq = arg.indexOf("=");
    const name = arg.slice(2, eq === -1 ? undefined : eq);
    const spec = byName.get(name);
    if (!spec) {
      throw new UsageError(
        `unknown flag --${name} for '${command}' (see wasmkeep ${command} --help)`,
      );
    }
    let raw: string | undefined = eq === -1 ? undefined : arg.slice(eq + 1);
    if (spec.kind === "boolean") {
      if (raw !== undefined) throw new UsageError(`--${name} takes no value`);
      flags[name] = true;
      continue;
    }
    if (raw === undefined) {
      if (i + 1 >= args.length) {
        throw new UsageError(`--${name} needs a value: --${name} ${spec.value ?? "VALUE"}`);
      }
      raw = args[++i];
    }
    let value: string | number = raw;
    if (spec.kind === "integer") {
      if (!/^\d+$/.test(raw)) {
        throw new UsageError(`--${name} must be a whole number, not '${raw}'`);
      }
      value = Number(raw);
      if (spec.min !== undefined && value < spec.min) {
        throw new UsageError(`--${name} must be at least ${spec.min}, not ${raw}`);
      }
      if (spec.max !== undefined && value > spec.max) {
        throw new UsageError(`--${name} must be at most ${spec.max}, not ${raw}`);
      }
    }
    if (spec.multiple) {
      ((flags[name] ??= []) as string[]).push(String(value));
    } else {
      if (flags[name] !== undefined) {
        throw new UsageError(`--${name} was given twice; give it once`);
      }
      flags[name] = value;
    }
  }
  return { flags, positionals };
}

/**
 * Formats the help text of a command.
 *
 * @example
 * ```ts
 * import { formatHelp } from "./args.ts";
 * formatHelp("wasmkeep version", "Prints the version.", []);
 * ```
 */
export function formatHelp(usage: string, summary: string, specs: FlagSpec[]): string {
  const lines = [`Usage: ${usage}`, "", summary];
  if (specs.length > 0) {
    lines.push("", "Flags:");
    const left = specs.map((spec) =>
      `  ${spec.short && spec.kind === "boolean" ? `-${spec.short}, ` : ""}--${spec.name}${
        spec.kind === "boolean" ? "" : ` ${spec.value ?? "VALUE"}`
      }`
    );
    const width = Math.max(...left.map((l) => l.length)) + 2;
    specs.forEach((spec, i) => {
      const extra = [
        spec.multiple ? "repeatable" : undefined,
        spec.defaultText ? `default ${spec.defaultText}` : undefined,
      ].filter(Boolean).join("; ");
      lines.push(`${left[i].padEnd(width)}${spec.description}${extra ? ` (${extra})` : ""}`);
    });
  }
  return lines.join("\n");
}
