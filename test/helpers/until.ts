/**
 * Waiting in tests for something a real process does in its own time.
 *
 * @module
 */

/**
 * Resolves once `check` answers true, tried every 100 ms; throws naming
 * `what` after `ms`.
 *
 * @example
 * ```ts ignore
 * await until("the alarm fired", async () => (await rows(url)).includes("alarm"));
 * ```
 */
export async function until(
  what: string,
  check: () => Promise<boolean> | boolean,
  ms = 15_000,
): Promise<void> {
  const deadline = Date.now() + ms;
  while (!await check()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
