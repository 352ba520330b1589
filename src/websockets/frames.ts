/**
 * WebSocket frames (RFC 6455, section 5) for the sockets this node speaks
 * over a connection of its own: a socket relayed between nodes, whose
 * relaying node is the client and whose owner the server. Encoding masks
 * what a client sends (with a random key, as the RFC asks) and never what
 * a server sends; decoding refuses, as a protocol error (1002), a frame
 * masked the wrong way for its side, reserved bits or opcodes, a control
 * frame that is fragmented or over 125 bytes, and a length past the limit
 * it is given (1009).
 *
 * @module
 */

/** Frame opcodes (RFC 6455, section 5.2). */
export const OPCODE = {
  continuation: 0x0,
  text: 0x1,
  binary: 0x2,
  close: 0x8,
  ping: 0x9,
  pong: 0xa,
} as const;

/** A frame as read: its opcode, whether it ends its message, and its payload (unmasked). */
export interface Frame {
  fin: boolean;
  opcode: number;
  payload: Uint8Array;
}

/** A frame the peer should not have sent: the connection fails with `code`. */
export class FrameError extends Error {
  override name = "FrameError";
  /** The close code to fail with: 1002 (protocol error) or 1009 (too big). */
  readonly code: number;

  /** Fails with `code` for `message`. */
  constructor(code: number, message: string) {
    super(message);
    this.code = code;
  }
}

/**
 * One frame's bytes. `mask` is the client's four random bytes, or
 * undefined for a server's unmasked frame.
 *
 * @example
 * ```ts
 * import { encodeFrame, OPCODE } from "./frames.ts";
 * encodeFrame(OPCODE.text, new TextEncoder().encode("hi"), undefined); // 81 02 68 69
 * ```
 */
export function encodeFrame(
  opcode: number,
  payload: Uint8Array,
  mask: Uint8Array | undefined,
  fin = true,
): Uint8Array {
  const length = payload.length;
  const extended = length < 126 ? 0 : length < 65_536 ? 2 : 8;
  const headerLength = 2 + extended + (mask ? 4 : 0);
  const frame = new Uint8Array(headerLength + length);
  frame[0] = (fin ? 0x80 : 0) | opcode;
  const view = new DataView(frame.buffer);
  if (extended === 0) frame[1] = length;
  else if (extended === 2) {
    frame[1] = 126;
    view.setUint16(2, length);
  } else {
    frame[1] = 127;
    view.setBigUint64(2, BigInt(length));
  }
  if (!mask) {
    frame.set(payload, headerLength);
    return frame;
  }
  frame[1] |= 0x80;
  frame.set(mask, 2 + extended);
  for (let i = 0; i < length; i++) frame[headerLength + i] = payload[i] ^ mask[i & 3];
  return frame;
}

/**
 * Reads frames out of the bytes of a connection as they come, in pieces
 * of any size; what is buffered is at most one frame (its header and a
 * payload of at most `maxPayload`).
 *
 * @example
 * ```ts
 * import { encodeFrame, FrameReader, OPCODE } from "./frames.ts";
 * const reader = new FrameReader({ masked: false, maxPayload: 1024 });
 * reader.push(encodeFrame(OPCODE.text, new Uint8Array([104, 105]), undefined));
 * reader.next()?.opcode; // 1
 * ```
 */
export class FrameReader {
  readonly #masked: boolean;
  readonly #maxPayload: number;
  #buffer = new Uint8Array(0);

  /**
   * `masked`: whether the peer's frames must be masked (a server reading a
   * client's); `maxPayload`: the largest payload accepted.
   */
  constructor(options: { masked: boolean; maxPayload: number }) {
    this.#masked = options.masked;
    this.#maxPayload = options.maxPayload;
  }

  /** Adds bytes read from the connection. */
  push(bytes: Uint8Array): void {
    if (this.#buffer.length === 0) {
      this.#buffer = bytes.slice();
      return;
    }
    const joined = new Uint8Array(this.#buffer.length + bytes.length);
    joined.set(this.#buffer);
    joined.set(bytes, this.#buffer.length);
    this.#buffer = joined;
  }

  /** The next whole frame, or undefined until more bytes come; throws a {@linkcode FrameError}. */
  next(): Frame | undefined {
    const buffer = this.#buffer;
    if (buffer.length < 2) return undefined;
    const fin = (buffer[0] & 0x80) !== 0;
    if ((buffer[0] & 0x70) !== 0) throw new FrameError(1002, "a frame has reserved bits set");
    const opcode = buffer[0] & 0x0f;
    const known = opcode <= OPCODE.binary || (opcode >= OPCODE.close && opcode <= OPCODE.pong);
    if (!known) throw new FrameError(1002, `a frame has the reserved opcode ${opcode}`);
    const masked = (buffer[1] & 0x80) !== 0;
    if (masked !== this.#masked) {
      throw new FrameError(
        1002,
        masked ? "a server's frame is masked" : "a client's frame is not masked",
      );
    }
    let length = buffer[1] & 0x7f;
    let offset = 2;
    if (length === 126) {
      if (buffer.length < 4) return undefined;
      length = (buffer[2] << 8) | buffer[3];
      offset = 4;
    } else if (length === 127) {
      if (buffer.length < 10) return undefined;
      const long = new DataView(buffer.buffer, buffer.byteOffset + 2, 8).getBigUint64(0);
      if (long > BigInt(this.#maxPayload)) throw tooBig(this.#maxPayload);
      length = Number(long);
      offset = 10;
    }
    if (opcode >= OPCODE.close && (length > 125 || !fin)) {
      throw new FrameError(1002, "a control frame is fragmented or longer than 125 bytes");
    }
    if (length > this.#maxPayload) throw tooBig(this.#maxPayload);
    const maskAt = offset;
    if (masked) offset += 4;
    if (buffer.length < offset + length) return undefined;
    const payload = buffer.slice(offset, offset + length);
    if (masked) {
      for (let i = 0; i < length; i++) payload[i] ^= buffer[maskAt + (i & 3)];
    }
    this.#buffer = buffer.subarray(offset + length);
    return { fin, opcode, payload };
  }
}

function tooBig(max: number): FrameError {
  return new FrameError(1009, `a frame is longer than ${max} bytes`);
}

/**
 * A close frame's payload: its code (none for 1005, "no status") and reason.
 *
 * @example
 * ```ts
 * import { closePayload } from "./frames.ts";
 * closePayload(1000, "bye"); // 03 e8 62 79 65
 * ```
 */
export function closePayload(code: number | undefined, reason: string): Uint8Array {
  if (code === undefined || code === 1005) return new Uint8Array(0);
  const text = new TextEncoder().encode(reason);
  const payload = new Uint8Array(2 + text.length);
  payload[0] = code >> 8;
  payload[1] = code & 0xff;
  payload.set(text, 2);
  return payload;
}

/** A close frame's code and reason; throws a {@linkcode FrameError} for a malformed one. */
export function readClose(payload: Uint8Array): { code: number; reason: string } {
  if (payload.length === 0) return { code: 1005, reason: "" };
  if (payload.length === 1) throw new FrameError(1002, "a close frame has a one-byte payload");
  const code = (payload[0] << 8) | payload[1];
  const valid = (code >= 1000 && code <= 1003) || (code >= 1007 && code <= 1014) ||
    (code >= 3000 && code <= 4999);
  if (!valid) throw new FrameError(1002, `a close frame has the code ${code}`);
  return { code, reason: decodeText(payload.subarray(2)) };
}

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

/** UTF-8 text of a message or a close reason; invalid UTF-8 fails with 1007. */
export function decodeText(bytes: Uint8Array): string {
  try {
    return strictUtf8.decode(bytes);
  } catch {
    throw new FrameError(1007, "a text message is not valid UTF-8");
  }
}
