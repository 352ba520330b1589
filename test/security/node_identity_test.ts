import assert from "node:assert/strict";
import { createPrivateKey, createPublicKey, X509Certificate } from "node:crypto";
import {
  certificateFingerprint,
  createNodeIdentity,
  IDENTITY_BACKDATE_MS,
  IDENTITY_VALIDITY_YEARS,
  type NodeIdentity,
} from "../../src/security/node_identity.ts";
import { derBitString, derElement, derInteger, derOid, derTime } from "../../src/security/der.ts";
import type { Clock } from "../../src/time/clock.ts";

const HOSTS = ["127.0.0.1", "::1", "node-a.internal", "[2001:db8::7]", "::ffff:10.0.0.1"];
const decoder = new TextDecoder();

function fixedClock(now: number): Clock {
  return {
    now: () => now,
    monotonic: () => 0,
    sleep: () => Promise.resolve(),
    setTimer: () => ({ cancel() {} }),
  };
}

/** Runs openssl with `pem` on stdin; its exit code and output. */
async function openssl(args: string[], pem = ""): Promise<{ code: number; out: string }> {
  const child = new Deno.Command("openssl", {
    args,
    stdin: "piped",
    stdout: "piped",
    stderr: "piped",
  }).spawn();
  const writer = child.stdin.getWriter();
  await writer.write(new TextEncoder().encode(pem));
  await writer.close();
  const { code, stdout, stderr } = await child.output();
  return { code, out: decoder.decode(stdout) + decoder.decode(stderr) };
}

/** `openssl verify` of the leaf against the CA alone, strictly, for `purpose`. */
async function opensslVerify(identity: NodeIdentity, purpose: string): Promise<string> {
  const dir = await Deno.makeTempDir({ prefix: "wasmkeep-identity-" });
  try {
    await Deno.writeTextFile(`${dir}/ca.pem`, identity.caPem);
    await Deno.writeTextFile(`${dir}/leaf.pem`, identity.certPem);
    const { code, out } = await openssl([
      "verify",
      "-x509_strict",
      "-purpose",
      purpose,
      "-CAfile",
      `${dir}/ca.pem`,
      `${dir}/leaf.pem`,
    ]);
    return `${code} ${out.trim().replace(`${dir}/`, "")}`;
  } finally {
    await Deno.remove(dir, { recursive: true });
  }
}

Deno.test("both certificates parse, the CA is a CA, and it signed the leaf", async () => {
  const identity = await createNodeIdentity({ nodeId: "node-a", hosts: HOSTS });
  const ca = new X509Certificate(identity.caPem);
  const leaf = new X509Certificate(identity.certPem);

  assert.equal(ca.ca, true);
  assert.equal(leaf.ca, false);
  assert.equal(ca.subject, "CN=wasmkeep node node-a CA");
  assert.equal(ca.issuer, ca.subject);
  assert.equal(leaf.subject, "CN=wasmkeep node node-a");
  assert.equal(leaf.issuer, ca.subject);
  assert.ok(leaf.checkIssued(ca), "the CA issued the leaf");
  assert.ok(leaf.verify(ca.publicKey), "the leaf's signature verifies with the CA's key");
  assert.ok(ca.verify(ca.publicKey), "the CA signed itself");

  const other = new X509Certificate(
    (await createNodeIdentity({ nodeId: "node-a", hosts: HOSTS })).caPem,
  );
  assert.equal(leaf.verify(other.publicKey), false, "another identity's CA did not sign it");

  // OpenSSL's strict chain checks, with the key usages of a TLS server and client.
  assert.equal(await opensslVerify(identity, "sslserver"), "0 leaf.pem: OK");
  assert.equal(await opensslVerify(identity, "sslclient"), "0 leaf.pem: OK");
});

Deno.test("the extensions: CA and key usages, critical where they must be", async () => {
  const identity = await createNodeIdentity({ nodeId: "b", hosts: ["10.0.0.12"] });
  const ca = await openssl(["x509", "-noout", "-text"], identity.caPem);
  assert.equal(ca.code, 0, ca.out);
  assert.match(ca.out, /Basic Constraints: critical\s+CA:TRUE, pathlen:0/);
  assert.match(ca.out, /Key Usage: critical\s+Certificate Sign, CRL Sign\n/);
  assert.match(ca.out, /ecdsa-with-SHA256/);
  assert.match(ca.out, /NIST CURVE: P-256/);

  const leaf = await openssl(["x509", "-noout", "-text"], identity.certPem);
  assert.equal(leaf.code, 0, leaf.out);
  assert.match(leaf.out, /Basic Constraints: critical\s+CA:FALSE/);
  assert.match(leaf.out, /Key Usage: critical\s+Digital Signature\n/);
  assert.match(
    leaf.out,
    /Extended Key Usage: \s+TLS Web Server Authentication, TLS Web Client Authentication\n/,
  );
  assert.match(leaf.out, /Subject Alternative Name: \s+IP Address:10.0.0.12\n/);
  // The leaf names its CA's key, so a verifier picks the right issuer.
  const caKeyId = ca.out.match(/Subject Key Identifier: \s+([0-9A-F:]+)/)?.[1];
  assert.ok(caKeyId);
  assert.match(leaf.out, new RegExp(`Authority Key Identifier: \\s+${caKeyId}`));
});

Deno.test("subjectAltName holds each host as an IP address or a DNS name", async () => {
  const identity = await createNodeIdentity({ nodeId: "node-a", hosts: HOSTS });
  const leaf = new X509Certificate(identity.certPem);
  assert.equal(
    leaf.subjectAltName,
    "IP Address:127.0.0.1, IP Address:::1, DNS:node-a.internal, " +
      "IP Address:2001:db8::7, IP Address:::ffff:10.0.0.1",
  );
  assert.equal(leaf.checkIP("127.0.0.1"), "127.0.0.1");
  assert.equal(leaf.checkHost("node-a.internal"), "node-a.internal");
  assert.equal(leaf.checkIP("127.0.0.2"), undefined);
});

Deno.test("the fingerprint is the leaf's SHA-256 in node's and OpenSSL's format", async () => {
  const identity = await createNodeIdentity({ nodeId: "a", hosts: ["127.0.0.1"] });
  const leaf = new X509Certificate(identity.certPem);
  assert.match(identity.fingerprint, /^([0-9A-F]{2}:){31}[0-9A-F]{2}$/);
  assert.equal(identity.fingerprint, leaf.fingerprint256);
  const { code, out } = await openssl(
    ["x509", "-noout", "-fingerprint", "-sha256"],
    identity.certPem,
  );
  assert.equal(code, 0, out);
  // "sha256 Fingerprint=AB:CD:…" ("SHA256 Fingerprint=" in older versions).
  assert.equal(out.trim().split("=")[1], identity.fingerprint);

  assert.equal(await certificateFingerprint(identity.certPem), identity.fingerprint);
  assert.equal(
    await certificateFingerprint(identity.chainPem),
    identity.fingerprint,
    "the leaf of a chain",
  );
  assert.equal(await certificateFingerprint(new Uint8Array(leaf.raw)), identity.fingerprint);
  assert.equal(
    await certificateFingerprint(identity.caPem),
    new X509Certificate(identity.caPem).fingerprint256,
  );
  await assert.rejects(() => certificateFingerprint(identity.keyPem), /no PEM CERTIFICATE/);
  await assert.rejects(
    () => certificateFingerprint(new Uint8Array([1, 2, 3])),
    /not a DER certificate/,
  );
});

Deno.test("the key is the leaf's, in PKCS#8", async () => {
  const identity = await createNodeIdentity({ nodeId: "a", hosts: ["127.0.0.1"] });
  assert.match(identity.keyPem, /^-----BEGIN PRIVATE KEY-----\n/);
  const key = createPrivateKey(identity.keyPem);
  assert.equal(key.asymmetricKeyType, "ec");
  const fromKey = createPublicKey(key).export({ format: "der", type: "spki" });
  const fromCert = new X509Certificate(identity.certPem).publicKey.export({
    format: "der",
    type: "spki",
  });
  assert.deepEqual(new Uint8Array(fromKey), new Uint8Array(fromCert));
  const caKey = new X509Certificate(identity.caPem).publicKey.export({
    format: "der",
    type: "spki",
  });
  assert.notDeepEqual(
    new Uint8Array(caKey),
    new Uint8Array(fromCert),
    "the CA has a key of its own",
  );
  assert.equal(identity.chainPem, identity.certPem + identity.caPem);
});

Deno.test("validity runs from an hour before now to ten years after, by the given clock", async () => {
  const now = Date.UTC(2031, 4, 6, 7, 8, 9, 999);
  const identity = await createNodeIdentity({
    nodeId: "a",
    hosts: ["127.0.0.1"],
    clock: fixedClock(now),
  });
  for (const pem of [identity.certPem, identity.caPem]) {
    const cert = new X509Certificate(pem);
    assert.equal(Date.parse(cert.validFrom), Date.UTC(2031, 4, 6, 6, 8, 9));
    assert.equal(Date.parse(cert.validTo), Date.UTC(2031 + IDENTITY_VALIDITY_YEARS, 4, 6, 7, 8, 9));
  }
  assert.equal(IDENTITY_BACKDATE_MS, 3_600_000);
});

Deno.test("serials are random, positive and 16 bytes; each call makes a new key", async () => {
  const first = await createNodeIdentity({ nodeId: "a", hosts: ["127.0.0.1"] });
  const second = await createNodeIdentity({ nodeId: "a", hosts: ["127.0.0.1"] });
  const serials = [first.certPem, first.caPem, second.certPem, second.caPem].map((pem) =>
    new X509Certificate(pem).serialNumber
  );
  for (const serial of serials) assert.match(serial, /^[4-7][0-9A-F]{31}$/);
  assert.equal(new Set(serials).size, 4);
  assert.notEqual(first.fingerprint, second.fingerprint);
  assert.notEqual(first.keyPem, second.keyPem);
});

Deno.test("a 63-character node id makes a certificate OpenSSL and node:crypto read", async () => {
  const nodeId = "n".repeat(63);
  const identity = await createNodeIdentity({ nodeId, hosts: ["127.0.0.1"] });
  assert.equal(new X509Certificate(identity.certPem).subject, `CN=wasmkeep node ${nodeId}`);
  assert.equal(await opensslVerify(identity, "sslclient"), "0 leaf.pem: OK");
});

Deno.test("bad node ids and hosts are refused with the reason", async () => {
  const make = (nodeId: string, hosts: string[]) => createNodeIdentity({ nodeId, hosts });
  await assert.rejects(() => make("Node_A", ["127.0.0.1"]), {
    name: "RangeError",
    message: /^the node id of a certificate: 'Node_A' is not a node id/,
  });
  await assert.rejects(() => make("a", []), /at least one host/);
  await assert.rejects(() => make("a", new Array(33).fill("127.0.0.1")), /at most 32 hosts/);
  for (
    const host of [
      "exa mple",
      "1.2.3.256",
      "::1::2",
      "1::2::3",
      "010.0.0.1",
      "a..b",
      "1.2.3.4::1",
      "fe80::1%eth0",
    ]
  ) {
    await assert.rejects(() => make("a", [host]), /neither an IP address nor a DNS name/, host);
  }
});

Deno.test("der: lengths, integers, identifiers, bit strings and times", () => {
  const hex = (bytes: Uint8Array) =>
    Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join(" ");
  assert.equal(hex(derElement(0x04, new Uint8Array(127))).slice(0, 5), "04 7f");
  assert.equal(hex(derElement(0x04, new Uint8Array(128))).slice(0, 8), "04 81 80");
  assert.equal(hex(derElement(0x04, new Uint8Array(300))).slice(0, 11), "04 82 01 2c");
  assert.equal(hex(derElement(0x04, new Uint8Array(70_000))).slice(0, 14), "04 83 01 11 70");

  assert.equal(hex(derInteger(new Uint8Array([0]))), "02 01 00");
  assert.equal(hex(derInteger(new Uint8Array([0, 0, 5]))), "02 01 05");
  assert.equal(hex(derInteger(new Uint8Array([0x80]))), "02 02 00 80");
  assert.equal(hex(derInteger(new Uint8Array([0, 0xff, 1]))), "02 03 00 ff 01");

  assert.equal(hex(derOid("1.2.840.10045.4.3.2")), "06 08 2a 86 48 ce 3d 04 03 02");
  assert.equal(hex(derOid("2.5.29.17")), "06 03 55 1d 11");
  assert.equal(hex(derOid("2.999.3")), "06 03 88 37 03");
  assert.throws(() => derOid("1.40"), /below 40/);
  assert.throws(() => derOid("1.2.03"), /not an object identifier/);

  assert.equal(hex(derBitString(new Uint8Array([0x06]), 1)), "03 02 01 06");
  assert.throws(() => derBitString(new Uint8Array([0x07]), 1), /must exist and be zero/);

  const text = (bytes: Uint8Array) => `${bytes[0]} ${decoder.decode(bytes.subarray(2))}`;
  assert.equal(text(derTime(new Date("2049-12-31T23:59:59.900Z"))), "23 491231235959Z");
  assert.equal(text(derTime(new Date("2050-01-01T00:00:00Z"))), "24 20500101000000Z");
  assert.throws(() => derTime(new Date("1949-12-31T00:00:00Z")), /cannot be a certificate time/);
});
