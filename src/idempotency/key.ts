import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { PrismaClient } from '../db/prisma.ts';
import { credentialRequired, DomainError } from '../kernel/errors.ts';
import { requireCsrfProof } from '../identity/csrf.ts';
import type { Caller } from '../kernel/caller.ts';
import type { Config } from '../kernel/config.ts';

/** The key of a mutation and what it is bound to: the caller's credential, the operation and its input (its fingerprint). */

/** Spec §8: 8..255 characters. Visible ASCII only, so keys survive HTTP headers and logs unchanged. */
export const IdempotencyKey = z
  .string()
  .min(8)
  .max(255)
  .regex(/^[\x21-\x7E]+$/, 'must be visible ASCII');

/** What a run needs of a request: who is calling, the catalog client and the record TTL (a GraphQL context is one). */
export interface IdempotencyScope {
  caller: Caller | null;
  prisma: PrismaClient;
  config: Pick<Config, 'IDEMPOTENCY_TTL_HOURS'>;
}

export interface IdempotentCall {
  /** The GraphQL mutation name: part of the fingerprint, so one key cannot serve two operations. */
  operation: string;
  key: string;
  /** Target IDs, expectedSchemaVersion and payload: everything that makes two requests "the same". */
  input: unknown;
  /** For the few mutations open to anonymous callers (accepting an invitation): whom the key is scoped to. */
  actorKey?: string;
}

/** Canonical JSON (sorted keys) so that key order or whitespace never changes a fingerprint. */
export function canonicalJson(value: unknown): string {
  if (value instanceof Date) return JSON.stringify(value.toISOString());
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

export function fingerprintOf(call: IdempotentCall): string {
  return createHash('sha256').update(call.operation).update('\n').update(canonicalJson(call.input)).digest('hex');
}

/** The key itself, or the 400 that refuses it; REST checks it before reading the body (src/http/rest/router.ts). */
export function validKey(key: string): string {
  const parsed = IdempotencyKey.safeParse(key);
  if (!parsed.success) {
    throw new DomainError('BAD_REQUEST', 'Idempotency-Key must be 8 to 255 visible ASCII characters.', {
      details: { problems: [{ path: ['Idempotency-Key'], message: parsed.error.issues[0]?.message ?? 'invalid' }] },
    });
  }
  return parsed.data;
}

export interface Slot {
  actorKey: string;
  key: string;
  /** First 64 bits of sha256(actorKey \n key), signed, as decimal: the advisory lock id and lookup column. */
  number: string;
  fingerprint: string;
  operation: string;
  ttlMs: number;
}

export function slotNumber(actorKey: string, key: string): string {
  return createHash('sha256').update(`${actorKey}\n${key}`, 'utf8').digest().readBigInt64BE(0).toString();
}

/**
 * Every mutation passes here, so this is where cookie-authenticated requests prove they are not cross-site
 * forgeries: a browser session's mutation must carry the session's CSRF token (double submit, X-CSRF-Token).
 */
function actorKeyOf(scope: IdempotencyScope, call: IdempotentCall): string {
  if (call.actorKey !== undefined && scope.caller === null) return call.actorKey;
  const caller = scope.caller;
  if (!caller) throw credentialRequired();
  requireCsrfProof(caller);
  return credentialScope(caller);
}

/**
 * Records belong to the credential, not the person (issue 19 §5): an OAuth application must not replay, or learn
 * from a 409's `details.operation`, what the same user's API key or browser did. An OAuth grant keeps one scope
 * across its refreshes (`oauth:<client id>:<user id>`, 59 characters; the column holds 64).
 */
function credentialScope(caller: Caller): string {
  const { credential } = caller;
  if (credential.type === 'oauth') return `${credential.prefix}:${caller.userId}`;
  return `${credential.type === 'session' ? 'session' : 'key'}:${credential.id}`;
}

export function slotOf(scope: IdempotencyScope, call: IdempotentCall): Slot {
  const actorKey = actorKeyOf(scope, call);
  const key = validKey(call.key);
  return {
    actorKey,
    key,
    number: slotNumber(actorKey, key),
    fingerprint: fingerprintOf(call),
    operation: call.operation,
    ttlMs: scope.config.IDEMPOTENCY_TTL_HOURS * 3_600_000,
  };
}
