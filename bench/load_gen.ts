/**
 * A closed-loop HTTP/1.1 load generator over raw keep-alive TCP
 * connections, run as its own process by `counter_bench.ts` so its CPU is
 * not the server's. Each connection sends one request, reads the whole
 * answer, and sends the next. Prints one JSON {@linkcode LoadResult} line.
 *
 * Usage: `deno run -A bench/load_gen.ts < spec.json` (a {@linkcode LoadSpec} on stdin)
 *
 * @module
 */

/** What to send, and for how long. */
export interface LoadSpec {
  host: string;
  port: number;
  method: "POST" | "GET";
  /** Request paths, used round-robin across all connections. */
  paths: string[];
  connections: number;
  /** Requests before this time are not measured (but are counted in `total2xx`). */
  warmupMs: number;
  /** The measured window after the warm-up. */
  durationMs: number;
  /**
   * Send exactly this many requests in all (each path once when equal to
   * `paths.length`) and stop; then `warmupMs` and `durationMs` are ignored
   * and every request is measured.
   */
  exactRequests?: number;
}

/** What one run measured. */
export interface LoadResult {
  /** Answers with status 2xx inside the measured window. */
  requests: number;
  /** Answers with another status inside the measured window. */
  errors: number;
  /** 2xx answers over the whole run, warm-up included. */
  total2xx: number;
  /** Non-2xx answers over the whole run, warm-up included. */
  totalErrors: number;
  seconds: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
  /** Count of each status over the whole run. */
  statuses: Record<string, number>;
}

const CRLF2 = [13, 10, 13, 10];

function indexOfHeaderEnd(buf: Uint8Array, from: number, to: number): number {
  for (let i = Math.max(from, 0); i + 3 < to; i++) {
    if (
      buf[i] === CRLF2[0] && buf[i + 1] === CRLF2[1] && buf[i + 2] === CRLF2[2] &&
      buf[i + 3] === CRLF2[3]
    ) return i;
  }
  return -1;
}

/** The `p` quantile (0..1) of sorted values, nearest rank. */
export function quantile(sorted: Float64Array, p: number): number {
  if (sorted.length === 0) return NaN;
  const rank = Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1));
  return sorted[rank];
}

/** Runs the load described by `spec` and returns what it measured. */
export async function runLoad(spec: LoadSpec): Promise<LoadResult> {
  const encoder = new TextEncoder();
  const decoder = new TextDecoder();
  const requests = spec.paths.map((path) =>
    encoder.encode(
      `${spec.method} ${path} HTTP/1.1\r\nhost: ${spec.host}:${spec.port}\r\n` +
        `content-length: 0\r\n\r\n`,
    )
  );
  let next = 0;
  let sent = 0;
  const exact = spec.exactRequests;
  const start = performance.now();
  const measureFrom = exact === undefined ? start + spec.warmupMs : start;
  const measureTo = exact === undefined ? measureFrom + spec.durationMs : Infinity;
  let latencies = new Float64Array(1 << 16);
  let measured = 0;
  let errors = 0;
  let total2xx = 0;
  let totalErrors = 0;
  const statuses: Record<string, number> = {};
  let lastEnd = start;

  const record = (ms: number) => {
    if (measured === latencies.length) {
      const bigger = new Float64Array(latencies.length * 2);
      bigger.set(latencies);
      latencies = bigger;
    }
    latencies[measured++] = ms;
  };

  const loop = async () => {
    const conn = await Deno.connect({ hostname: spec.host, port: spec.port });
    conn.setNoDelay(true);
    let buf = new Uint8Array(16 * 1024);
    let filled = 0;
    try {
      while (true) {
        if (exact !== undefined ? sent >= exact : performance.now() >= measureTo) break;
        sent++;
        const request = requests[next];
        next = (next + 1) % requests.length;
        const t0 = performance.now();
        for (let written = 0; written < request.length;) {
          written += await conn.write(request.subarray(written));
        }
        // Read one whole answer: headers, then content-length bytes of body.
        let headerEnd = -1;
        let scanned = 0;
        let total = -1;
        while (true) {
          if (headerEnd < 0) {
            headerEnd = indexOfHeaderEnd(buf, scanned - 3, filled);
            scanned = filled;
            if (headerEnd >= 0) {
              const head = decoder.decode(buf.subarray(0, headerEnd)).toLowerCase();
              const match = head.match(/\r\ncontent-length:\s*(\d+)/);
              if (!match) throw new Error(`an answer without content-length:\n${head}`);
              total = headerEnd + 4 + Number(match[1]);
            }
          }
          if (total >= 0 && filled >= total) break;
          if (filled === buf.length) {
            const bigger = new Uint8Array(buf.length * 2);
            bigger.set(buf);
            buf = bigger;
          }
          const n = await conn.read(buf.subarray(filled));
          if (n === null) throw new Error("the server closed the connection");
          filled += n;
        }
        const t1 = performance.now();
        const status = decoder.decode(buf.subarray(9, 12));
        statuses[status] = (statuses[status] ?? 0) + 1;
        const ok = status[0] === "2";
        if (ok) total2xx++;
        else totalErrors++;
        if (t0 >= measureFrom && t1 <= measureTo) {
          if (ok) record(t1 - t0);
          else errors++;
        }
        lastEnd = t1;
        // Keep whatever followed this answer (nothing, with one request in flight).
        buf.copyWithin(0, total, filled);
        filled -= total;
      }
    } finally {
      conn.close();
    }
  };

  await Promise.all(Array.from({ length: spec.connections }, loop));
  const seconds = exact === undefined ? spec.durationMs / 1000 : (lastEnd - start) / 1000;
  const sorted = latencies.slice(0, measured).sort();
  return {
    requests: measured,
    errors,
    total2xx,
    totalErrors,
    seconds,
    rps: measured / seconds,
    p50Ms: quantile(sorted, 0.5),
    p99Ms: quantile(sorted, 0.99),
    maxMs: measured > 0 ? sorted[measured - 1] : NaN,
    statuses,
  };
}

if (import.meta.main) {
  const spec = JSON.parse(await new Response(Deno.stdin.readable).text()) as LoadSpec;
  const result = await runLoad(spec);
  console.log(JSON.stringify(result));
}
