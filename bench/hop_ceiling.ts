/**
 * The ceiling the process hop puts on throughput: a plain `Deno.serve`
 * answering `1`, against the same server sending each request as a frame
 * to an echo process over a Unix socket (WasmKeep's frames and codec,
 * `src/actors/frames.ts`) and answering with what comes back, and against
 * the counter baseline of `counter_bench.ts`. No Wasm and no SQLite in the
 * hop case: whatever WasmKeep does per event comes on top of it.
 *
 * The flags are in {@linkcode USAGE} (`--help` prints it).
 *
 * @module
 */

import { FrameSender, readFrames } from "../src/actors/frames.ts";
import type { Plain } from "../src/actors/codec.ts";
import { ROOT, runLoadProcess, startServer, stopAll } from "./processes.ts";
import { benchTempDir, QUICK, runBench } from "./command.ts";

/** What `--help` prints. */
export const USAGE = `Usage: deno run -A bench/hop_ceiling.ts [--quick]

The ceiling the process hop puts on throughput: a plain Deno.serve, the same sending each
request to an echo process over a Unix socket, and the counter baseline (about 30 s).

  --quick      a short run (1 s windows) that shows the benchmark works
  -h, --help   show this help

Used internally, by the benchmark's own processes: --role server --hop none|echo, --role echo SOCKET.`;

/** Warm-up of each case, ms (not measured). */
const WARMUP_MS = QUICK ? 500 : 2_000;
/** Measured window of each case, ms. */
const DURATION_MS = QUICK ? 1_000 : 5_000;

interface EchoReply {
  seq: number;
  status: number;
  body: Uint8Array;
}

async function runEcho(socketPath: string) {
  const conn = await Deno.connect({ transport: "unix", path: socketPath });
  const sender = new FrameSender(conn);
  for await (const frame of readFrames(conn)) {
    const { seq } = frame as { seq: number };
    sender.send({ seq, status: 200, body: new TextEncoder().encode("1") });
  }
}

async function runServer(hop: string) {
  const encoder = new TextEncoder();
  let answer: (request: Request) => Promise<Response>;
  if (hop === "echo") {
    const dir = await Deno.makeTempDir();
    // Stopped with SIGTERM by the benchmark: the socket's directory goes with it.
    Deno.addSignalListener("SIGTERM", () => {
      Deno.removeSync(dir, { recursive: true });
      Deno.exit(143);
    });
    const path = `${dir}/echo.sock`;
    const listener = Deno.listen({ transport: "unix", path });
    new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", new URL(import.meta.url).pathname, "--role", "echo", path],
      stdin: "null",
      stdout: "inherit",
      stderr: "inherit",
    }).spawn();
    const conn = await listener.accept() as Deno.Conn;
    const sender = new FrameSender(conn);
    const pending = new Map<number, (reply: EchoReply) => void>();
    (async () => {
      for await (const frame of readFrames(conn)) {
        const reply = frame as unknown as EchoReply;
        pending.get(reply.seq)?.(reply);
        pending.delete(reply.seq);
      }
    })();
    let seq = 0;
    answer = async (request) => {
      const url = new URL(request.url);
      const reply = await new Promise<EchoReply>((resolve) => {
        const id = ++seq;
        pending.set(id, resolve);
        sender.send(
          {
            seq: id,
            method: request.method,
            path: url.pathname,
            headers: [...request.headers],
            body: new Uint8Array(),
          } as unknown as Plain,
        );
      });
      return new Response(reply.body as Uint8Array<ArrayBuffer>, { status: reply.status });
    };
  } else {
    answer = () => Promise.resolve(new Response(encoder.encode("1")));
  }
  Deno.serve({
    hostname: "127.0.0.1",
    port: 0,
    onListen: ({ hostname, port }) => console.error(`hop ready url=http://${hostname}:${port}`),
  }, (request) => {
    if (new URL(request.url).pathname === "/ready") return new Response("ready");
    return answer(request);
  });
}

async function measure(name: string, args: string[], ready: RegExp): Promise<number> {
  const server = await startServer(name, args, ready);
  try {
    const result = await runLoadProcess({
      host: server.host,
      port: server.port,
      method: "POST",
      paths: ["/actor/counter/hot"],
      connections: 32,
      warmupMs: WARMUP_MS,
      durationMs: DURATION_MS,
    });
    return result.requests / (DURATION_MS / 1000);
  } finally {
    await server.stop();
  }
}

async function main() {
  const dataDir = await benchTempDir({ dir: "/dev/shm" }).catch(() => benchTempDir());
  try {
    const self = new URL(import.meta.url).pathname;
    const plain = await measure(
      "plain",
      ["run", "-A", self, "--role", "server", "--hop", "none"],
      /hop ready url=(\S+)/,
    );
    const echo = await measure(
      "echo",
      ["run", "-A", self, "--role", "server", "--hop", "echo"],
      /hop ready url=(\S+)/,
    );
    const baseline = await measure(
      "baseline",
      ["run", "-A", `${ROOT}bench/baseline_server.ts`, "--data-dir", dataDir],
      /baseline ready url=(\S+)/,
    );
    console.log(`| server | req/s | of the counter baseline |`);
    console.log(`|---|---:|---:|`);
    for (
      const [name, rate] of [
        ["plain Deno.serve, answers 1", plain],
        ["counter baseline", baseline],
        ["Deno.serve + hop to an echo process", echo],
      ] as const
    ) {
      console.log(`| ${name} | ${rate.toFixed(0)} | ${(100 * rate / baseline).toFixed(1)} % |`);
    }
  } finally {
    await stopAll();
  }
}

if (import.meta.main) {
  const role = Deno.args[Deno.args.indexOf("--role") + 1];
  if (Deno.args.includes("--role") && role === "echo") {
    await runEcho(Deno.args[Deno.args.indexOf("--role") + 2]);
  } else if (Deno.args.includes("--role") && role === "server") {
    await runServer(Deno.args[Deno.args.indexOf("--hop") + 1]);
  } else {
    await runBench(USAGE, main);
  }
}
