/**
 * Reading a peer's answer off a {@linkcode Connection}: the head (interim
 * 1xx answers skipped), then the body by its length, chunked, or to the
 * close, every part bounded (a head, a chunk line, trailers, the body), and
 * whether the connection is fit for another request after it.
 *
 * @module
 */

import { concatBytes } from "../../bytes.ts";
import type { Connection } from "./connection.ts";
import {
  AnswerError,
  CHUNK_LINE,
  connectionTokens,
  decodeLatin1,
  endToEnd,
  type Head,
  indexOfBlankLine,
  indexOfCrlf,
  NO_TOKENS,
  parseContentLength,
  parseHead,
} from "./wire.ts";

/** Largest status line plus headers (and, separately, trailers) accepted from a peer. */
export const MAX_ANSWER_HEAD_BYTES = 64 * 1024;
/** Read size of a body delimited by the close. */
const READ_TO_END_BYTES = 64 * 1024;
const MAX_CHUNK_LINE_BYTES = 4 * 1024;
const EMPTY = new Uint8Array(0);

/** A complete answer: its status, its end-to-end headers (names in lower case), its body. */
export interface Answer {
  status: number;
  headers: [string, string][];
  body: Uint8Array;
}

/**
 * Reads one answer (skipping interim 1xx ones) and sets
 * `connection.reusable`; throws an AnswerError or a read error.
 *
 * @example
 * ```ts ignore
 * const answer = await readAnswer(connection, "GET", 32 * 1024 * 1024);
 * ```
 */
export async function readAnswer(
  connection: Connection,
  method: string,
  maxBodyBytes: number,
): Promise<Answer> {
  let first = true;
  while (true) {
    const { version, status, headers } = await readHead(connection, first);
    first = false;
    if (status === 101) throw new AnswerError("the peer switched protocols (101)");
    if (status < 200) continue;

    let transferEncoding: string[] | undefined;
    let contentLength: string[] | undefined;
    let tokens = NO_TOKENS;
    for (let i = 0; i < headers.length; i++) {
      const [name, value] = headers[i];
      if (name === "content-length") (contentLength ??= []).push(value);
      else if (name === "transfer-encoding") (transferEncoding ??= []).push(value);
      else if (name === "connection" && tokens === NO_TOKENS) tokens = connectionTokens(headers);
    }
    let reusable = version === 1 && !tokens.has("close");
    let body: Uint8Array;
    if (method === "HEAD" || status === 204 || status === 304) {
      body = EMPTY;
    } else if (transferEncoding) {
      const codings = transferEncoding.join(",").split(",").map((c) => c.trim().toLowerCase());
      if (codings.length !== 1 || codings[0] !== "chunked") {
        throw new AnswerError(
          `the answer's transfer-encoding ${JSON.stringify(transferEncoding.join(", "))} ` +
            "is not chunked alone",
        );
      }
      body = await readChunked(connection, maxBodyBytes);
      if (contentLength) reusable = false;
    } else if (contentLength) {
      const length = parseContentLength(contentLength);
      if (length > maxBodyBytes) throw tooLarge(maxBodyBytes);
      body = length === 0 ? EMPTY : new Uint8Array(length);
      const buffered = connection.takeInto(body, 0);
      if (buffered < length) await readExactInto(connection, body, buffered);
    } else {
      body = await readToEnd(connection, maxBodyBytes);
      reusable = false;
    }
    // Bytes after the answer were not asked for: the connection is not in a known state.
    connection.reusable = reusable && connection.end === connection.start;
    return { status, headers: endToEnd(headers, tokens), body };
  }
}

function tooLarge(maxBodyBytes: number): AnswerError {
  return new AnswerError(`the answer's body is larger than ${maxBodyBytes} bytes`);
}

function closedMidAnswer(): AnswerError {
  return new AnswerError("the connection closed before the answer was complete");
}

function headTooLarge(): AnswerError {
  return new AnswerError(`the answer's head is larger than ${MAX_ANSWER_HEAD_BYTES} bytes`);
}

async function readHead(connection: Connection, first: boolean): Promise<Head> {
  let searched = 0;
  let end: number;
  while (
    (end = indexOfBlankLine(connection.buf, connection.start + searched, connection.end)) < 0
  ) {
    const buffered = connection.end - connection.start;
    if (buffered > MAX_ANSWER_HEAD_BYTES) throw headTooLarge();
    searched = Math.max(0, buffered - 3);
    if (!(await connection.fill())) {
      throw first && buffered === 0
        ? new AnswerError("the connection closed before an answer")
        : closedMidAnswer();
    }
  }
  if (end - connection.start > MAX_ANSWER_HEAD_BYTES) throw headTooLarge();
  const text = decodeLatin1(connection.buf, connection.start, end);
  connection.start = end + 4;
  return parseHead(text);
}

/** A line without its CRLF; throws when it is longer than `limit` or the stream ends. */
async function readLine(connection: Connection, limit: number): Promise<string> {
  let searched = 0;
  let end: number;
  while ((end = indexOfCrlf(connection.buf, connection.start + searched, connection.end)) < 0) {
    const buffered = connection.end - connection.start;
    if (buffered > limit + 1) {
      throw new AnswerError(`the answer has a line longer than ${limit} bytes`);
    }
    searched = Math.max(0, buffered - 1);
    if (!(await connection.fill())) throw closedMidAnswer();
  }
  if (end - connection.start > limit) {
    throw new AnswerError(`the answer has a line longer than ${limit} bytes`);
  }
  const line = decodeLatin1(connection.buf, connection.start, end);
  connection.start = end + 2;
  return line;
}

/** Fills `target` from `filled` on: the buffered bytes, then reads straight into it. */
async function readExactInto(
  connection: Connection,
  target: Uint8Array,
  filled: number,
): Promise<void> {
  for (filled += connection.takeInto(target, filled); filled < target.length;) {
    const n = await connection.readInto(target.subarray(filled));
    if (n === null) throw closedMidAnswer();
    filled += n;
  }
}

/** The CRLF that ends a chunk's data. */
async function expectCrlf(connection: Connection): Promise<void> {
  while (connection.end - connection.start < 2) {
    if (!(await connection.fill())) throw closedMidAnswer();
  }
  const { buf, start } = connection;
  if (buf[start] !== 13 || buf[start + 1] !== 10) {
    throw new AnswerError("the answer has a chunk longer than its size");
  }
  connection.start += 2;
}

async function readChunked(connection: Connection, maxBodyBytes: number): Promise<Uint8Array> {
  const pieces: Uint8Array[] = [];
  let total = 0;
  while (true) {
    const line = await readLine(connection, MAX_CHUNK_LINE_BYTES);
    const match = CHUNK_LINE.exec(line);
    if (!match) {
      throw new AnswerError(`the answer has a malformed chunk size line ${JSON.stringify(line)}`);
    }
    const size = parseInt(match[1], 16);
    if (size === 0) break;
    if (size > maxBodyBytes - total) throw tooLarge(maxBodyBytes);
    const piece = new Uint8Array(size);
    await readExactInto(connection, piece, 0);
    pieces.push(piece);
    total += size;
    await expectCrlf(connection);
  }
  // Trailers are read and dropped.
  let trailerBytes = 0;
  while (true) {
    const line = await readLine(connection, MAX_ANSWER_HEAD_BYTES);
    if (line === "") break;
    trailerBytes += line.length + 2;
    if (trailerBytes > MAX_ANSWER_HEAD_BYTES) {
      throw new AnswerError(`the answer's trailers are larger than ${MAX_ANSWER_HEAD_BYTES} bytes`);
    }
  }
  return pieces.length === 1 ? pieces[0] : concatBytes(pieces, total);
}

async function readToEnd(connection: Connection, maxBodyBytes: number): Promise<Uint8Array> {
  const pieces: Uint8Array[] = [];
  let total = connection.end - connection.start;
  if (total > maxBodyBytes) throw tooLarge(maxBodyBytes);
  if (total > 0) {
    pieces.push(connection.buf.slice(connection.start, connection.end));
    connection.start = connection.end;
  }
  while (true) {
    const chunk = new Uint8Array(Math.min(READ_TO_END_BYTES, maxBodyBytes - total + 1));
    const n = await connection.readInto(chunk);
    if (n === null) return concatBytes(pieces, total);
    total += n;
    if (total > maxBodyBytes) throw tooLarge(maxBodyBytes);
    pieces.push(chunk.subarray(0, n));
  }
}
