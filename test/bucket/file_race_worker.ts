/**
 * One of the processes racing to create a key in a file bucket: says
 * `ready`, waits for a line on stdin, makes its creates at once, prints how
 * many it won.
 *
 * Usage: deno run -A file_race_worker.ts DIR KEY WRITES NAME
 *
 * @module
 */

import { FileBucket } from "../../src/bucket/file.ts";
import { PreconditionFailed } from "../../src/bucket/errors.ts";

const [dir, key, writes, name] = Deno.args;
const bucket = new FileBucket(dir);
console.log("ready");
const reader = Deno.stdin.readable.getReader();
await reader.read();
reader.releaseLock();
const results = await Promise.allSettled(
  Array.from(
    { length: Number(writes) },
    (_, i) => bucket.put(key, new TextEncoder().encode(`${name} ${i}`), { ifNoneMatch: "*" }),
  ),
);
const failures = results.filter((r) =>
  r.status === "rejected" && !(r.reason instanceof PreconditionFailed)
);
for (const f of failures) console.error((f as PromiseRejectedResult).reason);
console.log(JSON.stringify({
  won: results.flatMap((r, i) => r.status === "fulfilled" ? [`${name} ${i}`] : []),
  failures: failures.length,
}));
