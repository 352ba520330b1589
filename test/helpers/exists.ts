/**
 * Whether a file or directory exists at `path`.
 *
 * @example
 * ```ts ignore
 * exists("/tmp"); // true
 * ```
 */
export function exists(path: string): boolean {
  try {
    Deno.statSync(path);
    return true;
  } catch {
    return false;
  }
}
