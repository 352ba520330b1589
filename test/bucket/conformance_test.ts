import { conformance } from "./conformance.ts";
import { MemoryBucket } from "../../src/bucket/memory.ts";
import { FileBucket } from "../../src/bucket/file.ts";
import { S3Bucket } from "../../src/bucket/s3.ts";
import { startMoto } from "../../src/testing/moto.ts";

Deno.test("conformance: MemoryBucket", (t) => conformance(t, new MemoryBucket()));

Deno.test("conformance: FileBucket", async (t) => {
  const dir = await Deno.makeTempDir({ prefix: "wasmkeep-file-bucket-" });
  try {
    await conformance(t, new FileBucket(dir));
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
});

Deno.test("conformance: S3Bucket on moto", async (t) => {
  const moto = await startMoto();
  const bucket = S3Bucket.fromUrl(`s3://${moto.bucket}/cluster-a`, moto.env);
  try {
    await conformance(t, bucket);
  } finally {
    await bucket.close();
    await moto.stop();
  }
});
