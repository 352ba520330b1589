/**
 * What mutual TLS costs a request between nodes, on loopback: the median
 * round trip of a small request and its answer over one kept-alive
 * connection, for each way of serving it, measured in the same run
 * (alternating, round after round):
 *
 * - plain TCP to `Deno.serve` (the client listener's server);
 * - plain TCP to a `node:http` server, on Deno's native fast path and on
 *   its JavaScript parser (which the cluster listener uses, being TLS), to
 *   tell the `node:http` server's own cost from TLS's;
 * - `tlsConnector` to a bare `node:https` server with the cluster
 *   listener's TLS settings (TLS alone), and to a `ClusterListener` (TLS
 *   plus the adapter to web `Request`/`Response`);
 * - `Deno.connectTls` with the CA and a client certificate to the
 *   `ClusterListener` (Deno's client instead of `node:tls`).
 *
 * The servers run in a child process, the client here, so each has a core.
 * Then, in this process: the median time of a full handshake, and of
 * `ClusterListener.revoke()` with 1,024 open connections.
 *
 * The flags are in {@linkcode USAGE} (`--help` prints it).
 *
 * @module
 */

import http from "node:http";
import https from "node:https";
import tls from "node:tls";
import { SocketConn } from "../src/net/socket_conn.ts";
import { decodeLatin1, indexOfBlankLine } from "../src/net/h1/wire.ts";
import { ClusterListener } from "../src/http/cluster_listener.ts";
import { type ByteConn, tlsConnector } from "../src/http/tls_connect.ts";
import { createLogger } from "../src/log.ts";
import { createNodeIdentity, type NodeIdentity } from "../src/security/node_identity.ts";
import { cpuModel, flag, treeCpuMs } from "./processes.ts";
import { QUICK, runBench, spawnTracked } from "./command.ts";

/** What `--help` prints. */
export const USAGE = `Usage: deno run -A bench/tls_bench.ts [--quick] [--rounds N] [--requests N]

What mutual TLS costs a request between nodes on loopback, against plain TCP, each way of
serving it measured in the same run; then handshakes and revoke() (about a minute).

  --quick        a short run (1 round of 200 requests) that shows the benchmark works
  --rounds N     rounds, alternating the cases (default 5)
  --requests N   round trips per case per round (default 2000)
  -h, --help     show this help

Used internally, by the benchmark's own server process: --role server.`;

const encoder = new TextEncoder();
const REQUEST = encoder.encode("GET /actor/c/n HTTP/1.1\r\nhost: bench\r\n\r\n");
const ANSWER_BODY = "1";

interface ServerPorts {
  denoServe: number;
  nodeHttpNative: number;
  nodeHttpClassic: number;
  nodeHttpsBare: number;
  tlsRaw: number;
  tlsRawWeb: number;
  cluster: number;
  caPem: string;
  fingerprint: string;
}

/** The child: every server, answering `1`; prints their ports as one JSON line. */
async function runServers(): Promise<void> {
  const identity = await createNodeIdentity({ nodeId: "server", hosts: ["127.0.0.1"] });
  const listen = (server: http.Server) =>
    new Promise<number>((resolve) => {
      server.listen(0, "127.0.0.1", () => resolve((server.address() as { port: number }).port));
    });
  const answer = (_req: http.IncomingMessage, res: http.ServerResponse) => {
    res.writeHead(200, { "content-length": "1", "content-type": "text/plain" });
    res.end(ANSWER_BODY);
  };
  const denoServe = Deno.serve(
    { hostname: "127.0.0.1", port: 0, onListen: () => {} },
    () => new Response(ANSWER_BODY),
  );
  const native = http.createServer(answer);
  const classic = http.createServer(answer);
  // A 'connection' listener of its own keeps node:http off its native fast
  // path, on the JavaScript parser that a TLS server always uses.
  classic.on("connection", () => {});
  // The cluster listener's TLS settings, for the servers beside it.
  const tlsOptions = {
    key: identity.keyPem,
    cert: identity.chainPem,
    requestCert: true,
    rejectUnauthorized: false,
    minVersion: "TLSv1.3",
    maxVersion: "TLSv1.3",
  } as const;
  const bare = https.createServer(tlsOptions, answer);
  // node:tls alone, its socket read through SocketConn and a minimal
  // HTTP/1.1 loop: what the cluster port would cost without node:http.
  const raw = tls.createServer(tlsOptions, (socket) => void minimalHttp(new SocketConn(socket)));
  const rawWeb = tls.createServer(
    tlsOptions,
    (socket) => void minimalHttp(new SocketConn(socket), true),
  );
  const cluster = await ClusterListener.start({
    hostname: "127.0.0.1",
    port: 0,
    identity,
    trust: () => true,
    handler: () => Promise.resolve(new Response(ANSWER_BODY)),
    maxConnections: 1024,
    // The handshake timing opens 100 connections one after another, and the
    // server sees each close after the next opened: not the share measured.
    maxHandshakesPerAddress: 1024,
    maxBodyBytes: 1024 * 1024,
    log: createLogger({ level: "warn" }),
  });
  const ports: ServerPorts = {
    denoServe: denoServe.addr.port,
    nodeHttpNative: await listen(native),
    nodeHttpClassic: await listen(classic),
    nodeHttpsBare: await listen(bare),
    tlsRaw: await listen(raw as unknown as http.Server),
    tlsRawWeb: await listen(rawWeb as unknown as http.Server),
    cluster: cluster.address.port,
    caPem: identity.caPem,
    fingerprint: identity.fingerprint,
  };
  console.log(JSON.stringify(ports));
  // Runs until the parent kills it.
  await new Promise(() => {});
}

const webHandler = (_request: Request) => Promise.resolve(new Response(ANSWER_BODY));
const RAW_ANSWER = new TextEncoder().encode(
  "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 1\r\n\r\n1",
);

/** Answers every request head (no bodies) on `conn` with `1`, until it ends. */
async function minimalHttp(conn: ByteConn, web = false): Promise<void> {
  const buffer = new Uint8Array(16 * 1024);
  let filled = 0;
  try {
    for (;;) {
      const n = await conn.read(buffer.subarray(filled));
      if (n === null) break;
      filled += n;
      const end = indexOfBlankLine(buffer, 0, filled);
      if (end < 0) continue;
      // The head's text and lines, as a real server would need them.
      const lines = decodeLatin1(buffer, 0, end).split("\r\n");
      buffer.copyWithin(0, end + 4, filled);
      filled -= end + 4;
      if (!web) {
        await conn.write(RAW_ANSWER);
        continue;
      }
      const headers: [string, string][] = [];
      for (let i = 1; i < lines.length; i++) {
        const colon = lines[i].indexOf(":");
        headers.push([lines[i].slice(0, colon), lines[i].slice(colon + 1).trim()]);
      }
      const target = lines[0].split(" ")[1];
      const request = new Request(`https://cluster${target}`, { headers });
      const response = await webHandler(request);
      const reader = response.body!.getReader();
      const first = await reader.read();
      await reader.read();
      let head = `HTTP/1.1 ${response.status} OK\r\n`;
      for (const [name, value] of response.headers) head += `${name}: ${value}\r\n`;
      const body = first.value!;
      head += `content-length: ${body.length}\r\n\r\n`;
      const bytes = encoder.encode(head);
      const wire = new Uint8Array(bytes.length + body.length);
      wire.set(bytes);
      wire.set(body, bytes.length);
      await conn.write(wire);
    }
  } catch {
    // The client went away.
  }
  conn.close();
}

/** Reads one answer with a content-length body; the bytes read. */
async function readAnswer(conn: ByteConn, buffer: Uint8Array): Promise<void> {
  let filled = 0;
  for (;;) {
    const n = await conn.read(buffer.subarray(filled));
    if (n === null) throw new Error("the server closed the connection");
    filled += n;
    const text = new TextDecoder().decode(buffer.subarray(0, filled));
    const headEnd = text.indexOf("\r\n\r\n");
    if (headEnd < 0) continue;
    const length = Number(text.match(/content-length: *(\d+)/i)?.[1] ?? "0");
    if (filled >= headEnd + 4 + length) return;
  }
}

/** Round trips of `count` requests over `conn`, in microseconds. */
async function roundTrips(conn: ByteConn, count: number): Promise<number[]> {
  const buffer = new Uint8Array(4096);
  const times: number[] = [];
  for (let i = 0; i < count; i++) {
    const start = performance.now();
    for (let offset = 0; offset < REQUEST.length;) {
      offset += await conn.write(REQUEST.subarray(offset));
    }
    await readAnswer(conn, buffer);
    times.push((performance.now() - start) * 1000);
  }
  return times;
}

function quantile(sorted: number[], q: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}

function median(values: number[]): number {
  return quantile([...values].sort((a, b) => a - b), 0.5);
}

interface Case {
  name: string;
  open: () => Promise<ByteConn>;
}

async function measureRoundTrips(ports: ServerPorts, client: NodeIdentity, serverPid: number) {
  const rounds = Number(flag("rounds") ?? (QUICK ? 1 : 5));
  const requests = Number(flag("requests") ?? (QUICK ? 200 : 2000));
  const plain = (port: number) => () => Deno.connect({ hostname: "127.0.0.1", port });
  const tls = tlsConnector({ identity: client, pinFor: () => ports.fingerprint });
  const viaNodeTls = (port: number) => () => tls("127.0.0.1", port, AbortSignal.timeout(5000));
  const cases: Case[] = [
    { name: "plain TCP -> Deno.serve", open: plain(ports.denoServe) },
    { name: "plain TCP -> node:http (native path)", open: plain(ports.nodeHttpNative) },
    { name: "plain TCP -> node:http (JS parser)", open: plain(ports.nodeHttpClassic) },
    { name: "tlsConnector -> bare node:https", open: viaNodeTls(ports.nodeHttpsBare) },
    { name: "tlsConnector -> node:tls, minimal HTTP", open: viaNodeTls(ports.tlsRaw) },
    {
      name: "tlsConnector -> node:tls, minimal HTTP, web Request/Response",
      open: viaNodeTls(ports.tlsRawWeb),
    },
    { name: "tlsConnector -> ClusterListener", open: viaNodeTls(ports.cluster) },
    {
      name: "Deno.connectTls -> ClusterListener",
      open: () =>
        Deno.connectTls({
          hostname: "127.0.0.1",
          port: ports.cluster,
          caCerts: [ports.caPem],
          cert: client.chainPem,
          key: client.keyPem,
        }),
    },
  ];
  const conns = await Promise.all(cases.map((c) => c.open()));
  const all: number[][] = cases.map(() => []);
  const perRound: number[][] = cases.map(() => []);
  /** The server process's CPU (all its threads) in each case, ms. */
  const serverCpuMs: number[] = cases.map(() => 0);
  for (let i = 0; i < cases.length; i++) await roundTrips(conns[i], 200); // warm up
  for (let round = 0; round < rounds; round++) {
    // Each round in another order, so no case always follows the same one.
    const order = cases.map((_, i) => (i + round) % cases.length);
    for (const i of order) {
      const cpuBefore = treeCpuMs(serverPid).selfMs;
      const times = await roundTrips(conns[i], requests);
      serverCpuMs[i] += treeCpuMs(serverPid).selfMs - cpuBefore;
      all[i].push(...times);
      perRound[i].push(median(times));
    }
  }
  for (const conn of conns) conn.close();
  return cases.map((c, i) => {
    const sorted = [...all[i]].sort((a, b) => a - b);
    return {
      name: c.name,
      p50: quantile(sorted, 0.5),
      p90: quantile(sorted, 0.9),
      rounds: perRound[i],
      serverCpuUs: serverCpuMs[i] * 1000 / (rounds * requests),
    };
  });
}

/** Median time of a new connection and its full handshake (plain TCP for comparison). */
async function measureHandshakes(ports: ServerPorts, client: NodeIdentity) {
  const tls = tlsConnector({ identity: client, pinFor: () => ports.fingerprint });
  const time = async (open: () => Promise<ByteConn>) => {
    const times: number[] = [];
    for (let i = 0; i < 100; i++) {
      const start = performance.now();
      const conn = await open();
      times.push((performance.now() - start) * 1000);
      conn.close();
    }
    return median(times);
  };
  return {
    tcp: await time(() => Deno.connect({ hostname: "127.0.0.1", port: ports.cluster })),
    tls: await time(() => tls("127.0.0.1", ports.cluster, AbortSignal.timeout(5000))),
  };
}

/** `revoke()` with 1,024 connections of 4 peers: nobody revoked, and one peer of four. */
async function measureRevoke() {
  const server = await createNodeIdentity({ nodeId: "server", hosts: ["127.0.0.1"] });
  const peers = await Promise.all(
    [0, 1, 2, 3].map((i) => createNodeIdentity({ nodeId: `peer-${i}`, hosts: ["127.0.0.1"] })),
  );
  const trusted = new Set(peers.map((peer) => peer.fingerprint));
  const listener = await ClusterListener.start({
    hostname: "127.0.0.1",
    port: 0,
    identity: server,
    trust: (fingerprint) => trusted.has(fingerprint),
    handler: () => Promise.resolve(new Response(ANSWER_BODY)),
    maxConnections: 1024,
    // Opened one after another, the server's side of each handshake can lag
    // the client's: this measures revoke(), not the share per address.
    maxHandshakesPerAddress: 1024,
    maxBodyBytes: 1024,
    log: createLogger({ level: "error" }),
  });
  const conns: ByteConn[] = [];
  for (let i = 0; i < 1024; i++) {
    const peer = peers[i % peers.length];
    const connect = tlsConnector({ identity: peer, pinFor: () => server.fingerprint });
    conns.push(await connect("127.0.0.1", listener.address.port, AbortSignal.timeout(5000)));
  }
  while (listener.stats().trusted < 1024) await new Promise((resolve) => setTimeout(resolve, 10));
  const unchanged: number[] = [];
  for (let i = 0; i < 1000; i++) {
    const start = performance.now();
    listener.revoke();
    unchanged.push((performance.now() - start) * 1000);
  }
  trusted.delete(peers[0].fingerprint);
  const start = performance.now();
  const closed = listener.revoke();
  const cutting = (performance.now() - start) * 1000;
  for (const conn of conns) conn.close();
  await listener.close();
  return { unchanged: median(unchanged), cutting, closed };
}

async function main(): Promise<void> {
  const child = spawnTracked(
    new Deno.Command(Deno.execPath(), {
      args: ["run", "-A", new URL(import.meta.url).pathname, "--role", "server"],
      stdin: "null",
      stdout: "piped",
      stderr: "inherit",
    }),
  );
  try {
    const reader = child.stdout.pipeThrough(new TextDecoderStream()).getReader();
    let text = "";
    while (!text.includes("\n")) {
      const { value, done } = await reader.read();
      if (done) throw new Error("the server process ended before it listened");
      text += value;
    }
    reader.releaseLock();
    const ports = JSON.parse(text.slice(0, text.indexOf("\n"))) as ServerPorts;
    const client = await createNodeIdentity({ nodeId: "client", hosts: ["127.0.0.1"] });

    const results = await measureRoundTrips(ports, client, child.pid);
    const handshakes = await measureHandshakes(ports, client);
    const revoke = await measureRevoke();

    const command = ["deno", "run", "-A", "bench/tls_bench.ts", ...Deno.args].join(" ");
    console.log(`$ ${command}`);
    console.log(
      `Deno ${Deno.version.deno}, ${cpuModel()}, ${navigator.hardwareConcurrency} cores, load ${
        Deno.loadavg().map((l) => l.toFixed(1)).join(" ")
      }`,
    );
    console.log("");
    console.log(
      "| one kept-alive connection, small GET | p50 µs | p90 µs | server CPU µs/req | p50 of each round µs |",
    );
    console.log("| --- | ---: | ---: | ---: | --- |");
    for (const r of results) {
      console.log(
        `| ${r.name} | ${r.p50.toFixed(1)} | ${r.p90.toFixed(1)} | ${r.serverCpuUs.toFixed(1)} | ${
          r.rounds.map((m) => m.toFixed(1)).join(", ")
        } |`,
      );
    }
    console.log("");
    console.log(
      `new connection to the ClusterListener, median: TCP only ${
        handshakes.tcp.toFixed(0)
      } µs, mutual TLS 1.3 handshake ${handshakes.tls.toFixed(0)} µs`,
    );
    console.log(
      `revoke() over 1,024 connections of 4 peers: ${
        revoke.unchanged.toFixed(1)
      } µs when all are still trusted (median of 1,000), ${
        revoke.cutting.toFixed(0)
      } µs to close the ${revoke.closed} of one peer`,
    );
  } finally {
    child.kill();
    await child.status;
    await child.stdout.cancel().catch(() => {});
  }
}

if (flag("role") === "server") await runServers();
else await runBench(USAGE, main);
