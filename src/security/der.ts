/**
 * The few DER (ASN.1 Distinguished Encoding Rules) encoders that a node's
 * certificates need: enough to write an X.509 v3 certificate, no decoder.
 * Each function returns the complete encoding (tag, length, contents), so
 * structures are built by nesting calls.
 *
 * @example A SEQUENCE of an INTEGER and an OBJECT IDENTIFIER
 * ```ts
 * import { derInteger, derOid, derSequence } from "./der.ts";
 * const bytes = derSequence(derInteger(new Uint8Array([1])), derOid("2.5.4.3"));
 * ```
 *
 * @module
 */

import { concatBytes } from "../bytes.ts";

/** Universal tags used here. */
const TAG_BOOLEAN = 0x01;
const TAG_INTEGER = 0x02;
const TAG_BIT_STRING = 0x03;
const TAG_OCTET_STRING = 0x04;
const TAG_OID = 0x06;
const TAG_UTF8_STRING = 0x0c;
const TAG_IA5_STRING = 0x16;
const TAG_UTC_TIME = 0x17;
const TAG_GENERALIZED_TIME = 0x18;
const TAG_SEQUENCE = 0x30;
const TAG_SET = 0x31;

const encoder = new TextEncoder();

/**
 * One element: `tag`, then the length in DER's shortest form, then `contents`.
 *
 * @example A context-specific, primitive [2] element (a SAN DNS name)
 * ```ts
 * import { derElement } from "./der.ts";
 * derElement(0x82, new TextEncoder().encode("node-a.internal"));
 * ```
 */
export function derElement(tag: number, contents: Uint8Array): Uint8Array<ArrayBuffer> {
  if (!Number.isInteger(tag) || tag < 0 || tag > 0xfe || (tag & 0x1f) === 0x1f) {
    throw new RangeError(`DER tag ${tag} is not a one-byte tag`);
  }
  const length = contents.length;
  let head: number[];
  if (length < 0x80) {
    head = [tag, length];
  } else {
    const lengthBytes: number[] = [];
    for (let rest = length; rest > 0; rest = Math.floor(rest / 256)) {
      lengthBytes.unshift(rest % 256);
    }
    head = [tag, 0x80 | lengthBytes.length, ...lengthBytes];
  }
  const out = new Uint8Array(head.length + length);
  out.set(head);
  out.set(contents, head.length);
  return out;
}

/**
 * A SEQUENCE of already encoded elements.
 *
 * @example
 * ```ts
 * import { derBoolean, derSequence } from "./der.ts";
 * derSequence(derBoolean(true)); // basicConstraints' value for a CA
 * ```
 */
export function derSequence(...elements: Uint8Array[]): Uint8Array<ArrayBuffer> {
  return derElement(TAG_SEQUENCE, join(elements));
}

/**
 * A SET of already encoded elements. DER orders a SET OF by encoding; the
 * caller passes them in order (every SET written here has one element).
 *
 * @example
 * ```ts
 * import { derOid, derSequence, derSet, derUtf8String } from "./der.ts";
 * derSet(derSequence(derOid("2.5.4.3"), derUtf8String("wasmkeep node a")));
 * ```
 */
export function derSet(...elements: Uint8Array[]): Uint8Array<ArrayBuffer> {
  return derElement(TAG_SET, join(elements));
}

/**
 * An explicitly tagged element: `[number]` constructed, wrapping `inner`.
 *
 * @example The version field of a v3 certificate
 * ```ts
 * import { derExplicit, derInteger } from "./der.ts";
 * derExplicit(0, derInteger(new Uint8Array([2]))); // X.509 v3
 * ```
 */
export function derExplicit(number: number, inner: Uint8Array): Uint8Array<ArrayBuffer> {
  if (!Number.isInteger(number) || number < 0 || number > 30) {
    throw new RangeError(`context tag [${number}] is not a low tag number`);
  }
  return derElement(0xa0 | number, inner);
}

/**
 * A BOOLEAN (DER writes true as 0xff).
 *
 * @example
 * ```ts
 * import { derBoolean } from "./der.ts";
 * derBoolean(true); // 01 01 ff
 * ```
 */
export function derBoolean(value: boolean): Uint8Array<ArrayBuffer> {
  return derElement(TAG_BOOLEAN, new Uint8Array([value ? 0xff : 0x00]));
}

/**
 * A non-negative INTEGER from its unsigned big-endian bytes, in DER's
 * minimal form: leading zero bytes dropped, one zero byte added when the
 * top bit is set (so it does not read as negative).
 *
 * @example An ECDSA signature's `r`
 * ```ts
 * import { derInteger } from "./der.ts";
 * derInteger(new Uint8Array([0x00, 0x80])); // 02 02 00 80
 * ```
 */
export function derInteger(bytes: Uint8Array): Uint8Array<ArrayBuffer> {
  let start = 0;
  while (start < bytes.length - 1 && bytes[start] === 0) start++;
  const trimmed = bytes.length === 0 ? new Uint8Array([0]) : bytes.subarray(start);
  if (trimmed[0] & 0x80) {
    const padded = new Uint8Array(trimmed.length + 1);
    padded.set(trimmed, 1);
    return derElement(TAG_INTEGER, padded);
  }
  return derElement(TAG_INTEGER, trimmed);
}

/**
 * A BIT STRING of whole bytes, or with `unusedBits` low bits of the last
 * byte unused (they must be zero, as DER requires).
 *
 * @example keyUsage digitalSignature (bit 0)
 * ```ts
 * import { derBitString } from "./der.ts";
 * derBitString(new Uint8Array([0x80]), 7); // 03 02 07 80
 * ```
 */
export function derBitString(bytes: Uint8Array, unusedBits = 0): Uint8Array<ArrayBuffer> {
  if (!Number.isInteger(unusedBits) || unusedBits < 0 || unusedBits > 7) {
    throw new RangeError(`BIT STRING with ${unusedBits} unused bits`);
  }
  if (
    unusedBits > 0 && (bytes.length === 0 || (bytes[bytes.length - 1] & ((1 << unusedBits) - 1)))
  ) {
    throw new RangeError("BIT STRING unused bits must exist and be zero");
  }
  const contents = new Uint8Array(bytes.length + 1);
  contents[0] = unusedBits;
  contents.set(bytes, 1);
  return derElement(TAG_BIT_STRING, contents);
}

/**
 * An OCTET STRING.
 *
 * @example An extension's value, itself DER
 * ```ts
 * import { derBoolean, derOctetString, derSequence } from "./der.ts";
 * derOctetString(derSequence(derBoolean(true)));
 * ```
 */
export function derOctetString(bytes: Uint8Array): Uint8Array<ArrayBuffer> {
  return derElement(TAG_OCTET_STRING, bytes);
}

/**
 * An OBJECT IDENTIFIER from its dotted form.
 *
 * @example ecdsa-with-SHA256
 * ```ts
 * import { derOid } from "./der.ts";
 * derOid("1.2.840.10045.4.3.2");
 * ```
 */
export function derOid(dotted: string): Uint8Array<ArrayBuffer> {
  if (!/^[0-2](\.(0|[1-9][0-9]*))+$/.test(dotted)) {
    throw new RangeError(`"${dotted}" is not an object identifier`);
  }
  const arcs = dotted.split(".").map(BigInt);
  if (arcs[0] < 2n && arcs[1] > 39n) {
    throw new RangeError(`"${dotted}": the second arc must be below 40`);
  }
  const out: number[] = [];
  const values = [arcs[0] * 40n + arcs[1], ...arcs.slice(2)];
  for (const value of values) {
    const base128: number[] = [Number(value & 0x7fn)];
    for (let rest = value >> 7n; rest > 0n; rest >>= 7n) {
      base128.unshift(Number(rest & 0x7fn) | 0x80);
    }
    out.push(...base128);
  }
  return derElement(TAG_OID, new Uint8Array(out));
}

/**
 * A UTF8String.
 *
 * @example
 * ```ts
 * import { derUtf8String } from "./der.ts";
 * derUtf8String("wasmkeep node a");
 * ```
 */
export function derUtf8String(text: string): Uint8Array<ArrayBuffer> {
  return derElement(TAG_UTF8_STRING, encoder.encode(text));
}

/**
 * An IA5String (ASCII), or `tag` in its place for an implicitly tagged
 * one such as a subjectAltName dNSName (`0x82`).
 *
 * @example
 * ```ts
 * import { derIa5String } from "./der.ts";
 * derIa5String("node-a.internal", 0x82);
 * ```
 */
export function derIa5String(text: string, tag = TAG_IA5_STRING): Uint8Array<ArrayBuffer> {
  // deno-lint-ignore no-control-regex
  if (!/^[\x00-\x7f]*$/.test(text)) throw new RangeError(`"${text}" is not ASCII`);
  return derElement(tag, encoder.encode(text));
}

/**
 * A certificate validity time as RFC 5280 (4.1.2.5) has it: UTCTime
 * through 2049, GeneralizedTime from 2050; whole seconds, in UTC.
 *
 * @example
 * ```ts
 * import { derTime } from "./der.ts";
 * derTime(new Date("2030-01-02T03:04:05Z")); // UTCTime 300102030405Z
 * ```
 */
export function derTime(date: Date): Uint8Array<ArrayBuffer> {
  const year = date.getUTCFullYear();
  if (!Number.isFinite(date.getTime()) || year < 1950 || year > 9999) {
    throw new RangeError(`${date} cannot be a certificate time`);
  }
  const two = (n: number) => String(n).padStart(2, "0");
  const rest = two(date.getUTCMonth() + 1) + two(date.getUTCDate()) + two(date.getUTCHours()) +
    two(date.getUTCMinutes()) + two(date.getUTCSeconds()) + "Z";
  if (year < 2050) return derElement(TAG_UTC_TIME, encoder.encode(two(year % 100) + rest));
  return derElement(TAG_GENERALIZED_TIME, encoder.encode(String(year) + rest));
}

function join(elements: Uint8Array[]): Uint8Array {
  let total = 0;
  for (const element of elements) total += element.length;
  return concatBytes(elements, total);
}
