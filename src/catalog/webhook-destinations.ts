import ipaddr from 'ipaddr.js';
import type { Config } from '../kernel/config.ts';

/**
 * Where a webhook may connect (issue 27, no SSRF). Only globally routable unicast addresses, as ipaddr.js classifies
 * them (IANA special-purpose registries), unless the operator allows a network with WEBHOOK_ALLOWED_NETWORKS. The
 * same rule refuses a URL that names an address when the webhook is saved, and every resolved address when the
 * worker connects (src/jobs/webhooks/send.ts), so a name that resolves to 127.0.0.1 or 169.254.169.254 is refused
 * whatever it resolved to when the webhook was created.
 */
export type Network = [ipaddr.IPv4 | ipaddr.IPv6, number];

/** The names the refusals use for ipaddr.js' ranges; any other range that is not `unicast` is `reserved`. */
const RANGE_NAMES: Record<string, string> = {
  loopback: 'loopback',
  private: 'private (RFC 1918)',
  uniqueLocal: 'private (fc00::/7)',
  linkLocal: 'link-local',
  carrierGradeNat: 'shared (100.64.0.0/10)',
  unspecified: 'unspecified',
  broadcast: 'broadcast',
  multicast: 'multicast',
};

/** Parses WEBHOOK_ALLOWED_NETWORKS: comma-separated CIDRs. Throws on a malformed one, so a typo fails at start-up. */
export function parseNetworks(text: string): Network[] {
  return text
    .split(',')
    .map((part) => part.trim())
    .filter(Boolean)
    .map((cidr) => {
      try {
        return ipaddr.parseCIDR(cidr);
      } catch {
        throw new Error(`WEBHOOK_ALLOWED_NETWORKS: "${cidr}" is not a CIDR (e.g. 10.0.0.0/8 or fd00::/8)`);
      }
    });
}

/**
 * An IPv6 address that carries an IPv4 address in its last 32 bits is judged as that IPv4 address: IPv4-mapped
 * (::ffff:127.0.0.1) and the deprecated IPv4-compatible form (::127.0.0.1, RFC 4291 §2.5.5.1), which ipaddr.js
 * calls `unicast` and some stacks still route to the IPv4 address. :: and ::1 keep their own ranges.
 */
function normalised(address: string): ipaddr.IPv4 | ipaddr.IPv6 {
  const parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv4') return parsed;
  const v6 = parsed as ipaddr.IPv6;
  if (v6.isIPv4MappedAddress()) return v6.toIPv4Address();
  const compatible = v6.parts.slice(0, 6).every((part) => part === 0) && (v6.parts[6] !== 0 || v6.parts[7]! > 1);
  return compatible ? ipaddr.fromByteArray(v6.toByteArray().slice(12)) : v6;
}

/** Null when the address may be reached; otherwise why not ("loopback", "link-local", …). */
export function refusedAddress(address: string, allowed: readonly Network[]): string | null {
  if (!ipaddr.isValid(address)) return 'not an IP address';
  if (inAllowedNetwork(address, allowed)) return null;
  const range = normalised(address).range();
  if (range === 'unicast') return null;
  return RANGE_NAMES[range] ?? 'reserved';
}

/** The URL's host as an IP literal (brackets of IPv6 removed), or null when it is a name. */
export function literalAddress(url: URL): string | null {
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  return ipaddr.isValid(host) && (host.includes(':') || ipaddr.IPv4.isValidFourPartDecimal(host)) ? host : null;
}

/**
 * Parses WEBHOOK_ALLOWED_PORTS: comma-separated ports a webhook may use besides 443 (and 80 with
 * WEBHOOK_ALLOW_HTTP). Throws on anything but 1-65535, so a typo fails at start-up.
 */
export function parsePorts(text: string): number[] {
  return text
    .split(',')
    .map((part) => part.trim())
    .filter(Boolean)
    .map((part) => {
      const port = /^\d{1,5}$/.test(part) ? Number(part) : 0;
      if (port < 1 || port > 65_535) throw new Error(`WEBHOOK_ALLOWED_PORTS: "${part}" is not a port (1-65535)`);
      return port;
    });
}

export const MAX_WEBHOOK_URL_LENGTH = 2_048;

export interface DestinationRules {
  allowHttp: boolean;
  allowedNetworks: readonly Network[];
  /** Ports besides 443 (and 80 with allowHttp) that any allowed address may be reached on. */
  allowedPorts: readonly number[];
}

type DestinationConfig = Pick<Config, 'WEBHOOK_ALLOW_HTTP' | 'WEBHOOK_ALLOWED_NETWORKS' | 'WEBHOOK_ALLOWED_PORTS'>;

const rulesCache = new Map<string, DestinationRules>();

/** The rules a configuration sets, parsed once per distinct configuration (the service and the worker share them). */
export function destinationRules(config: DestinationConfig): DestinationRules {
  const cacheKey = `${config.WEBHOOK_ALLOW_HTTP}|${config.WEBHOOK_ALLOWED_NETWORKS}|${config.WEBHOOK_ALLOWED_PORTS}`;
  let rules = rulesCache.get(cacheKey);
  if (!rules) {
    rules = {
      allowHttp: config.WEBHOOK_ALLOW_HTTP,
      allowedNetworks: parseNetworks(config.WEBHOOK_ALLOWED_NETWORKS),
      allowedPorts: parsePorts(config.WEBHOOK_ALLOWED_PORTS),
    };
    rulesCache.set(cacheKey, rules);
  }
  return rules;
}

/** The port a URL connects to: its own, or its scheme's default. */
export function portOf(url: URL): number {
  if (url.port !== '') return Number(url.port);
  return url.protocol === 'http:' ? 80 : 443;
}

function inAllowedNetwork(address: string, allowed: readonly Network[]): boolean {
  const parsed = normalised(address);
  return allowed.some((network) => network[0].kind() === parsed.kind() && parsed.match(network));
}

/**
 * Null when `port` may be used to reach every one of `addresses`; otherwise why not. 443, 80 when http: is allowed,
 * and WEBHOOK_ALLOWED_PORTS go anywhere an address may; any other port only to addresses that are all inside
 * WEBHOOK_ALLOWED_NETWORKS, which the operator trusts as a whole (an internal receiver on :8080). Without this a
 * webhook could probe a public host's SSH, SMTP or database ports and read the answers in its delivery log.
 */
export function refusedPort(port: number, addresses: readonly string[], rules: DestinationRules): string | null {
  if (port === 443 || (port === 80 && rules.allowHttp) || rules.allowedPorts.includes(port)) return null;
  if (addresses.length > 0 && addresses.every((address) => inAllowedNetwork(address, rules.allowedNetworks)))
    return null;
  return `port ${port} is not allowed (443${rules.allowHttp ? ' or 80' : ''}; WEBHOOK_ALLOWED_PORTS can add it)`;
}

/** A refused address at creation, with the setting that would allow it, so the operator knows the fix. */
const ALLOW_NETWORK_HINT = 'WEBHOOK_ALLOWED_NETWORKS can allow its network';

/** Every reason a webhook URL is refused when it is saved (422), as messages; empty when it is acceptable. */
export function urlProblems(text: string, rules: DestinationRules): string[] {
  if (text.length > MAX_WEBHOOK_URL_LENGTH) return [`must be at most ${MAX_WEBHOOK_URL_LENGTH} characters`];
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return ['must be an absolute URL'];
  }
  const problems: string[] = [];
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && rules.allowHttp)) {
    problems.push(
      rules.allowHttp
        ? 'must be an http: or https: URL'
        : 'must be an https: URL (WEBHOOK_ALLOW_HTTP=true allows http:)',
    );
  }
  if (url.username !== '' || url.password !== '') problems.push('must not carry a user name or password');
  if (text.includes('#')) problems.push('must not have a fragment');
  const literal = literalAddress(url);
  if (literal !== null) {
    const refusal = refusedAddress(literal, rules.allowedNetworks);
    if (refusal !== null) problems.push(`must not name a ${refusal} address (${ALLOW_NETWORK_HINT})`);
    else {
      const port = refusedPort(portOf(url), [literal], rules);
      if (port !== null) problems.push(port);
    }
  }
  return problems;
}

/**
 * The problems of a URL whose host is a name, given what the name resolved to (empty: it did not resolve). Any
 * refused answer refuses the URL, as the connect-time lookup would (src/jobs/webhooks/send.ts); a name that does not
 * resolve is accepted (docs/decisions/webhooks.md, "No SSRF"), but then only on a port allowed everywhere.
 */
export function resolvedProblems(url: URL, addresses: readonly string[], rules: DestinationRules): string[] {
  for (const address of addresses) {
    const refusal = refusedAddress(address, rules.allowedNetworks);
    if (refusal !== null)
      return [
        `${url.hostname} resolves to ${address}, a ${refusal} address webhooks may not reach (${ALLOW_NETWORK_HINT})`,
      ];
  }
  const port = refusedPort(portOf(url), addresses, rules);
  return port === null ? [] : [port];
}
