/**
 * Configuration files of actor classes: `NAME=VALUE` lines, `#` comments and
 * blank lines ignored, values optionally in double quotes (with `\n`, `\"`
 * and `\\` escapes) or single quotes (taken as they are), which must close on
 * their line, then may be followed by a `#` comment. A bare value is taken as
 * it is, to the end of its line. A name may be given once.
 *
 * @module
 */

/** Largest configuration file accepted. */
export const MAX_CONFIG_FILE_BYTES = 1024 * 1024;

/**
 * What a configuration name is: also the names `wasmkeep deploy --requires`
 * takes, so a required name can always be set by a file.
 *
 * @example
 * ```ts
 * import { CONFIG_NAME } from "./env_file.ts";
 * CONFIG_NAME.test("ADMIN_TOKEN"); // true
 * ```
 */
export const CONFIG_NAME: RegExp = /^[A-Za-z_][A-Za-z0-9_.-]*$/;

/**
 * Parses a configuration file's text. Throws an error naming the line for
 * anything that is not a comment, a blank line or `NAME=VALUE`: a quote
 * that is not closed, or text after the closing one other than a `#`
 * comment, and a name given twice. Lines end at LF, CRLF or a lone CR.
 *
 * @example
 * ```ts
 * import { parseEnvFile } from "./env_file.ts";
 * parseEnvFile("GREETING=hello\n# comment\nQUOTED=\"a b\"\n"); // { GREETING: "hello", QUOTED: "a b" }
 * ```
 */
export function parseEnvFile(text: string): Record<string, string> {
  const values: Record<string, string> = {};
  const lines = new Map<string, number>();
  text.split(/\r\n|\r|\n/).forEach((line, index) => {
    const at = `line ${index + 1}`;
    const trimmed = line.trim();
    if (trimmed === "" || trimmed.startsWith("#")) return;
    const eq = trimmed.indexOf("=");
    const name = eq === -1 ? "" : trimmed.slice(0, eq).trim().replace(/^export\s+/, "");
    if (!CONFIG_NAME.test(name)) throw new Error(`${at}: expected NAME=VALUE`);
    const earlier = lines.get(name);
    if (earlier !== undefined) {
      throw new Error(`${at}: ${name} was given on line ${earlier} already`);
    }
    lines.set(name, index + 1);
    values[name] = parseValue(trimmed.slice(eq + 1).trim(), at);
  });
  return values;
}

/** A value: bare, or in double quotes (with escapes) or single quotes, then maybe a `#` comment. */
function parseValue(raw: string, at: string): string {
  const quote = raw[0];
  // A bare value is taken as it is, quotes and # included.
  if (quote !== '"' && quote !== "'") return raw;
  let value = "";
  let i = 1;
  for (; i < raw.length && raw[i] !== quote; i++) {
    if (quote === '"' && raw[i] === "\\" && i + 1 < raw.length && '"\\n'.includes(raw[i + 1])) {
      value += raw[i + 1] === "n" ? "\n" : raw[i + 1];
      i++;
    } else {
      value += raw[i];
    }
  }
  if (i >= raw.length) throw new Error(`${at}: the ${quote} quote is not closed on its line`);
  const after = raw.slice(i + 1).trim();
  if (after !== "" && !after.startsWith("#")) {
    throw new Error(`${at}: text after the closing quote (only a # comment may follow)`);
  }
  return value;
}
