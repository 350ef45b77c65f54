import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { TransactionClient } from '../db/prisma.ts';
import { DomainError, httpStatusOf, type ErrorCode } from '../errors.ts';
import { requireCaller } from './auth/guards.ts';
import type { Context } from './context.ts';

/** Spec §8: 8..255 characters. Visible ASCII only, so keys survive HTTP headers and logs unchanged. */
export const IdempotencyKey = z.string().min(8).max(255).regex(/^[\x21-\x7E]+$/, 'must be visible ASCII');

export type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

type Outcome =
  | { ok: true; data: Json }
  | { ok: false; error: { code: ErrorCode; message: string; details?: Json } };

export interface IdempotentCall {
  /** The GraphQL mutation name: part of the fingerprint, so one key cannot serve two operations. */
  operation: string;
  key: string;
  /** Target IDs, expectedSchemaVersion and payload: everything that makes two requests "the same". */
  input: unknown;
}

/** Canonical JSON (sorted keys) so that key order or whitespace never changes a fingerprint. */
export function canonicalJson(value: unknown): string {
  if (value instanceof Date) return JSON.stringify(value.toISOString());
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value).filter(([, v]) => v !== undefined).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonicalJson(v)}`).join(',')}}`;
  }
  return JSON.stringify(value ?? null);
}

function fingerprintOf(call: IdempotentCall): string {
  return createHash('sha256').update(call.operation).update('\n').update(canonicalJson(call.input)).digest('hex');
}

function validKey(key: string): string {
  const parsed = IdempotencyKey.safeParse(key);
  if (!parsed.success) {
    throw new DomainError('BAD_REQUEST', 'Idempotency-Key must be 8 to 255 visible ASCII characters.', {
      details: { problems: [{ path: ['Idempotency-Key'], message: parsed.error.issues[0]?.message ?? 'invalid' }] },
    });
  }
  return parsed.data;
}

function replay(outcome: Outcome): Json {
  if (outcome.ok) return outcome.data;
  const { code, message, details } = outcome.error;
  throw new DomainError(code, message, details === undefined ? {} : { details });
}

async function claimKey(tx: TransactionClient, actorKey: string, key: string): Promise<void> {
  // A transaction-scoped advisory lock marks the key as in flight; a duplicate that arrives meanwhile is told
  // to retry instead of queueing behind the first (DESIGN §4). The lock ends with the transaction.
  const [row] = await tx.$queryRaw<{ locked: boolean }[]>`
    SELECT pg_try_advisory_xact_lock(hashtextextended(${`${actorKey}\n${key}`}, 0)) AS locked`;
  if (!row?.locked) {
    throw new DomainError('IDEMPOTENCY_IN_PROGRESS', 'A request with this Idempotency-Key is still being processed.', { retryAfter: 1 });
  }
}

async function runEffect(tx: TransactionClient, effect: (tx: TransactionClient) => Promise<Json>): Promise<Outcome> {
  // The savepoint lets an expected failure (a 4xx) be recorded and replayed while its partial effect is undone.
  await tx.$executeRaw`SAVEPOINT idempotent_effect`;
  try {
    return { ok: true, data: await effect(tx) };
  } catch (error) {
    if (!(error instanceof DomainError) || httpStatusOf(error.code) >= 500) throw error;
    await tx.$executeRaw`ROLLBACK TO SAVEPOINT idempotent_effect`;
    const details = error.details === undefined ? {} : { details: error.details as Json };
    return { ok: false, error: { code: error.code, message: error.message, ...details } };
  }
}

/**
 * Runs a mutation at most once per (actor, key). The record commits in the same transaction as the effect;
 * the same key with the same fingerprint replays the stored outcome, with another fingerprint it is a 409.
 * Unexpected errors (5xx) roll everything back and leave the key unused, so a retry may succeed.
 */
export async function idempotent<T extends Json>(
  context: Context,
  call: IdempotentCall,
  effect: (tx: TransactionClient) => Promise<T>,
): Promise<T> {
  const { actorKey } = requireCaller(context);
  const key = validKey(call.key);
  const fingerprint = fingerprintOf(call);
  const ttlMs = context.config.IDEMPOTENCY_TTL_HOURS * 3_600_000;

  const outcome = await context.prisma.$transaction(async (tx) => {
    await claimKey(tx, actorKey, key);
    const existing = await tx.idempotencyRecord.findUnique({ where: { actorKey_key: { actorKey, key } } });
    if (existing && existing.expiresAt > new Date()) {
      if (existing.fingerprint !== fingerprint) {
        throw new DomainError('IDEMPOTENCY_CONFLICT', 'This Idempotency-Key was already used with a different request.', {
          details: { operation: existing.operation },
        });
      }
      return existing.outcome as Outcome;
    }
    const result = await runEffect(tx, effect);
    // One clock for both instants, so the retention is exactly the configured TTL.
    const createdAt = new Date();
    const record = { operation: call.operation, fingerprint, outcome: result, createdAt, expiresAt: new Date(createdAt.getTime() + ttlMs) };
    await tx.idempotencyRecord.upsert({
      where: { actorKey_key: { actorKey, key } },
      create: { actorKey, key, ...record },
      update: record,
    });
    return result;
  }, { timeout: 30_000, maxWait: 10_000 });

  return replay(outcome) as T;
}
