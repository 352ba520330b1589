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

/** The text of `bytes` if they are all ASCII, else `undefined`. */
function readAscii(bytes: Uint8Array): string | undefined {
  let text = "";
  for (let i = 0; i < bytes.length; i++) {
    const byte = bytes[i];
    if (byte >= 0x80) return undefined;
    text += String.fromCharCode(byte);
  }
  return text;
}

/**
 * Writes `value` into `target` and returns the number of bytes written.
 *
 * @example
 * ```ts
 * import { decodePlain, encodePlain } from "./codec.ts";
 * const buffer = new Uint8Array(64);
 * const length = encodePlain({ n: 1n }, buffer);
 * decodePlain(buffer.subarray(0, length)); // { n: 1n }
 * ```
 */
export function encodePlain(value: Plain, target: Uint8Array): number {
  const view = new DataView(target.buffer, target.byteOffset, target.byteLength);
  let offset = 0;
  const reserve = (size: number) => {
    if (offset + size > target.byteLength) throw new MessageTooLarge(target.byteLength);
  };
  const writeLength = (length: number) => {
    reserve(4);
    view.setUint32(offset, length, true);
    offset += 4;
  };
  const writeBytes = (bytes: Uint8Array) => {
    writeLength(bytes.byteLength);
    reserve(bytes.byteLength);
    target.set(bytes, offset);
    offset += bytes.byteLength;
  };
  const writeString = (text: string) => {
    // At most three bytes per UTF-16 unit, so checking that bound first lets
    // encodeInto write straight into the target without a copy.
    const room = target.byteLength - offset - 4;
    if (
      text.length <= SHORT_STRING && text.length <= room && writeAscii(text, target, offset + 4)
    ) {
      view.setUint32(offset, text.length, true);
      offset += 4 + text.length;
    } else if (text.length * 3 <= room) {
      const { written } = textEncoder.encodeInto(text, target.subarray(offset + 4));
      view.setUint32(offset, written, true);
      offset += 4 + written;
    } else {
      writeBytes(textEncoder.encode(text));
    }
  };
  const write = (item: Plain) => {
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
      view.setFloat64(offset, item, true);
      offset += 8;
    } else if (typeof item === "bigint") {
      target[offset++] = Tag.BigInt;
      reserve(8);
      view.setBigInt64(offset, item, true);
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
      for (const element of item) write(element);
    } else {
      target[offset++] = Tag.Object;
      const entries = Object.entries(item);
      writeLength(entries.length);
      for (const [key, element] of entries) {
        writeString(key);
        write(element);
      }
    }
  };
  write(value);
  return offset;
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
export function decodePlain(source: Uint8Array): Plain {
  const view = new DataView(source.buffer, source.byteOffset, source.byteLength);
  let offset = 0;
  const readLength = () => {
    const length = view.getUint32(offset, true);
    offset += 4;
    return length;
  };
  const readString = () => {
    const length = readLength();
    const bytes = source.subarray(offset, offset + length);
    const text = (length <= SHORT_STRING ? readAscii(bytes) : undefined) ??
      textDecoder.decode(bytes);
    offset += length;
    return text;
  };
  const read = (): Plain => {
    const tag = source[offset++];
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
        const value = view.getFloat64(offset, true);
        offset += 8;
        return value;
      }
      case Tag.BigInt: {
        const value = view.getBigInt64(offset, true);
        offset += 8;
        return value;
      }
      case Tag.String:
        return readString();
      case Tag.Bytes: {
        const length = readLength();
        const bytes = source.slice(offset, offset + length);
        offset += length;
        return bytes;
      }
      case Tag.Array: {
        const length = readLength();
        const items: Plain[] = new Array(length);
        for (let i = 0; i < length; i++) items[i] = read();
        return items;
      }
      case Tag.Object: {
        const length = readLength();
        const object: Record<string, Plain> = {};
        for (let i = 0; i < length; i++) {
          const key = readString();
          object[key] = read();
        }
        return object;
      }
      default:
        throw new Error(`corrupt message: unknown tag ${tag} at byte ${offset - 1}`);
    }
  };
  return read();
}
