import { createCipheriv, createDecipheriv, createHmac, randomBytes } from 'node:crypto';
import type { SqlExecutor } from '../db/sql.ts';

/**
 * Webhook signing secrets (issue 27). A signer needs the secret itself, so it cannot be stored as a hash like an API
 * key: it is sealed with AES-256-GCM under a key kept apart from the row, with the webhook's id as associated data
 * (a sealed secret copied onto another webhook does not open). The key is WEBHOOK_SECRET_KEY when the operator sets
 * it (then a copy of the database alone reveals no secret); otherwise a random key kept in `service_secrets`, which
 * still keeps the secrets out of anything that reads the webhooks table alone (exports, logs of its rows).
 */
const SECRET_BYTES = 32;
const SEALING_SECRET_NAME = 'webhook-sealing-key';
const SEALED_PREFIX = 'v1';

/** `whsec_` + base64 of 32 random bytes: the Standard Webhooks form every receiver library accepts. */
export function newSigningSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(SECRET_BYTES).toString('base64')}`;
}

/** WEBHOOK_SECRET_KEY as 32 bytes, or undefined when unset. Throws at start-up when it is not 32 bytes of base64. */
export function configuredSealingKey(text: string | undefined): Buffer | undefined {
  if (text === undefined || text === '') return undefined;
  const key = Buffer.from(text, 'base64');
  if (key.length !== 32)
    throw new Error('WEBHOOK_SECRET_KEY must be 32 bytes in base64 (e.g. `openssl rand -base64 32`)');
  return key;
}

const storedKeys = new WeakMap<object, Promise<Buffer>>();

async function loadStoredKey(sql: SqlExecutor): Promise<Buffer> {
  const candidate = randomBytes(32).toString('base64url');
  await sql.query('INSERT INTO service_secrets (name, value) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING', [
    SEALING_SECRET_NAME,
    candidate,
  ]);
  const [row] = await sql.query<{ value: string }>('SELECT value FROM service_secrets WHERE name = $1', [
    SEALING_SECRET_NAME,
  ]);
  return Buffer.from(row!.value, 'base64url');
}

/**
 * The sealing key: the configured one, else the deployment's stored key (created on first use), cached per `owner`
 * (a Prisma client or a pool) so that it is read once per process.
 */
export function sealingKey(owner: object, sql: SqlExecutor, configured: Buffer | undefined): Promise<Buffer> {
  if (configured) return Promise.resolve(configured);
  let key = storedKeys.get(owner);
  if (!key) {
    key = loadStoredKey(sql);
    key.catch(() => storedKeys.delete(owner));
    storedKeys.set(owner, key);
  }
  return key;
}

/** `v1.<iv>.<tag>.<ciphertext>`, each base64url. */
export function sealSecret(key: Buffer, webhookId: string, secret: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', key, iv).setAAD(Buffer.from(webhookId));
  const sealed = Buffer.concat([cipher.update(secret, 'utf8'), cipher.final()]);
  return [SEALED_PREFIX, iv, cipher.getAuthTag(), sealed]
    .map((part) => (typeof part === 'string' ? part : part.toString('base64url')))
    .join('.');
}

export function openSecret(key: Buffer, webhookId: string, sealed: string): string {
  const [prefix, iv, tag, body] = sealed.split('.');
  if (prefix !== SEALED_PREFIX || !iv || !tag || body === undefined)
    throw new Error('A webhook secret is not in a sealed form this version reads.');
  const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url')).setAAD(Buffer.from(webhookId));
  decipher.setAuthTag(Buffer.from(tag, 'base64url'));
  return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]).toString('utf8');
}

const SECRET_PREFIX = 'whsec_';

/**
 * Signs with every given secret: the `webhook-signature` header is `v1,<base64 HMAC-SHA256 of "{id}.{timestamp}.{body}"
 * keyed by the secret's base64-decoded bytes>` per secret, space-separated (Standard Webhooks lets a receiver accept
 * any one of them), so a secret rotated within the last 24 hours still verifies beside the new one. Node's HMAC, not
 * `standardwebhooks`' `sign` (a JavaScript SHA-256, and the key decoded again per message); the tests verify every
 * delivery with that library, as a receiver would.
 */
export function webhookSigner(
  secrets: readonly string[],
): (messageId: string, timestamp: Date, body: string) => string {
  const keys = secrets.map((secret) =>
    Buffer.from(secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret, 'base64'),
  );
  return (messageId, timestamp, body) => {
    const signed = `${messageId}.${Math.floor(timestamp.getTime() / 1000)}.${body}`;
    return keys.map((key) => `v1,${createHmac('sha256', key).update(signed).digest('base64')}`).join(' ');
  };
}
