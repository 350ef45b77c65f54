import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { OAUTH_SCOPES, type OAuthScope } from '../../kernel/authority.ts';
import { sha256Hex } from '../secrets.ts';

/**
 * The protocol pieces of OAuth 2.0 (RFC 6749) with PKCE (RFC 7636), as pure functions. Errors use the RFC's
 * `{error, error_description}` shape (§5.2) rather than our envelope, because OAuth clients parse that shape.
 */
export type OAuthErrorCode =
  | 'invalid_request'
  | 'invalid_client'
  | 'invalid_grant'
  | 'unauthorized_client'
  | 'unsupported_grant_type'
  | 'invalid_scope'
  | 'access_denied'
  | 'unsupported_response_type'
  | 'invalid_target';

export class OAuthError extends Error {
  constructor(
    readonly error: OAuthErrorCode,
    readonly description: string,
    readonly status = error === 'invalid_client' ? 401 : 400,
  ) {
    super(description);
  }

  get body(): { error: OAuthErrorCode; error_description: string } {
    return { error: this.error, error_description: this.description };
  }
}

export const TOKEN_PREFIX = { access: 'wdsa_', refresh: 'wdsr_', code: 'wdso_', clientSecret: 'wdsc_' } as const;

export function issueOpaque(kind: keyof typeof TOKEN_PREFIX): { token: string; hash: string } {
  const token = `${TOKEN_PREFIX[kind]}${randomBytes(32).toString('base64url')}`;
  return { token, hash: sha256Hex(token) };
}

export function looksLike(kind: keyof typeof TOKEN_PREFIX, token: string): boolean {
  return token.startsWith(TOKEN_PREFIX[kind]) && /^[A-Za-z0-9_-]{43}$/.test(token.slice(TOKEN_PREFIX[kind].length));
}

const known = new Set<string>(OAUTH_SCOPES);

/** RFC 6749 §3.3: space-delimited, each one of the 23 scopes of spec §5; null when empty or unknown. */
export function parseScope(scope: string | undefined): OAuthScope[] | null {
  const items = (scope ?? '').split(' ').filter((item) => item !== '');
  if (items.length === 0 || items.some((item) => !known.has(item))) return null;
  return [...new Set(items)] as OAuthScope[];
}

/** RFC 7636 §4.1/§4.2: a verifier is 43..128 unreserved characters; S256 is the only method we accept. */
const VERIFIER = /^[A-Za-z0-9\-._~]{43,128}$/;
export const CHALLENGE = /^[A-Za-z0-9_-]{43}$/;

export function pkceMatches(verifier: string, challenge: string): boolean {
  if (!VERIFIER.test(verifier) || !CHALLENGE.test(challenge)) return false;
  const computed = Buffer.from(createHash('sha256').update(verifier, 'ascii').digest('base64url'));
  const expected = Buffer.from(challenge);
  return computed.length === expected.length && timingSafeEqual(computed, expected);
}

/**
 * Registered redirect URIs (RFC 6749 §3.1.2, RFC 8252 §7.3): absolute https, or http on a loopback address for
 * native apps; no fragment. At runtime they are compared as exact strings.
 */
export function acceptableRedirectUri(uri: string): boolean {
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return false;
  }
  if (url.hash !== '' || uri.includes('#')) return false;
  if (url.protocol === 'https:') return true;
  return url.protocol === 'http:' && ['127.0.0.1', '[::1]', 'localhost'].includes(url.hostname);
}

/** The redirect back to the client with `params` added to its query (RFC 6749 §4.1.2). */
export function redirectWith(redirectUri: string, params: Record<string, string | undefined>): string {
  const url = new URL(redirectUri);
  for (const [name, value] of Object.entries(params)) if (value !== undefined) url.searchParams.set(name, value);
  return url.toString();
}
