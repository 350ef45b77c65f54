import ipaddr from 'ipaddr.js';

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

/** An IPv4-mapped IPv6 address (::ffff:127.0.0.1) is judged as the IPv4 address it carries. */
function normalised(address: string): ipaddr.IPv4 | ipaddr.IPv6 {
  const parsed = ipaddr.parse(address);
  return parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()
    ? (parsed as ipaddr.IPv6).toIPv4Address()
    : parsed;
}

/** Null when the address may be reached; otherwise why not ("loopback", "link-local", …). */
export function refusedAddress(address: string, allowed: readonly Network[]): string | null {
  if (!ipaddr.isValid(address)) return 'not an IP address';
  const parsed = normalised(address);
  if (allowed.some((network) => network[0].kind() === parsed.kind() && parsed.match(network))) return null;
  const range = parsed.range();
  if (range === 'unicast') return null;
  return RANGE_NAMES[range] ?? 'reserved';
}

/** The URL's host as an IP literal (brackets of IPv6 removed), or null when it is a name. */
export function literalAddress(url: URL): string | null {
  const host = url.hostname.startsWith('[') ? url.hostname.slice(1, -1) : url.hostname;
  return ipaddr.isValid(host) && (host.includes(':') || ipaddr.IPv4.isValidFourPartDecimal(host)) ? host : null;
}

export const MAX_WEBHOOK_URL_LENGTH = 2_048;

export interface DestinationRules {
  allowHttp: boolean;
  allowedNetworks: readonly Network[];
}

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
    problems.push(rules.allowHttp ? 'must be an http: or https: URL' : 'must be an https: URL');
  }
  if (url.username !== '' || url.password !== '') problems.push('must not carry a user name or password');
  if (text.includes('#')) problems.push('must not have a fragment');
  const literal = literalAddress(url);
  if (literal !== null) {
    const refusal = refusedAddress(literal, rules.allowedNetworks);
    if (refusal !== null) problems.push(`must not name a ${refusal} address`);
  }
  return problems;
}
