/**
 * A compact binary encoding of plain values (null, booleans, numbers,
 * bigints, strings, byte arrays, arrays and plain objects) for messages that
 * cross threads through shared memory, where `postMessage` cannot be used.
 * JSON would lose bigints (SQLite's 64-bit integers) and inflate blobs.
 *
 * @module
 */

/** What the codec carries. */
export type Plain =
  | null
  | undefined
  | boolean
  | number
  | bigint
  | string
  | Uint8Array
  | Plain[]
  | { [key: string]: Plain };

const enum Tag {
  Null = 0,
  False = 1,
  True = 2,
  Float = 3,
  BigInt = 4,
  String = 5,
  Bytes = 6,
  Array = 7,
  Object = 8,
  Undefined = 9,
}

/** Raised when a message does not fit the space it must be written into. */
export class MessageTooLarge extends Error {
  /** @param limit the space available, in bytes */
  constructor(readonly limit: number) {
    super(`the message is larger than ${limit} bytes`);
    this.name = "MessageTooLarge";
  }
}

const textEncoder = new TextEncoder();
const textDecoder = new TextDecoder();

/**
 * Strings up to this length are tried as ASCII in JavaScript first: most of
 * a message's strings are short keys and header names, and TextEncoder and
 * TextDecoder each cost a call into the runtime (measured: about a tenth of
 * the main thread's time per request went to them).
 */
const SHORT_STRING = 64;

/** Writes `text` at `at` if it is all ASCII; returns whether it did. */
function writeAscii(text: string, target: Uint8Array, at: number): boolean {
  for (let i = 0; i < text.length; i++) {
    const code = text.charCodeAt(i);
    if (code >= 0x80) return false;
    target[at + i] = code;
  }
  return true;
}

/** Slots of the table of recently decoded short strings (a power of two). */
const RECENT_SLOTS = 4096;

/** Slots of the table of recently decoded longer strings (a power of two). */
const RECENT_LONG_SLOTS = 256;

/** The longest string {@linkcode asciiText} makes; longer ones go to TextDecoder. */
export const MAX_ASCII_TEXT = 256;

/**
 * Recently decoded ASCII strings, one per slot by a hash of their bytes. The
 * same few strings come in every message (keys, header names and values,
 * actor names, an actor's SQL), and comparing bytes with a string already
 * made costs far less than making it again: a request frame decodes in
 * 2.3 µs instead of 6.7. Bounded: at most 4,096 strings of up to 64 bytes
 * and 256 of up to 256 bytes.
 */
const recent: string[] = new Array(RECENT_SLOTS).fill("");
const recentLong: string[] = new Array(RECENT_LONG_SLOTS).fill("");

/**
 * The string of the `length` bytes of `bytes` at `at` if they are all ASCII
 * and `length` is at most {@linkcode MAX_ASCII_TEXT}, else `undefined`. The
 * caller checks the bytes are within `bytes`.
 *
 * @example
 * ```ts
 * import { asciiText } from "./codec.ts";
 * asciiText(new Uint8Array([104, 105]), 0, 2); // "hi"
 * ```
 */
export function asciiText(bytes: Uint8Array, at: number, length: number): string | undefined {
  if (length > MAX_ASCII_TEXT) return undefined;
  let hash = 0x811c9dc5 ^ length;
  for (let i = 0; i < length; i++) {
    const byte = bytes[at + i];
    if (byte >= 0x80) return undefined;
    hash = Math.imul(hash ^ byte, 0x01000193);
  }
  hash ^= hash >>> 15;
  const table = length <= SHORT_STRING ? recent : recentLong;
  const slot = hash & (table.length - 1);
  const known = table[slot];
  if (known.length === length) {
    let i = 0;
    while (i < length && known.charCodeAt(i) === bytes[at + i]) i++;
    if (i === length) return known;
  }
  let text = "";
  for (let i = 0; i < length; i++) text += String.fromCharCode(bytes[at + i]);
  table[slot] = text;
  return text;
}

/**
 * Property names written as one byte, their index here: the names of the
 * messages between the node and its executors (protocol.ts), which every
 * message repeats. Written in full, a name cost a length and its bytes, and
 * on reading a hash of them and a comparison with the table of recent
 * strings: with these, an event's frame decodes in 1.0-1.1 µs instead of
 * 1.4 and an answer's in 0.76 instead of 0.95 (measured; encoding costs
 * about the same, a map lookup per name instead of writing its bytes). Any
 * other name is written in full after {@linkcode FULL_KEY}. Both sides of a
 * connection run the same code, so the list may change; it must stay under
 * 255 names.
 */
const KNOWN_KEYS = [
  "type",
  "seq",
  "actor",
  "tenant",
  "class",
  "name",
  "generation",
  "until",
  "request",
  "method",
  "path",
  "query",
  "headers",
  "body",
  "response",
  "status",
  "message",
  "id",
  "ok",
  "answer",
  "error",
  "caller",
  "chain",
  "target",
  "landed",
  "by",
] as const;

/** The key byte before a property name written in full. */
const FULL_KEY = 255;

const KNOWN_KEY_INDEX = new Map<string, number>(KNOWN_KEYS.map((key, index) => [key, index]));

const EMPTY = new Uint8Array(0);

/** Buffers up to this size stay referenced between messages, with their views. */
const KEEP_BYTES = 1024 * 1024;

/** The encoder's state while it writes one value (it calls nothing that could re-enter it). */
let target: Uint8Array = EMPTY;
let targetView: DataView = new DataView(EMPTY.buffer);
/** Where the next byte goes, in target. */
let offset = 0;
/** Where the space for this value ends, in target. */
let stop = 0;
/** The size of that space, for MessageTooLarge. */
let limitBytes = 0;

function reserve(size: number) {
  if (offset + size > stop) throw new MessageTooLarge(limitBytes);
}

function writeLength(length: number) {
  reserve(4);
  targetView.setUint32(offset, length, true);
  offset += 4;
}

function writeBytes(bytes: Uint8Array) {
  writeLength(bytes.byteLength);
  reserve(bytes.byteLength);
  target.set(bytes, offset);
  offset += bytes.byteLength;
}

function writeString(text: string) {
  // At most three bytes per UTF-16 unit, so checking that bound first lets
  // encodeInto write straight into the target without a copy.
  const room = stop - offset - 4;
  if (
    text.length <= SHORT_STRING && text.length <= room && writeAscii(text, target, offset + 4)
  ) {
    targetView.setUint32(offset, text.length, true);
    offset += 4 + text.length;
  } else if (text.length * 3 <= room) {
    const { written } = textEncoder.encodeInto(text, target.subarray(offset + 4, stop));
    targetView.setUint32(offset, written, true);
    offset += 4 + written;
  } else {
    writeBytes(textEncoder.encode(text));
  }
}

function write(item: Plain) {
  reserve(1);
  if (item === null) {
    target[offset++] = Tag.Null;
  } else if (item === undefined) {
    target[offset++] = Tag.Undefined;
  } else if (item === true || item === false) {
    target[offset++] = item ? Tag.True : Tag.False;
  } else if (typeof item === "number") {
    target[offset++] = Tag.Float;
    reserve(8);
    targetView.setFloat64(offset, item, true);
    offset += 8;
  } else if (typeof item === "bigint") {
    target[offset++] = Tag.BigInt;
    reserve(8);
    targetView.setBigInt64(offset, item, true);
    offset += 8;
  } else if (typeof item === "string") {
    target[offset++] = Tag.String;
    writeString(item);
  } else if (item instanceof Uint8Array) {
    target[offset++] = Tag.Bytes;
    writeBytes(item);
  } else if (Array.isArray(item)) {
    target[offset++] = Tag.Array;
    writeLength(item.length);
    for (let i = 0; i < item.length; i++) write(item[i]);
  } else {
    target[offset++] = Tag.Object;
    // Object.keys and a loop instead of Object.entries, which is a call into
    // the runtime and an array per property (measured: 3 % of the main
    // thread's time).
    const keys = Object.keys(item);
    writeLength(keys.length);
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i];
      const known = KNOWN_KEY_INDEX.get(key);
      reserve(1);
      if (known !== undefined) {
        target[offset++] = known;
      } else {
        target[offset++] = FULL_KEY;
        writeString(key);
      }
      write(item[key]);
    }
  }
}

/**
 * Writes `value` into `into` and returns the number of bytes written.
 *
 * @example
 * ```ts
 * import { decodePlain, encodePlain } from "./codec.ts";
 * const buffer = new Uint8Array(64);
 * const length = encodePlain({ n: 1n }, buffer);
 * decodePlain(buffer.subarray(0, length)); // { n: 1n }
 * ```
 */
export function encodePlain(value: Plain, into: Uint8Array): number {
  return encodePlainAt(value, into, 0, into.byteLength);
}

/**
 * Writes `value` into `into` from byte `start`, using at most `limit` bytes,
 * and returns the number of bytes written; throws
 * {@linkcode MessageTooLarge} (with `limit`) when it does not fit.
 */
export function encodePlainAt(
  value: Plain,
  into: Uint8Array,
  start: number,
  limit: number,
): number {
  if (target !== into) {
    target = into;
    targetView = new DataView(into.buffer, into.byteOffset, into.byteLength);
  }
  offset = start;
  limitBytes = limit;
  stop = Math.min(start + limit, into.byteLength);
  try {
    write(value);
    return offset - start;
  } finally {
    // A large buffer is not kept alive for the next message.
    if (into.byteLength > KEEP_BYTES) {
      target = EMPTY;
      targetView = new DataView(EMPTY.buffer);
    }
  }
}

/** Byte arrays up to this length are copied in JavaScript. */
const SMALL_BYTES = 64;

/** The decoder's state while it reads one value. */
let source: Uint8Array = EMPTY;
/** A view of source, made when a number is read. */
let sourceView: DataView | undefined;
let at = 0;
/** Where the value being read must end. */
let end = 0;

function view(): DataView {
  return sourceView ??= new DataView(source.buffer, source.byteOffset, source.byteLength);
}

function readLength(): number {
  if (at + 4 > end) throw new RangeError("corrupt message: a length past the end");
  const length = (source[at] | (source[at + 1] << 8) | (source[at + 2] << 16) |
    (source[at + 3] << 24)) >>> 0;
  at += 4;
  return length;
}

function readString(): string {
  const length = readLength();
  if (at + length > end) throw new RangeError("corrupt message: a string past the end");
  const text = (length <= SHORT_STRING ? asciiText(source, at, length) : undefined) ??
    textDecoder.decode(source.subarray(at, at + length));
  at += length;
  return text;
}

function read(): Plain {
  if (at >= end) throw new RangeError("corrupt message: a value past the end");
  const tag = source[at++];
  switch (tag) {
    case Tag.Null:
      return null;
    case Tag.Undefined:
      return undefined;
    case Tag.False:
      return false;
    case Tag.True:
      return true;
    case Tag.Float: {
      if (at + 8 > end) throw new RangeError("corrupt message: a number past the end");
      const value = view().getFloat64(at, true);
      at += 8;
      return value;
    }
    case Tag.BigInt: {
      if (at + 8 > end) throw new RangeError("corrupt message: a number past the end");
      const value = view().getBigInt64(at, true);
      at += 8;
      return value;
    }
    case Tag.String:
      return readString();
    case Tag.Bytes: {
      const length = readLength();
      if (at + length > end) throw new RangeError("corrupt message: bytes past the end");
      // A fresh array either way. A small one is copied by hand: V8 keeps
      // it in its heap, where slice() would allocate it outside.
      let bytes: Uint8Array;
      if (length <= SMALL_BYTES) {
        bytes = new Uint8Array(length);
        for (let i = 0; i < length; i++) bytes[i] = source[at + i];
      } else {
        bytes = source.slice(at, at + length);
      }
      at += length;
      return bytes;
    }
    case Tag.Array: {
      const length = readLength();
      const items: Plain[] = [];
      for (let i = 0; i < length; i++) items.push(read());
      return items;
    }
    case Tag.Object: {
      const length = readLength();
      const object: Record<string, Plain> = {};
      for (let i = 0; i < length; i++) {
        if (at >= end) throw new RangeError("corrupt message: a key past the end");
        const index = source[at++];
        let key: string;
        if (index === FULL_KEY) key = readString();
        else if (index < KNOWN_KEYS.length) key = KNOWN_KEYS[index];
        else throw new Error(`corrupt message: unknown key ${index} at byte ${at - 1}`);
        object[key] = read();
      }
      return object;
    }
    default:
      throw new Error(`corrupt message: unknown tag ${tag} at byte ${at - 1}`);
  }
}

/**
 * Reads a value written by {@linkcode encodePlain}. Byte arrays are copied
 * out, so the source may be reused at once.
 *
 * @example
 * ```ts
 * import { decodePlain, encodePlain } from "./codec.ts";
 * const buffer = new Uint8Array(16);
 * decodePlain(buffer.subarray(0, encodePlain("hi", buffer))); // "hi"
 * ```
 */
export function decodePlain(from: Uint8Array): Plain {
  return decodePlainAt(from, 0, from.length);
}

/**
 * Reads the value written by {@linkcode encodePlain} in bytes `start` to
 * `stop` of `from` (as {@linkcode decodePlain} does with a subarray).
 */
export function decodePlainAt(from: Uint8Array, start: number, stop: number): Plain {
  if (source !== from) {
    source = from;
    sourceView = undefined;
  }
  at = start;
  end = stop;
  try {
    return read();
  } finally {
    // A large buffer is not kept alive for the next message.
    if (from.byteLength > KEEP_BYTES) {
      source = EMPTY;
      sourceView = undefined;
    }
  }
}
