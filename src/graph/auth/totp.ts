import { Secret, TOTP } from 'otpauth';

/** RFC 6238 defaults every authenticator app understands: SHA-1, 6 digits, 30 s; ±1 step of clock drift. */
function totpOf(base32: string, label = 'account'): TOTP {
  return new TOTP({ issuer: 'Workspace Data Service', label, algorithm: 'SHA1', digits: 6, period: 30, secret: Secret.fromBase32(base32) });
}

export function newTotpSecret(): string {
  return new Secret({ size: 20 }).base32;
}

export function totpUri(base32: string, email: string): string {
  return totpOf(base32, email).toString();
}

export function totpMatches(base32: string, code: string): boolean {
  return /^\d{6}$/.test(code) && totpOf(base32).validate({ token: code, window: 1 }) !== null;
}

/** For tests and tools: the code an authenticator would show now. */
export function currentTotp(base32: string): string {
  return totpOf(base32).generate();
}
