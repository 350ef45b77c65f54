import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import type { PrismaClient } from '../db/prisma.ts';
import { DomainError } from '../kernel/errors.ts';
import { Id } from '../kernel/formats.ts';

/**
 * Opaque, tamper-evident page cursors (DESIGN §4): base64url JSON + HMAC-SHA256. The MAC also covers the cursor's
 * scope (which list, which filter and order), so a cursor replayed against another query is refused rather than
 * silently misread. The key lives in the catalog so that every process of a deployment accepts every cursor.
 */
const SECRET_NAME = 'cursor-hmac';
const MAC_LENGTH = 16; // bytes; 128 bits is ample against forgery of a pagination position

const keys = new WeakMap<PrismaClient, Promise<Buffer>>();

async function loadKey(prisma: PrismaClient): Promise<Buffer> {
  const candidate = randomBytes(32).toString('base64url');
  await prisma.$executeRaw`INSERT INTO service_secrets (name, value) VALUES (${SECRET_NAME}, ${candidate}) ON CONFLICT (name) DO NOTHING`;
  const stored = await prisma.serviceSecret.findUniqueOrThrow({ where: { name: SECRET_NAME } });
  return Buffer.from(stored.value, 'base64url');
}

export function cursorKey(prisma: PrismaClient): Promise<Buffer> {
  let key = keys.get(prisma);
  if (!key) {
    key = loadKey(prisma);
    key.catch(() => keys.delete(prisma));
    keys.set(prisma, key);
  }
  return key;
}

function mac(key: Buffer, scope: string, body: string): Buffer {
  return createHmac('sha256', key).update(scope).update('\n').update(body).digest().subarray(0, MAC_LENGTH);
}

export function encodeCursor(key: Buffer, scope: string, position: unknown): string {
  const body = Buffer.from(JSON.stringify(position)).toString('base64url');
  return `${body}.${mac(key, scope, body).toString('base64url')}`;
}

export function cursorInvalid(): DomainError {
  return new DomainError(
    'CURSOR_INVALID',
    'The cursor is malformed, was altered, or belongs to another query; start again without it.',
  );
}

/** The position inside a cursor minted for this scope, checked against `shape`; CURSOR_INVALID otherwise. */
export function decodeCursor<T>(key: Buffer, scope: string, cursor: string, shape: z.ZodType<T>): T {
  const [body, signature, extra] = cursor.split('.');
  if (!body || !signature || extra !== undefined) throw cursorInvalid();
  const expected = mac(key, scope, body);
  const given = Buffer.from(signature, 'base64url');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw cursorInvalid();
  try {
    const parsed = shape.safeParse(JSON.parse(Buffer.from(body, 'base64url').toString('utf8')));
    if (parsed.success) return parsed.data;
  } catch {
    // fall through: a validly signed body that does not parse is still not a cursor we can use
  }
  throw cursorInvalid();
}

/** The position of a page in id order: the id of its last item. */
export const IdPosition = z.strictObject({ id: Id });

/** `limit` and `cursor` of every list: the REST query and the GraphQL arguments share these rules. */
export const PageLimit = z.coerce.number().int().min(1).max(100);
export const Cursor = z.string().min(1).max(1024);
export const DEFAULT_PAGE_SIZE = 50;
