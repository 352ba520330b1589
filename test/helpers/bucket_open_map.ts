/**
 * An import map that sends `src/bucket/open.ts` to a test's stand-in, so a
 * process started with it (a node, an executor) opens its bucket through
 * the test's wrapper; every other import resolves as `deno.json` says.
 *
 * @module
 */

/** Writes the map as `dir/name` and returns its path; `standIn` is the stand-in module's URL. */
export function bucketOpenImportMap(dir: string, name: string, standIn: string): string {
  const config = JSON.parse(
    Deno.readTextFileSync(new URL("../../deno.json", import.meta.url)),
  ) as { imports: Record<string, string> };
  const map = `${dir}/${name}`;
  Deno.writeTextFileSync(
    map,
    JSON.stringify({
      imports: {
        ...config.imports,
        [new URL("../../src/bucket/open.ts", import.meta.url).href]: standIn,
      },
    }),
  );
  return map;
}
