/**
 * Configuration files of actor classes: `NAME=VALUE` lines, `#` comments and
 * blank lines ignored, values optionally in double quotes (with `\n`, `\"`
 * and `\\` escapes) or single quotes (taken as they are).
 *
 * @module
 */

/** Largest configuration file accepted. */
export const MAX_CONFIG_FILE_BYTES = 1024 * 1024;

const NAME = /^[A-Za-z_][A-Za-z0-9_.-]*$/;

/**
 * Parses a configuration file's text. Throws an error naming the line for
 * anything that is not a comment, a blank line or `NAME=VALUE`.
 *
 * @example
 * ```ts
 * import { parseEnvFile } from "./env_file.ts";
 * parseEnvFile("GREETING=hello\n# comment\nQUOTED=\"a b\"\n"); // { GREETING: "hello", QUOTED: "a b" }
 * ```
 */
export function parseEnvFile(text: string): Record<string, string> {
  const values: Record<string, string> = {};
  text.split(/\r?\n/).forEach((line, index) => {
    const trimmed = line.trim();
    if (trimmed === "" || trimmed.startsWith("#")) return;
    const eq = trimmed.indexOf("=");
    const name = eq === -1 ? "" : trimmed.slice(0, eq).trim().replace(/^export\s+/, "");
    if (!NAME.test(name)) throw new Error(`line ${index + 1}: expected NAME=VALUE`);
    let value = trimmed.slice(eq + 1).trim();
    if (value.length >= 2 && value.startsWith('"') && value.endsWith('"')) {
      value = value.slice(1, -1).replace(/\\(["\\n])/g, (_, c) => c === "n" ? "\n" : c);
    } else if (value.length >= 2 && value.startsWith("'") && value.endsWith("'")) {
      value = value.slice(1, -1);
    }
    values[name] = value;
  });
  return values;
}
