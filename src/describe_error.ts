/**
 * What a caught error says, as text for a log field, a message or a trace.
 * Anything may be thrown, so a value that is not an `Error` is given as
 * `String(value)`.
 *
 * @module
 */

/**
 * How much of an `Error` {@linkcode describeError} gives: its message, its
 * name and message (`TypeError: ...`, where the kind matters, as in the
 * simulator's traces), or its stack (an actor's failure, which points at code).
 */
export type ErrorForm = "message" | "named" | "stack";

/**
 * An error as text, in `form` (its message by default).
 *
 * @example
 * ```ts
 * import { describeError } from "./describe_error.ts";
 * describeError(new RangeError("too far")); // "too far"
 * describeError(new RangeError("too far"), "named"); // "RangeError: too far"
 * describeError("a string thrown"); // "a string thrown"
 * ```
 */
export function describeError(error: unknown, form: ErrorForm = "message"): string {
  if (!(error instanceof Error)) return String(error);
  if (form === "named") return `${error.name}: ${error.message}`;
  if (form === "stack") return error.stack ?? error.message;
  return error.message;
}
