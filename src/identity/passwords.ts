import { randomBytes, scrypt, timingSafeEqual, type ScryptOptions } from 'node:crypto';
import { z } from 'zod';

/**
 * Password hashes: scrypt (RFC 7914) from Node's crypto, so no native add-on has to build under npm 11's
 * install-script policy. N = 2^15, r = 8, p = 1 is OWASP's recommended minimum; one hash takes ~60-100 ms here
 * and 32 MiB. Stored as `scrypt$<logN>$<r>$<p>$<salt b64url>$<hash b64url>` so the cost can rise later.
 */
const LOG_N = 15;
const R = 8;
const P = 1;
const KEY_LENGTH = 32;

/** NIST SP 800-63B: at least 8 characters, long passphrases allowed; we ask for 10. */
export const Password = z.string().min(10).max(256);

function derive(password: string, salt: Buffer, options: { logN: number; r: number; p: number }): Promise<Buffer> {
  const N = 2 ** options.logN;
  const scryptOptions: ScryptOptions = { N, r: options.r, p: options.p, maxmem: 256 * N * options.r };
  return new Promise((resolve, reject) => {
    scrypt(password.normalize('NFKC'), salt, KEY_LENGTH, scryptOptions, (error, key) =>
      error ? reject(error) : resolve(key),
    );
  });
}

export async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await derive(password, salt, { logN: LOG_N, r: R, p: P });
  return ['scrypt', LOG_N, R, P, salt.toString('base64url'), key.toString('base64url')].join('$');
}

/** A well-formed hash nobody's password matches: unknown users cost the same time as known ones. */
const DECOY = `scrypt$${LOG_N}$${R}$${P}$${Buffer.alloc(16).toString('base64url')}$${Buffer.alloc(KEY_LENGTH).toString('base64url')}`;

/** Constant-time comparison; a null hash (no password set, or no such user) is checked against a decoy. */
export async function verifyPassword(password: string, stored: string | null): Promise<boolean> {
  const [scheme, logN, r, p, salt, hash] = (stored ?? DECOY).split('$');
  if (scheme !== 'scrypt' || !salt || !hash) return false;
  const expected = Buffer.from(hash, 'base64url');
  const actual = await derive(password, Buffer.from(salt, 'base64url'), {
    logN: Number(logN),
    r: Number(r),
    p: Number(p),
  });
  return actual.length === expected.length && timingSafeEqual(actual, expected) && stored !== null;
}
