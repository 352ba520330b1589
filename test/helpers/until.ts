/**
 * Waiting in tests for something done in its own time: by a real process, a
 * server on loopback, a timer. The one polling helper of the tests.
 *
 * @module
 */

/** How long {@linkcode until} waits, how often it looks, and what it adds to its failure. */
export interface UntilOptions {
  /** Gives up after this many milliseconds (15,000 by default). */
  ms?: number;
  /** Looks again after this many milliseconds (100 by default). */
  everyMs?: number;
  /** Text added to the failure on its own lines, such as a process's log so far. */
  detail?: () => string;
}

/**
 * Resolves once `check` answers true, tried at once and then every
 * `everyMs`; throws naming `what` after `ms`. A number in place of the
 * options is `ms`.
 *
 * @example
 * ```ts ignore
 * await until("the alarm fired", async () => (await rows(url)).includes("alarm"));
 * await until("the server saw the close", () => server.closed === 1, { ms: 3_000, everyMs: 5 });
 * await until("node ready", () => /node ready/.test(log), { ms: 30_000, detail: () => log });
 * ```
 */
export async function until(
  what: string,
  check: () => Promise<boolean> | boolean,
  options: number | UntilOptions = {},
): Promise<void> {
  const { ms = 15_000, everyMs = 100, detail } = typeof options === "number"
    ? { ms: options }
    : options;
  const deadline = Date.now() + ms;
  while (!await check()) {
    if (Date.now() > deadline) {
      const more = detail ? `\n${detail()}` : "";
      throw new Error(`timed out after ${ms} ms waiting for ${what}${more}`);
    }
    await new Promise((resolve) => setTimeout(resolve, everyMs));
  }
}
