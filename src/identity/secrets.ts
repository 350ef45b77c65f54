import { createHash, randomBytes } from 'node:crypto';

/**
 * API key format: `wds_<prefix>_<secret>`. The prefix (12 chars) identifies the key in listings and logs;
 * the secret is 32 random bytes. Only sha256(token) is stored — with 256 bits of entropy a slow hash would
 * add latency to every request and no protection.
 */
const KEY_PATTERN = /^wds_([a-z0-9]{12})_([A-Za-z0-9_-]{43})$/;

export interface IssuedSecret {
  token: string;
  prefix: string;
  hash: string;
}

export function sha256Hex(value: string): string {
  return createHash('sha256').update(value).digest('hex');
}

function randomPrefix(): string {
  const alphabet = 'abcdefghijklmnopqrstuvwxyz0123456789';
  return Array.from(randomBytes(12), (byte) => alphabet[byte % alphabet.length]).join('');
}

export function issueApiKeySecret(): IssuedSecret {
  const prefix = randomPrefix();
  const token = `wds_${prefix}_${randomBytes(32).toString('base64url')}`;
  return { token, prefix, hash: sha256Hex(token) };
}

export function looksLikeApiKey(token: string): boolean {
  return KEY_PATTERN.test(token);
}
