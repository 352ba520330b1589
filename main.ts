/**
 * The `wasmkeep` command: `deno run -A jsr:@wasmkeep/cli serve ...`.
 *
 * @module
 */

import { runCli } from "./cli/main.ts";

if (import.meta.main) {
  Deno.exit(await runCli(Deno.args));
}
