/**
 * A small S3 that keeps its objects (PUT, GET, HEAD, DELETE, with If-Match
 * and If-None-Match as S3 answers them), for the outcomes a scripted fake
 * cannot give: a request applied, then answered 500, then sent again by the
 * client. Each request may be given a fault.
 *
 * @module
 */

/** What happens to one request: applied then answered 500, answered an error unapplied, or served. */
export type Fault = "apply-500" | { status: number; code: string } | undefined;

/** A running server. */
export interface StatefulS3 {
  /** `http://127.0.0.1:PORT`. */
  endpoint: string;
  /** Objects by path (`/<bucket>/<key>`). */
  objects: Map<string, { body: Uint8Array; etag: string }>;
  /** One line per request: method, path, conditions, status. */
  log: string[];
  close(): Promise<void>;
}

async function etagOf(body: Uint8Array): Promise<string> {
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-1", body as BufferSource));
  return `"${Array.from(digest.subarray(0, 16), (b) => b.toString(16).padStart(2, "0")).join("")}"`;
}

function s3Error(status: number, code: string): Response {
  return new Response(
    `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code><Message>${code}</Message><RequestId>r</RequestId></Error>`,
    { status, headers: { "content-type": "application/xml" } },
  );
}

/**
 * Starts the server; `fault` is asked for each request, numbered from 0.
 *
 * @example
 * ```ts ignore
 * const s3 = startStatefulS3((method, _path, index) => method === "PUT" && index === 0 ? "apply-500" : undefined);
 * ```
 */
export function startStatefulS3(
  fault: (method: string, path: string, index: number) => Fault,
): StatefulS3 {
  const objects = new Map<string, { body: Uint8Array; etag: string }>();
  const log: string[] = [];
  let index = 0;
  const server = Deno.serve({ hostname: "127.0.0.1", port: 0, onListen() {} }, async (request) => {
    const path = decodeURIComponent(new URL(request.url).pathname);
    const method = request.method;
    const body = new Uint8Array(await request.arrayBuffer());
    const given = fault(method, path, index++);
    const current = objects.get(path);
    const ifMatch = request.headers.get("if-match");
    const ifNoneMatch = request.headers.get("if-none-match");
    let answer: Response;
    if (given !== undefined && given !== "apply-500") {
      answer = s3Error(given.status, given.code);
    } else if (method === "GET" || method === "HEAD") {
      answer = current
        ? new Response(method === "HEAD" ? null : (current.body as Uint8Array<ArrayBuffer>), {
          headers: { etag: current.etag, "last-modified": new Date().toUTCString() },
        })
        : s3Error(404, "NoSuchKey");
    } else if (method === "PUT") {
      if (ifNoneMatch === "*" && current) answer = s3Error(412, "PreconditionFailed");
      else if (ifMatch !== null && !current) answer = s3Error(404, "NoSuchKey");
      else if (ifMatch !== null && current!.etag !== ifMatch) {
        answer = s3Error(412, "PreconditionFailed");
      } else {
        const etag = await etagOf(body);
        objects.set(path, { body, etag });
        answer = new Response(null, { headers: { etag } });
      }
    } else if (method === "DELETE") {
      // S3 answers a conditional delete of a missing object 404.
      if (ifMatch !== null && !current) answer = s3Error(404, "NoSuchKey");
      else if (ifMatch !== null && current!.etag !== ifMatch) {
        answer = s3Error(412, "PreconditionFailed");
      } else {
        objects.delete(path);
        answer = new Response(null, { status: 204 });
      }
    } else {
      answer = s3Error(501, "NotImplemented");
    }
    if (given === "apply-500") answer = s3Error(500, "InternalError");
    log.push(
      `${method} ${path} if-match=${ifMatch} if-none-match=${ifNoneMatch} -> ${answer.status}`,
    );
    return answer;
  });
  return {
    endpoint: `http://127.0.0.1:${server.addr.port}`,
    objects,
    log,
    close: () => server.shutdown(),
  };
}
