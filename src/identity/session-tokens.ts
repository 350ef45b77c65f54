import { randomBytes, timingSafeEqual } from 'node:crypto';
import { sha256Hex } from './secrets.ts';

/**
 * Browser sessions: an opaque token in an HttpOnly cookie, and a CSRF token the page reads from the login answer
 * and sends back in `X-CSRF-Token` on every change (double submit). Only sha256 of each is stored.
 * `__Host-` pins the cookie to this origin: Secure, Path=/, no Domain (RFC 6265bis).
 */
export const SESSION_COOKIE = '__Host-wds_session';
export const CSRF_HEADER = 'x-csrf-token';
const SESSION_PATTERN = /^wdss_[A-Za-z0-9_-]{43}$/;

export interface IssuedSessionSecrets {
  token: string;
  tokenHash: string;
  csrfToken: string;
  csrfTokenHash: string;
}

export function issueSessionSecrets(): IssuedSessionSecrets {
  const token = `wdss_${randomBytes(32).toString('base64url')}`;
  const csrfToken = randomBytes(32).toString('base64url');
  return { token, tokenHash: sha256Hex(token), csrfToken, csrfTokenHash: sha256Hex(csrfToken) };
}

export function looksLikeSessionToken(token: string): boolean {
  return SESSION_PATTERN.test(token);
}

/** The value of one cookie from a `Cookie` header (RFC 6265 §5.4 syntax), or null. */
export function cookieValue(header: string | null, name: string): string | null {
  if (!header) return null;
  for (const pair of header.split(';')) {
    const index = pair.indexOf('=');
    if (index > 0 && pair.slice(0, index).trim() === name) return pair.slice(index + 1).trim();
  }
  return null;
}

export function csrfMatches(presented: string | null, storedHash: string): boolean {
  if (!presented) return false;
  return timingSafeEqual(Buffer.from(sha256Hex(presented), 'hex'), Buffer.from(storedHash, 'hex'));
}

export function sessionCookie(token: string, maxAgeSeconds: number): string {
  return `${SESSION_COOKIE}=${token}; Path=/; Max-Age=${maxAgeSeconds}; HttpOnly; Secure; SameSite=Strict`;
}
