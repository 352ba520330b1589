/**
 * A kept-alive connection to a peer, with the bytes read from it and not yet
 * used (`buf[start, end)`), and its place in a pool (busy, idle, closed).
 * At most one read is pending; one into the buffer fills it from `end`, so
 * the buffer is only moved or replaced when none is. An idle connection
 * keeps a read pending, so a close, a reset or stray bytes from the peer
 * show it dead before it is reused.
 *
 * @module
 */

/** The byte stream a connection needs (a Deno.Conn is one). */
export interface ByteConn {
  /** Reads into `p`: the count, or null at the end of the stream. */
  read(p: Uint8Array): Promise<number | null>;
  /** Writes from `p`: the count accepted. */
  write(p: Uint8Array): Promise<number>;
  close(): void;
}

/**
 * Writes every byte of `bytes` to `conn`, however its writes split them.
 *
 * @example
 * ```ts
 * import { type ByteConn, writeAll } from "./connection.ts";
 * declare const conn: ByteConn;
 * await writeAll(conn, new TextEncoder().encode("GET / HTTP/1.1\r\n\r\n"));
 * ```
 */
export async function writeAll(conn: ByteConn, bytes: Uint8Array): Promise<void> {
  for (let offset = 0; offset < bytes.length;) {
    offset += await conn.write(offset === 0 ? bytes : bytes.subarray(offset));
  }
}

const RESOLVED = Promise.resolve();

/**
 * A connection's read buffer: heads, chunk lines and small bodies are read
 * into it; it grows for a longer head or line, and shrinks back once empty.
 * A body past what it holds is read straight into the body's own array.
 */
export const BUFFER_BYTES = 16 * 1024;

/**
 * One connection to a peer and its read buffer.
 *
 * @example
 * ```ts
 * import { type ByteConn, Connection } from "./connection.ts";
 * declare const conn: ByteConn;
 * declare const pool: { discard(dead: Connection): void };
 * const connection = new Connection("http://b:8080", conn, (dead) => pool.discard(dead));
 * await connection.fill();
 * ```
 */
export class Connection {
  state: "busy" | "idle" | "closed" = "busy";
  /** Answers read on this connection: above 0, it is a reused one. */
  served = 0;
  /** The clock's monotonic time when it last went idle. */
  idleSince = 0;
  /** Whether the last answer left it fit for another request. */
  reusable = false;
  buf: Uint8Array = new Uint8Array(BUFFER_BYTES);
  start = 0;
  end = 0;
  /** Bytes the peer sent on it, ever. */
  bytesRead = 0;
  #reading: Promise<void> | undefined;
  #eof = false;
  #failed = false;
  #failure: unknown;
  readonly #onRead: (n: number | null) => void;
  readonly #onReadError: (error: unknown) => void;

  /** `onIdleDead` is called when a read shows an idle connection dead. */
  constructor(
    readonly peerKey: string,
    readonly conn: ByteConn,
    onIdleDead: (connection: Connection) => void,
  ) {
    this.#onRead = (n) => {
      this.#reading = undefined;
      if (n === null) this.#eof = true;
      else {
        this.end += n;
        this.bytesRead += n;
      }
      if (this.state === "idle" && this.dead) onIdleDead(this);
    };
    this.#onReadError = (error) => {
      this.#reading = undefined;
      this.#failed = true;
      this.#failure = error;
      if (this.state === "idle") onIdleDead(this);
    };
  }

  /** The peer closed or reset it, or sent bytes nobody asked for. */
  get dead(): boolean {
    return this.#eof || this.#failed || this.end > this.start;
  }

  /**
   * Starts a read into the buffer unless one is pending or the stream
   * ended; resolves once it settled, never rejects. On an idle connection
   * it is the read that sees a close, a reset or stray bytes.
   */
  read(): Promise<void> {
    if (this.#eof || this.#failed) return RESOLVED;
    return this.#reading ??= this.#readOnce();
  }

  #readOnce(): Promise<void> {
    const kept = this.end - this.start;
    if (kept === 0) {
      this.start = this.end = 0;
      if (this.buf.length > BUFFER_BYTES) this.buf = new Uint8Array(BUFFER_BYTES);
    } else if (this.end === this.buf.length) {
      if (kept * 2 <= this.buf.length) {
        this.buf.copyWithin(0, this.start, this.end);
      } else {
        const grown = new Uint8Array(this.buf.length * 2);
        grown.set(this.buf.subarray(this.start, this.end));
        this.buf = grown;
      }
      this.start = 0;
      this.end = kept;
    }
    let pending: Promise<number | null>;
    try {
      pending = this.conn.read(this.buf.subarray(this.end));
    } catch (error) {
      pending = Promise.reject(error);
    }
    return pending.then(this.#onRead, this.#onReadError);
  }

  /** Reads until more bytes are buffered: false at the end of the stream; throws a read error. */
  async fill(): Promise<boolean> {
    const before = this.end - this.start;
    while (this.end - this.start === before) {
      if (this.#failed) throw this.#failure;
      if (this.#eof) return false;
      await this.read();
    }
    return true;
  }

  /** Moves up to `target.length - offset` buffered bytes to `target` at `offset`; how many. */
  takeInto(target: Uint8Array, offset: number): number {
    const n = Math.min(target.length - offset, this.end - this.start);
    if (n > 0) {
      target.set(this.buf.subarray(this.start, this.start + n), offset);
      this.start += n;
    }
    return n;
  }

  /**
   * Bytes for `target`: buffered ones first, else read straight into it
   * (no copy). How many; null at the end of the stream; throws a read error.
   */
  async readInto(target: Uint8Array): Promise<number | null> {
    while (this.#reading) await this.#reading;
    if (this.end > this.start) return this.takeInto(target, 0);
    if (this.#failed) throw this.#failure;
    if (this.#eof) return null;
    let pending: Promise<number | null>;
    try {
      pending = this.conn.read(target);
    } catch (error) {
      pending = Promise.reject(error);
    }
    let n: number | null = null;
    await (this.#reading = pending.then((got) => {
      this.#reading = undefined;
      n = got;
      if (got === null) this.#eof = true;
    }, (error) => {
      this.#reading = undefined;
      this.#failed = true;
      this.#failure = error;
    }));
    if (this.#failed) throw this.#failure;
    return n;
  }

  /** Resolves once no read is pending (after `close`, the pending one fails soon). */
  settled(): Promise<void> {
    return this.#reading ?? RESOLVED;
  }

  close(): void {
    this.state = "closed";
    try {
      this.conn.close();
    } catch {
      // Already closed.
    }
  }
}
