/**
 * Shared by the cluster listener and TLS connector tests: a minimal HTTP/1.1
 * exchange over a {@linkcode ByteConn}, reading a connection to its end,
 * bounded waits, and certificates whose private key does not match (to
 * prove that a handshake checks the key, not just the certificate).
 *
 * @module
 */

import assert from "node:assert/strict";
import { X509Certificate } from "node:crypto";
import {
  derBitString,
  derExplicit,
  derInteger,
  derOctetString,
  derOid,
  derSequence,
} from "../../src/security/der.ts";
import type { NodeIdentity } from "../../src/security/node_identity.ts";
import type { ByteConn } from "../../src/http/tls_connect.ts";
import { createLogger, type Logger } from "../../src/log.ts";
import { writeAll } from "../../src/testing/loopback.ts";
import type { UntilOptions } from "../helpers/until.ts";

const encoder = new TextEncoder();
const decoder = new TextDecoder();

/** Longest any single wait in these tests may take before it fails the test. */
export const WAIT_MS = 5_000;

/** A parsed answer. */
export interface Answer {
  status: number;
  headers: [string, string][];
  body: Uint8Array;
  text: string;
}

/** The value of the first header called `name` (lower case). */
export function header(answer: Answer, name: string): string | undefined {
  return answer.headers.find(([n]) => n === name)?.[1];
}

/** Rejects with a message naming `what` if `promise` has not settled within `ms`. */
export function within<T>(promise: Promise<T>, what: string, ms = WAIT_MS): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: nothing within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

/** Polls every 5 ms, for up to {@linkcode WAIT_MS}: for counters of a server on loopback. */
export const SOON: UntilOptions = { ms: WAIT_MS, everyMs: 5 };

export { writeAll };

/** The bytes of a request with `content-length` (no body line for GET without body). */
export function requestBytes(
  method: string,
  path: string,
  body: Uint8Array | string = "",
  headers: [string, string][] = [],
): Uint8Array {
  const payload = typeof body === "string" ? encoder.encode(body) : body;
  let head = `${method} ${path} HTTP/1.1\r\nhost: peer.test\r\n`;
  for (const [name, value] of headers) head += `${name}: ${value}\r\n`;
  if (payload.length > 0 || method === "POST" || method === "PUT") {
    head += `content-length: ${payload.length}\r\n`;
  }
  const bytes = new Uint8Array(head.length + 2 + payload.length);
  bytes.set(encoder.encode(head + "\r\n"));
  bytes.set(payload, head.length + 2);
  return bytes;
}

/**
 * Reads one answer (content-length bodies only, as the cluster listener
 * sends them; none for HEAD), reading `chunk` bytes at a time.
 */
export async function readAnswer(
  conn: ByteConn,
  method = "GET",
  chunk = 16 * 1024,
): Promise<Answer> {
  let buffered = new Uint8Array(0);
  const more = async () => {
    const p = new Uint8Array(chunk);
    const n = await conn.read(p);
    if (n === null) throw new Error("the connection ended before a complete answer");
    const joined = new Uint8Array(buffered.length + n);
    joined.set(buffered);
    joined.set(p.subarray(0, n), buffered.length);
    buffered = joined;
  };
  let headEnd: number;
  while ((headEnd = indexOfHeadEnd(buffered)) < 0) await more();
  const lines = decoder.decode(buffered.subarray(0, headEnd)).split("\r\n");
  const status = Number(lines[0].split(" ")[1]);
  const headers = lines.slice(1).map((line): [string, string] => {
    const colon = line.indexOf(":");
    return [line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()];
  });
  assert.equal(
    headers.find(([n]) => n === "transfer-encoding"),
    undefined,
    "the listener sends content-length bodies",
  );
  const length = method === "HEAD" || status === 204 || status === 304
    ? 0
    : Number(headers.find(([n]) => n === "content-length")?.[1] ?? "0");
  while (buffered.length < headEnd + 4 + length) await more();
  assert.equal(buffered.length, headEnd + 4 + length, "no bytes after the answer");
  const body = buffered.slice(headEnd + 4);
  return { status, headers, body, text: decoder.decode(body) };
}

/** Sends one request and reads its answer. */
export async function exchange(
  conn: ByteConn,
  method: string,
  path: string,
  body: Uint8Array | string = "",
  headers: [string, string][] = [],
): Promise<Answer> {
  await writeAll(conn, requestBytes(method, path, body, headers));
  return await readAnswer(conn, method);
}

/** How a connection ended after reading everything it sent. */
export interface Ending {
  bytes: Uint8Array;
  /** "eof" for a clean end, else the error's message. */
  end: string;
}

/** Reads until the end or an error (bounded by {@linkcode WAIT_MS}). */
export function readToEnd(conn: ByteConn): Promise<Ending> {
  const read = async (): Promise<Ending> => {
    const chunks: number[] = [];
    const p = new Uint8Array(4096);
    try {
      for (;;) {
        const n = await conn.read(p);
        if (n === null) return { bytes: Uint8Array.from(chunks), end: "eof" };
        chunks.push(...p.subarray(0, n));
      }
    } catch (error) {
      return { bytes: Uint8Array.from(chunks), end: String(error) };
    }
  };
  return within(read(), "reading the connection to its end");
}

function indexOfHeadEnd(bytes: Uint8Array): number {
  for (let i = 0; i + 3 < bytes.length; i++) {
    if (bytes[i] === 13 && bytes[i + 1] === 10 && bytes[i + 2] === 13 && bytes[i + 3] === 10) {
      return i;
    }
  }
  return -1;
}

/** A logger that keeps its lines. */
export function recordingLogger(): { log: Logger; lines: string[] } {
  const lines: string[] = [];
  return { log: createLogger({ level: "debug", sink: (line) => lines.push(line) }), lines };
}

/**
 * An EC private key (SEC1 PEM) that claims `identity`'s leaf public key but
 * holds another scalar: OpenSSL loads it with the certificate (it compares
 * only the public halves), and every signature it makes is wrong. Stands for
 * someone who copied a node's certificate but not its key.
 */
export function forgedKeyPem(identity: NodeIdentity): string {
  const jwk = new X509Certificate(identity.certPem).publicKey.export({ format: "jwk" });
  const b64url = (text: string) =>
    Uint8Array.from(atob(text.replace(/-/g, "+").replace(/_/g, "/")), (c) => c.charCodeAt(0));
  const point = new Uint8Array(65);
  point[0] = 0x04;
  point.set(b64url(jwk.x!), 1);
  point.set(b64url(jwk.y!), 33);
  const scalar = crypto.getRandomValues(new Uint8Array(32));
  scalar[0] &= 0x7f; // below the curve's order
  const der = derSequence(
    derInteger(new Uint8Array([1])),
    derOctetString(scalar),
    derExplicit(0, derOid("1.2.840.10045.3.1.7")),
    derExplicit(1, derBitString(point)),
  );
  let binary = "";
  for (const byte of der) binary += String.fromCharCode(byte);
  const lines = btoa(binary).match(/.{1,64}/g)!.join("\n");
  return `-----BEGIN EC PRIVATE KEY-----\n${lines}\n-----END EC PRIVATE KEY-----\n`;
}

/** Writes `files` into a new temporary directory; returns their paths by name. */
export async function tempFiles(
  files: Record<string, string>,
): Promise<Record<string, string> & { dir: string }> {
  const dir = await Deno.makeTempDir({ prefix: "wasmkeep-tls-" });
  const paths: Record<string, string> = {};
  for (const [name, text] of Object.entries(files)) {
    paths[name] = `${dir}/${name}`;
    await Deno.writeTextFile(paths[name], text);
  }
  return { ...paths, dir };
}
