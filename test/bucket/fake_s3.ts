/**
 * A scripted HTTP server speaking just enough S3 to test the client's
 * bounds: each request gets the answer the script gives, or silence, or a
 * closed connection.
 *
 * @module
 */

/** What the server does with one request. */
export type Reply =
  | { status: number; headers?: Record<string, string>; body?: string }
  | "silent"
  | "drop";

/** A request as the server saw it. */
export interface SeenRequest {
  /** HTTP method. */
  method: string;
  /** Path and query. */
  path: string;
  /** Header names in lower case. */
  headers: Record<string, string>;
}

/** A running fake server. */
export interface FakeS3 {
  /** `http://127.0.0.1:PORT`. */
  endpoint: string;
  /** Every request received, in order. */
  seen: SeenRequest[];
  /** Closes the listener and every connection. */
  close(): Promise<void>;
}

/**
 * An S3 error body, so the SDK finds the code.
 *
 * @example
 * ```ts
 * import { s3Error } from "./fake_s3.ts";
 * s3Error(503, "SlowDown");
 * ```
 */
export function s3Error(status: number, code: string): Reply {
  return {
    status,
    headers: { "content-type": "application/xml" },
    body: `<?xml version="1.0" encoding="UTF-8"?><Error><Code>${code}</Code>` +
      `<Message>${code}</Message><RequestId>r</RequestId></Error>`,
  };
}

/**
 * Starts the server; `script` decides each reply from the request and its
 * index.
 *
 * @example
 * ```ts
 * import { startFakeS3 } from "./fake_s3.ts";
 * const s3 = startFakeS3(() => ({ status: 200 }));
 * await s3.close();
 * ```
 */
export function startFakeS3(script: (request: SeenRequest, index: number) => Reply): FakeS3 {
  const listener = Deno.listen({ hostname: "127.0.0.1", port: 0 });
  const seen: SeenRequest[] = [];
  const connections = new Set<Deno.Conn>();
  const serving = new Set<Promise<void>>();
  const serve = async (conn: Deno.Conn) => {
    let buffer = new Uint8Array();
    const read = async (): Promise<boolean> => {
      const chunk = new Uint8Array(65536);
      const n = await conn.read(chunk).catch(() => null);
      if (n === null) return false;
      const joined = new Uint8Array(buffer.length + n);
      joined.set(buffer);
      joined.set(chunk.subarray(0, n), buffer.length);
      buffer = joined;
      return true;
    };
    try {
      while (true) {
        let end: number;
        while ((end = headerEnd(buffer)) < 0) if (!(await read())) return;
        const head = new TextDecoder().decode(buffer.subarray(0, end)).split("\r\n");
        const [method, path] = head[0].split(" ");
        const headers: Record<string, string> = {};
        for (const line of head.slice(1)) {
          const at = line.indexOf(":");
          headers[line.slice(0, at).toLowerCase()] = line.slice(at + 1).trim();
        }
        const length = Number(headers["content-length"] ?? 0);
        while (buffer.length < end + 4 + length) if (!(await read())) return;
        buffer = buffer.slice(end + 4 + length);
        const request = { method, path, headers };
        seen.push(request);
        const reply = script(request, seen.length - 1);
        if (reply === "drop") return;
        if (reply === "silent") {
          while (await read()) { /* hold the connection until the client gives up */ }
          return;
        }
        const body = new TextEncoder().encode(reply.body ?? "");
        const lines = [
          `HTTP/1.1 ${reply.status} X`,
          `content-length: ${method === "HEAD" ? 0 : body.length}`,
          ...Object.entries(reply.headers ?? {}).map(([k, v]) => `${k}: ${v}`),
        ];
        await conn.write(new TextEncoder().encode(lines.join("\r\n") + "\r\n\r\n"));
        if (method !== "HEAD") await conn.write(body);
      }
    } catch {
      // The client closed the connection.
    } finally {
      connections.delete(conn);
      try {
        conn.close();
      } catch {
        // Already closed.
      }
    }
  };
  const accepting = (async () => {
    for await (const conn of listener) {
      connections.add(conn);
      const done = serve(conn);
      serving.add(done);
      done.finally(() => serving.delete(done));
    }
  })().catch(() => {});
  return {
    endpoint: `http://127.0.0.1:${(listener.addr as Deno.NetAddr).port}`,
    seen,
    async close() {
      listener.close();
      for (const conn of connections) {
        try {
          conn.close();
        } catch {
          // Already closed.
        }
      }
      await accepting;
      await Promise.all(serving);
    },
  };
}

function headerEnd(buffer: Uint8Array): number {
  for (let i = 0; i + 3 < buffer.length; i++) {
    if (buffer[i] === 13 && buffer[i + 1] === 10 && buffer[i + 2] === 13 && buffer[i + 3] === 10) {
      return i;
    }
  }
  return -1;
}
