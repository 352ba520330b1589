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

/** How an answer's body is delimited. */
export type BodyFraming =
  | { kind: "none" }
  | { kind: "length"; length: number }
  | { kind: "chunked" }
  | { kind: "close" };

/** An answer's head, its body not read yet. */
export interface AnswerHead {
  status: number;
  /** End-to-end headers, names in lower case (`content-length` kept). */
  headers: [string, string][];
  framing: BodyFraming;
  /** Whether the connection may carry another request once the body is read. */
  reusable: boolean;
}

/**
 * Largest piece of a streamed answer body handed on at once: what a
 * streamed answer holds in memory per exchange, beside the connection's
 * buffer.
 */
export const STREAM_CHUNK_BYTES = 64 * 1024;

/**
 * Reads one answer (skipping interim 1xx ones) and sets
 * `connection.reusable`; throws an AnswerError or a read error.
 *
 * @example
 * ```ts
 * import { readAnswer } from "./answer.ts";
 * import type { Connection } from "./connection.ts";
 * declare const connection: Connection;
 * const answer = await readAnswer(connection, "GET", 32 * 1024 * 1024);
 * ```
 */
export async function readAnswer(
  connection: Connection,
  method: string,
  maxBodyBytes: number,
): Promise<Answer> {
  const head = await readAnswerHead(connection, method, maxBodyBytes);
  const body = await new AnswerBody(connection, head, maxBodyBytes).readWhole();
  return { status: head.status, headers: head.headers, body };
}

/**
 * Reads an answer's head (skipping interim 1xx ones), leaving its body on
 * the connection; a 101 ends it when `switching` (an upgrade was asked
 * for). Throws an AnswerError (another 101, a body over `maxBodyBytes`
 * by its length, a framing that is not HTTP/1.1's) or a read error.
 *
 * @example
 * ```ts
 * import { AnswerBody, readAnswerHead } from "./answer.ts";
 * import type { Connection } from "./connection.ts";
 * declare const connection: Connection;
 * declare const send: (piece: Uint8Array) => void;
 * const head = await readAnswerHead(connection, "GET", 32 * 1024 * 1024);
 * const body = new AnswerBody(connection, head, 32 * 1024 * 1024);
 * for (let piece; (piece = await body.next()) !== null;) send(piece);
 * ```
 */
export async function readAnswerHead(
  connection: Connection,
  method: string,
  maxBodyBytes: number,
  switching = false,
): Promise<AnswerHead> {
  connection.reusable = false;
  let first = true;
  while (true) {
    const { version, status, headers } = await readHead(connection, first);
    first = false;
    if (status === 101) {
      // Only an upgrade asked for it; what follows is the other protocol's.
      if (!switching) throw new AnswerError("the peer switched protocols (101)");
      return { status, headers, framing: NONE, reusable: false };
    }
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
    let framing: BodyFraming;
    if (method === "HEAD" || status === 204 || status === 304) {
      framing = NONE;
    } else if (transferEncoding) {
      const codings = transferEncoding.join(",").split(",").map((c) => c.trim().toLowerCase());
      if (codings.length !== 1 || codings[0] !== "chunked") {
        throw new AnswerError(
          `the answer's transfer-encoding ${JSON.stringify(transferEncoding.join(", "))} ` +
            "is not chunked alone",
        );
      }
      framing = CHUNKED;
      if (contentLength) reusable = false;
    } else if (contentLength) {
      const length = parseContentLength(contentLength);
      if (length > maxBodyBytes) throw tooLarge(maxBodyBytes);
      framing = length === 0 ? NONE : { kind: "length", length };
    } else {
      framing = CLOSE;
      reusable = false;
    }
    return { status, headers: endToEnd(headers, tokens), framing, reusable };
  }
}

const NONE: BodyFraming = { kind: "none" };
const CHUNKED: BodyFraming = { kind: "chunked" };
const CLOSE: BodyFraming = { kind: "close" };

/**
 * An answer's body as it comes off the connection, in pieces of at most
 * {@linkcode STREAM_CHUNK_BYTES}, or whole; every part bounded as the whole
 * answer is. Sets `connection.reusable` once the body ended.
 *
 * @example
 * ```ts
 * import { AnswerBody, type AnswerHead } from "./answer.ts";
 * import type { Connection } from "./connection.ts";
 * declare const connection: Connection;
 * declare const head: AnswerHead;
 * const body = new AnswerBody(connection, head, 32 * 1024 * 1024);
 * const bytes = await body.readWhole();
 * ```
 */
export class AnswerBody {
  /** The head this body follows. */
  readonly head: AnswerHead;
  readonly #connection: Connection;
  readonly #framing: BodyFraming;
  readonly #reusable: boolean;
  readonly #max: number;
  /** Bytes handed on so far. */
  #total = 0;
  /** Bytes left in the current chunk (chunked) or the body (by length). */
  #left: number;
  #done = false;

  constructor(connection: Connection, head: AnswerHead, maxBodyBytes: number) {
    this.head = head;
    this.#connection = connection;
    this.#framing = head.framing;
    this.#reusable = head.reusable;
    this.#max = maxBodyBytes;
    this.#left = head.framing.kind === "length" ? head.framing.length : 0;
    if (head.framing.kind === "none") this.#end();
  }

  /** The body's length when its head states it, else undefined. */
  get length(): number | undefined {
    const framing = this.#framing;
    return framing.kind === "length" ? framing.length : framing.kind === "none" ? 0 : undefined;
  }

  /** Whether the body was read to its end. */
  get done(): boolean {
    return this.#done;
  }

  /** The next piece, or null after the last; throws an AnswerError or a read error. */
  async next(): Promise<Uint8Array | null> {
    if (this.#done) return null;
    const connection = this.#connection;
    switch (this.#framing.kind) {
      case "length": {
        const piece = new Uint8Array(Math.min(this.#left, STREAM_CHUNK_BYTES));
        const n = await connection.readInto(piece);
        if (n === null) throw closedMidAnswer();
        this.#left -= n;
        this.#total += n;
        if (this.#left === 0) this.#end();
        return n === piece.length ? piece : piece.subarray(0, n);
      }
      case "chunked": {
        if (this.#left === 0) {
          const size = await readChunkSize(connection);
          if (size === 0) {
            await readTrailers(connection);
            this.#end();
            return null;
          }
          if (size > this.#max - this.#total) throw tooLarge(this.#max);
          this.#left = size;
        }
        const piece = new Uint8Array(Math.min(this.#left, STREAM_CHUNK_BYTES));
        const n = await connection.readInto(piece);
        if (n === null) throw closedMidAnswer();
        this.#left -= n;
        this.#total += n;
        if (this.#left === 0) await expectCrlf(connection);
        return n === piece.length ? piece : piece.subarray(0, n);
      }
      case "close": {
        const piece = new Uint8Array(Math.min(READ_TO_END_BYTES, this.#max - this.#total + 1));
        const n = await connection.readInto(piece);
        if (n === null) {
          this.#end();
          return null;
        }
        this.#total += n;
        if (this.#total > this.#max) throw tooLarge(this.#max);
        return piece.subarray(0, n);
      }
      default:
        return null;
    }
  }

  /** The rest of the body at once (one array for a body of known length). */
  async readWhole(): Promise<Uint8Array> {
    if (this.#done) return EMPTY;
    if (this.#framing.kind === "length" && this.#total === 0) {
      const body = new Uint8Array(this.#left);
      await readExactInto(this.#connection, body, 0);
      this.#left = 0;
      this.#total = body.length;
      this.#end();
      return body;
    }
    const pieces: Uint8Array[] = [];
    let total = 0;
    for (let piece; (piece = await this.next()) !== null;) {
      pieces.push(piece);
      total += piece.length;
    }
    return pieces.length === 1 ? pieces[0] : concatBytes(pieces, total);
  }

  #end(): void {
    this.#done = true;
    const connection = this.#connection;
    // Bytes after the answer were not asked for: the connection is not in a known state.
    connection.reusable = this.#reusable && this.#framing.kind !== "close" &&
      connection.end === connection.start;
  }
}

/**
 * A body past its limit: an {@linkcode AnswerError} of its own, so that a
 * server reading a request's body this way can answer 413 rather than 400.
 *
 * @example
 * ```ts
 * import { BodyTooLarge } from "./answer.ts";
 * new BodyTooLarge(1024).message; // "the answer's body is larger than 1024 bytes"
 * ```
 */
export class BodyTooLarge extends AnswerError {
  /** The limit it went past. */
  readonly maxBodyBytes: number;

  /** The body went past `maxBodyBytes`. */
  constructor(maxBodyBytes: number) {
    super(`the answer's body is larger than ${maxBodyBytes} bytes`);
    this.maxBodyBytes = maxBodyBytes;
  }
}

function tooLarge(maxBodyBytes: number): AnswerError {
  return new BodyTooLarge(maxBodyBytes);
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

/** A chunk's size from its size line. */
async function readChunkSize(connection: Connection): Promise<number> {
  const line = await readLine(connection, MAX_CHUNK_LINE_BYTES);
  const match = CHUNK_LINE.exec(line);
  if (!match) {
    throw new AnswerError(`the answer has a malformed chunk size line ${JSON.stringify(line)}`);
  }
  return parseInt(match[1], 16);
}

/** Trailers are read and dropped, bounded as a head is. */
async function readTrailers(connection: Connection): Promise<void> {
  let trailerBytes = 0;
  while (true) {
    const line = await readLine(connection, MAX_ANSWER_HEAD_BYTES);
    if (line === "") return;
    trailerBytes += line.length + 2;
    if (trailerBytes > MAX_ANSWER_HEAD_BYTES) {
      throw new AnswerError(`the answer's trailers are larger than ${MAX_ANSWER_HEAD_BYTES} bytes`);
    }
  }
}
