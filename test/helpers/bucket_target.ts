/**
 * One test body on either store the done-when lists ask for: the file
 * bucket, or a real S3 server (moto) started for the test.
 *
 * @module
 */

import { scratchDir } from "../../src/testing/cluster.ts";
import { startMoto } from "../../src/testing/moto.ts";

/** A bucket the test's processes reach, and the environment they reach it with. */
export interface BucketTarget {
  /** The bucket URL, at the prefix the test asked for. */
  url: string;
  env: Record<string, string>;
  /** The URL of another prefix of the same store (another cluster). */
  at(prefix: string): string;
}

/**
 * Runs `body` against a fresh `kind` bucket at `prefix`, with a scratch
 * directory of its own; both are gone afterwards.
 *
 * @example
 * ```ts ignore
 * Deno.test("on moto", () => onBucket("moto", "prod", (bucket, dir) => deployCycle(bucket, dir)));
 * ```
 */
export async function onBucket(
  kind: "file" | "moto",
  prefix: string,
  body: (target: BucketTarget, dir: string) => Promise<void>,
): Promise<void> {
  const dir = await scratchDir(`wk-${kind}-bucket-`);
  let moto: Awaited<ReturnType<typeof startMoto>> | undefined;
  try {
    moto = kind === "moto" ? await startMoto() : undefined;
    const at = (where: string) =>
      moto ? `s3://${moto.bucket}/${where}` : `file://${dir}/bucket-${where}`;
    const env: Record<string, string> = moto
      ? { ...moto.env, AWS_EC2_METADATA_DISABLED: "true" }
      : {};
    await body({ url: at(prefix), env, at }, dir);
  } finally {
    await moto?.stop();
    await Deno.remove(dir, { recursive: true });
  }
}
