/**
 * What the node's addresses say: the names its certificate is for, and
 * whether an address it advertises is reachable from the internet (then
 * plain HTTP between nodes is warned about).
 *
 * @module
 */

/**
 * The names the node's certificate is for: the advertised host, and the
 * bound one when specific.
 *
 * @example
 * ```ts
 * import { identityHosts } from "./addresses.ts";
 * identityHosts("0.0.0.0", "https://a.internal:7443"); // ["a.internal"]
 * ```
 */
export function identityHosts(hostname: string, advertise: string): string[] {
  const hosts = [new URL(advertise).hostname.replace(/^\[(.*)\]$/, "$1")];
  if (hostname !== "0.0.0.0" && hostname !== "::" && !hosts.includes(hostname)) {
    hosts.push(hostname);
  }
  return hosts;
}

/**
 * Whether an advertised URL's host is a public address: not loopback,
 * private (RFC 1918, RFC 4193), link-local or a single-label name.
 *
 * @example
 * ```ts
 * import { isPublicAddress } from "./addresses.ts";
 * isPublicAddress("http://10.0.0.5:8080"); // false
 * ```
 */
export function isPublicAddress(url: string): boolean {
  const host = new URL(url).hostname.replace(/^\[(.*)\]$/, "$1").toLowerCase();
  if (host === "localhost" || !host.includes(".") && !host.includes(":")) return false;
  const v4 = host.match(/^(\d+)\.(\d+)\.(\d+)\.(\d+)$/);
  if (v4) {
    const [a, b] = [Number(v4[1]), Number(v4[2])];
    return !(a === 10 || a === 127 || (a === 172 && b >= 16 && b <= 31) ||
      (a === 192 && b === 168) || (a === 169 && b === 254) || (a === 100 && b >= 64 && b <= 127));
  }
  if (host.includes(":")) {
    return !(host === "::1" || host.startsWith("fc") || host.startsWith("fd") ||
      host.startsWith("fe80"));
  }
  // A name: private by convention only under these suffixes.
  return !/\.(internal|local|lan|home\.arpa|localdomain)$/.test(host);
}
