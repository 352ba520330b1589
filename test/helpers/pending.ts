/**
 * Whether a promise is still pending once the promise chains that are
 * ready have run: for tests that check nothing happened before its time.
 *
 * @module
 */

/**
 * Whether `promise` is still pending after the ready promise chains ran.
 *
 * @example
 * ```ts ignore
 * assert.ok(await pending(read), "nothing arrives before the delay");
 * ```
 */
export async function pending(promise: Promise<unknown>): Promise<boolean> {
  let settled = false;
  promise.then(() => settled = true, () => settled = true);
  for (let i = 0; i < 50; i++) await Promise.resolve();
  return !settled;
}
