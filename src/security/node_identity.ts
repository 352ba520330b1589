/**
 * A node's TLS identity for the cluster port: made in memory at start, never
 * written anywhere, new at every start (a restart is a new key). Peers do not
 * trust it through a CA but through its fingerprint, which the node
 * publishes in its heartbeat (running-a-cluster.md, "Encryption between
 * nodes"); a peer accepts the certificate only while a live heartbeat names
 * that fingerprint.
 *
 * Each identity is two certificates: a CA of its own and a leaf it signs.
 * The leaf alone, self-signed, would do for pinning, but rustls (Deno's TLS)
 * refuses a certificate that is its own CA as an end entity
 * (`CaUsedAsEndEntity`), and a chain lets a client that verifies by CA
 * (`Deno.connectTls({ caCerts: [caPem] })`) connect too. The CA's private
 * key is not extractable and is dropped once it signed the leaf, so it can
 * sign nothing else.
 *
 * @module
 */

import { assertNodeId } from "../node_id.ts";
import { type Clock, type Random, systemClock, systemRandom } from "../time/clock.ts";
import {
  derBitString,
  derBoolean,
  derElement,
  derExplicit,
  derIa5String,
  derInteger,
  derOctetString,
  derOid,
  derSequence,
  derSet,
  derTime,
  derUtf8String,
} from "./der.ts";

/** How long before its making a certificate is valid from, for peers whose clock is behind. */
export const IDENTITY_BACKDATE_MS = 60 * 60 * 1000;
/** How many years after its making a certificate stays valid (a process lives far less). */
export const IDENTITY_VALIDITY_YEARS = 10;
/** Random bytes in a serial number (RFC 5280 allows 20; the top bit is kept clear). */
export const SERIAL_BYTES = 16;
/** Most host names and addresses in one certificate. */
export const MAX_IDENTITY_HOSTS = 32;

const OID_COMMON_NAME = "2.5.4.3";
const OID_EC_PUBLIC_KEY_SHA256_SIGNATURE = "1.2.840.10045.4.3.2";
const OID_SUBJECT_KEY_IDENTIFIER = "2.5.29.14";
const OID_KEY_USAGE = "2.5.29.15";
const OID_SUBJECT_ALT_NAME = "2.5.29.17";
const OID_BASIC_CONSTRAINTS = "2.5.29.19";
const OID_AUTHORITY_KEY_IDENTIFIER = "2.5.29.35";
const OID_EXT_KEY_USAGE = "2.5.29.37";
const OID_SERVER_AUTH = "1.3.6.1.5.5.7.3.1";
const OID_CLIENT_AUTH = "1.3.6.1.5.5.7.3.2";

/** subjectAltName GeneralName tags (context-specific, implicit). */
const SAN_DNS_NAME = 0x82;
const SAN_IP_ADDRESS = 0x87;

const ECDSA_P256 = { name: "ECDSA", namedCurve: "P-256" } as const;
const ECDSA_SHA256 = { name: "ECDSA", hash: "SHA-256" } as const;

/** A node's key and certificates, as PEM text for `node:tls` and `Deno.connectTls`. */
export interface NodeIdentity {
  /** The node id the certificates name. */
  nodeId: string;
  /** The leaf's private key (PKCS#8). */
  keyPem: string;
  /** The leaf certificate alone. */
  certPem: string;
  /** The CA certificate that signed the leaf. */
  caPem: string;
  /** The leaf then the CA: what the node presents, as a server and as a client. */
  chainPem: string;
  /**
   * SHA-256 of the leaf's DER as uppercase hex pairs joined by colons, the
   * format of `node:tls`'s `fingerprint256` and `openssl x509 -fingerprint -sha256`.
   */
  fingerprint: string;
}

/** Options of {@linkcode createNodeIdentity}. */
export interface NodeIdentityOptions {
  /** The node's id (`[a-z0-9-]`, at most 63): in the certificates' common names. */
  nodeId: string;
  /**
   * Names and addresses the node is reached at (DNS names, IPv4, IPv6 with or
   * without brackets): the leaf's subjectAltName. At least one.
   */
  hosts: string[];
  /** Dates the validity; default the system clock. */
  clock?: Clock;
  /** Draws the serial numbers; default the system's random source. */
  random?: Random;
}

/**
 * Makes a new key and certificate chain for a node: an ECDSA P-256 CA and a
 * leaf it signed, valid from {@linkcode IDENTITY_BACKDATE_MS} before now for
 * {@linkcode IDENTITY_VALIDITY_YEARS} years, for both server and client
 * authentication. A new key at every call.
 *
 * @example
 * ```ts
 * import { createNodeIdentity } from "./node_identity.ts";
 * const identity = await createNodeIdentity({ nodeId: "a", hosts: ["10.0.0.11"] });
 * identity.fingerprint; // "3B:89:30:…", published in the heartbeat
 * ```
 */
export async function createNodeIdentity(options: NodeIdentityOptions): Promise<NodeIdentity> {
  const { nodeId } = options;
  assertNodeId(nodeId, "the node id of a certificate");
  const sanNames = options.hosts.map(subjectAltName);
  if (sanNames.length === 0) throw new TypeError("a node certificate needs at least one host");
  if (sanNames.length > MAX_IDENTITY_HOSTS) {
    throw new TypeError(`a node certificate takes at most ${MAX_IDENTITY_HOSTS} hosts`);
  }
  const clock = options.clock ?? systemClock;
  const random = options.random ?? systemRandom;
  const now = clock.now();
  const notBefore = new Date(now - IDENTITY_BACKDATE_MS);
  const notAfter = new Date(now);
  notAfter.setUTCFullYear(notAfter.getUTCFullYear() + IDENTITY_VALIDITY_YEARS);
  const validity = derSequence(derTime(notBefore), derTime(notAfter));

  const subtle = crypto.subtle;
  // The CA key is not extractable and goes out of reach when this returns.
  const ca = await subtle.generateKey(ECDSA_P256, false, ["sign"]) as CryptoKeyPair;
  const leaf = await subtle.generateKey(ECDSA_P256, true, ["sign"]) as CryptoKeyPair;
  const caSpki = new Uint8Array(await subtle.exportKey("spki", ca.publicKey));
  const leafSpki = new Uint8Array(await subtle.exportKey("spki", leaf.publicKey));
  const caKeyId = await keyIdentifier(ca.publicKey);
  const leafKeyId = await keyIdentifier(leaf.publicKey);
  const caName = commonName(`wasmkeep node ${nodeId} CA`);
  const leafName = commonName(`wasmkeep node ${nodeId}`);

  const caTbs = tbsCertificate(serial(random), caName, validity, caName, caSpki, [
    // CA, path length 0: it signs this one leaf, never another CA.
    extension(
      OID_BASIC_CONSTRAINTS,
      true,
      derSequence(derBoolean(true), derInteger(new Uint8Array([0]))),
    ),
    // keyCertSign (bit 5) and cRLSign (bit 6).
    extension(OID_KEY_USAGE, true, derBitString(new Uint8Array([0x06]), 1)),
    extension(OID_SUBJECT_KEY_IDENTIFIER, false, derOctetString(caKeyId)),
  ]);
  const leafTbs = tbsCertificate(serial(random), caName, validity, leafName, leafSpki, [
    extension(OID_BASIC_CONSTRAINTS, true, derSequence()),
    // digitalSignature (bit 0).
    extension(OID_KEY_USAGE, true, derBitString(new Uint8Array([0x80]), 7)),
    extension(
      OID_EXT_KEY_USAGE,
      false,
      derSequence(derOid(OID_SERVER_AUTH), derOid(OID_CLIENT_AUTH)),
    ),
    extension(OID_SUBJECT_ALT_NAME, false, derSequence(...sanNames)),
    extension(OID_SUBJECT_KEY_IDENTIFIER, false, derOctetString(leafKeyId)),
    extension(OID_AUTHORITY_KEY_IDENTIFIER, false, derSequence(derElement(0x80, caKeyId))),
  ]);
  const caDer = await signed(caTbs, ca.privateKey);
  const leafDer = await signed(leafTbs, ca.privateKey);
  const pkcs8 = new Uint8Array(await subtle.exportKey("pkcs8", leaf.privateKey));

  const certPem = pem("CERTIFICATE", leafDer);
  const caPem = pem("CERTIFICATE", caDer);
  return {
    nodeId,
    keyPem: pem("PRIVATE KEY", pkcs8),
    certPem,
    caPem,
    chainPem: certPem + caPem,
    fingerprint: await certificateFingerprint(leafDer),
  };
}

/**
 * SHA-256 of a certificate's DER, as uppercase hex pairs joined by colons
 * (`node:tls`'s `fingerprint256`). From PEM text, the first certificate in
 * it (the leaf of a chain).
 *
 * @example
 * ```ts
 * import { certificateFingerprint, createNodeIdentity } from "./node_identity.ts";
 * const identity = await createNodeIdentity({ nodeId: "a", hosts: ["127.0.0.1"] });
 * (await certificateFingerprint(identity.chainPem)) === identity.fingerprint; // true
 * ```
 */
export async function certificateFingerprint(pemOrDer: string | Uint8Array): Promise<string> {
  const der = typeof pemOrDer === "string" ? firstPemCertificate(pemOrDer) : pemOrDer.slice();
  if (der.length < 2 || der[0] !== 0x30) {
    throw new TypeError("not a DER certificate (it does not start with a SEQUENCE)");
  }
  const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", der));
  return Array.from(digest, (byte) => byte.toString(16).padStart(2, "0").toUpperCase()).join(":");
}

function tbsCertificate(
  serialNumber: Uint8Array,
  issuer: Uint8Array,
  validity: Uint8Array,
  subject: Uint8Array,
  spki: Uint8Array,
  extensions: Uint8Array[],
): Uint8Array<ArrayBuffer> {
  return derSequence(
    derExplicit(0, derInteger(new Uint8Array([2]))), // v3
    derInteger(serialNumber),
    derSequence(derOid(OID_EC_PUBLIC_KEY_SHA256_SIGNATURE)),
    issuer,
    validity,
    subject,
    spki,
    derExplicit(3, derSequence(...extensions)),
  );
}

/** The certificate: `tbs`, its algorithm and its signature by `key` (ECDSA-Sig-Value in DER). */
async function signed(tbs: Uint8Array<ArrayBuffer>, key: CryptoKey): Promise<Uint8Array> {
  // WebCrypto gives r and s side by side (IEEE P1363); X.509 wants them as a DER SEQUENCE.
  const raw = new Uint8Array(await crypto.subtle.sign(ECDSA_SHA256, key, tbs));
  const half = raw.length / 2;
  const signature = derSequence(derInteger(raw.subarray(0, half)), derInteger(raw.subarray(half)));
  return derSequence(
    tbs,
    derSequence(derOid(OID_EC_PUBLIC_KEY_SHA256_SIGNATURE)),
    derBitString(signature),
  );
}

function extension(oid: string, critical: boolean, value: Uint8Array): Uint8Array {
  return critical
    ? derSequence(derOid(oid), derBoolean(true), derOctetString(value))
    : derSequence(derOid(oid), derOctetString(value));
}

function commonName(name: string): Uint8Array {
  return derSequence(derSet(derSequence(derOid(OID_COMMON_NAME), derUtf8String(name))));
}

/** RFC 5280's first method: SHA-1 of the public key's bits (here the EC point). */
async function keyIdentifier(publicKey: CryptoKey): Promise<Uint8Array> {
  const point = await crypto.subtle.exportKey("raw", publicKey);
  return new Uint8Array(await crypto.subtle.digest("SHA-1", point));
}

/** A positive serial of exactly {@linkcode SERIAL_BYTES} bytes: top bit clear, next bit set. */
function serial(random: Random): Uint8Array {
  const bytes = random.fill(new Uint8Array(SERIAL_BYTES));
  bytes[0] = (bytes[0] & 0x3f) | 0x40;
  return bytes;
}

/** A subjectAltName entry: an iPAddress for an IPv4 or IPv6 address, a dNSName otherwise. */
function subjectAltName(host: string): Uint8Array {
  const address = parseIpv4(host) ?? parseIpv6(host);
  if (address) return derElement(SAN_IP_ADDRESS, address);
  if (!isDnsName(host)) {
    throw new TypeError(`"${host}" is neither an IP address nor a DNS name`);
  }
  return derIa5String(host, SAN_DNS_NAME);
}

function parseIpv4(text: string): Uint8Array | undefined {
  const parts = text.split(".");
  if (parts.length !== 4) return undefined;
  const bytes = new Uint8Array(4);
  for (let i = 0; i < 4; i++) {
    // No leading zeros: "010" reads as octal to some resolvers.
    if (!/^(0|[1-9][0-9]{0,2})$/.test(parts[i])) return undefined;
    const value = Number(parts[i]);
    if (value > 255) return undefined;
    bytes[i] = value;
  }
  return bytes;
}

function parseIpv6(text: string): Uint8Array | undefined {
  const bare = text.startsWith("[") && text.endsWith("]") ? text.slice(1, -1) : text;
  if (!bare.includes(":") || !/^[0-9a-fA-F:.]+$/.test(bare)) return undefined;
  const halves = bare.split("::");
  if (halves.length > 2) return undefined;
  // An embedded IPv4 address may only end the whole address.
  const head = ipv6Groups(halves[0], halves.length === 1);
  const tail = halves.length === 2 ? ipv6Groups(halves[1], true) : [];
  if (!head || !tail) return undefined;
  const missing = 8 - head.length - tail.length;
  if (halves.length === 1 ? missing !== 0 : missing < 1) return undefined;
  const bytes = new Uint8Array(16);
  [...head, ...new Array<number>(missing).fill(0), ...tail].forEach((group, i) => {
    bytes[2 * i] = group >> 8;
    bytes[2 * i + 1] = group & 0xff;
  });
  return bytes;
}

/** The 16-bit groups of one side of an IPv6 address's `::`. */
function ipv6Groups(half: string, mayEndWithIpv4: boolean): number[] | undefined {
  if (half === "") return [];
  const out: number[] = [];
  const pieces = half.split(":");
  for (let i = 0; i < pieces.length; i++) {
    const piece = pieces[i];
    if (mayEndWithIpv4 && i === pieces.length - 1 && piece.includes(".")) {
      const v4 = parseIpv4(piece);
      if (!v4) return undefined;
      out.push((v4[0] << 8) | v4[1], (v4[2] << 8) | v4[3]);
    } else if (/^[0-9a-fA-F]{1,4}$/.test(piece)) {
      out.push(parseInt(piece, 16));
    } else {
      return undefined;
    }
  }
  return out;
}

function isDnsName(text: string): boolean {
  if (text.length === 0 || text.length > 253) return false;
  const labels = text.split(".");
  // An all-numeric last label is a malformed address, not a name.
  if (/^[0-9]+$/.test(labels[labels.length - 1])) return false;
  return labels.every((label) => /^[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$/.test(label));
}

function pem(label: string, der: Uint8Array): string {
  let binary = "";
  for (const byte of der) binary += String.fromCharCode(byte);
  const base64 = btoa(binary);
  let body = "";
  for (let i = 0; i < base64.length; i += 64) body += base64.slice(i, i + 64) + "\n";
  return `-----BEGIN ${label}-----\n${body}-----END ${label}-----\n`;
}

function firstPemCertificate(text: string): Uint8Array<ArrayBuffer> {
  const match = text.match(
    /-----BEGIN CERTIFICATE-----([A-Za-z0-9+/=\s]+)-----END CERTIFICATE-----/,
  );
  if (!match) throw new TypeError("no PEM CERTIFICATE block in the text");
  const binary = atob(match[1].replace(/\s+/g, ""));
  return Uint8Array.from(binary, (char) => char.charCodeAt(0));
}
