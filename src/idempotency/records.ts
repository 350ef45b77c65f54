import type { SqlExecutor } from '../db/sql.ts';
import { Params } from '../data/statement.ts';
import { DomainError, type ErrorCode } from '../kernel/errors.ts';
import type { Json } from '../kernel/formats.ts';
import type { Slot } from './key.ts';

/** The stored outcomes of idempotent mutations: the statements that read, lock and write `idempotency_records`. */

export type Outcome =
  | { ok: true; data: Json }
  | { ok: false; error: { code: ErrorCode; message: string; details?: Json } };

/**
 * Two statements that open every idempotent transaction, parameter-free so that they travel with BEGIN:
 * a transaction-scoped advisory lock that marks the key as in flight (a duplicate arriving meanwhile is told to
 * retry instead of queueing behind the first, DESIGN §4), then the stored record, read in its own snapshot
 * after the lock is held, so a record committed just before counts.
 */
export function openingOf(slot: Slot): string[] {
  return [
    `SELECT pg_try_advisory_xact_lock(${slot.number}::bigint) AS locked`,
    `SELECT actor_key, key, fingerprint, operation, outcome FROM idempotency_records WHERE slot = ${slot.number}::bigint AND expires_at > now()`,
  ];
}

interface StoredRecord {
  actor_key: string;
  key: string;
  fingerprint: string;
  operation: string;
  outcome: Outcome;
}

/** The stored outcome for this key, or null; throws when the key is in flight or was used for another request. */
export function storedOutcome(slot: Slot, opened: Record<string, unknown>[][]): Outcome | null {
  const [[lock] = [], records = []] = opened as [{ locked: boolean }[], StoredRecord[]];
  if (!lock?.locked) {
    throw new DomainError('IDEMPOTENCY_IN_PROGRESS', 'A request with this Idempotency-Key is still being processed.', {
      retryAfter: 1,
    });
  }
  // The slot is a 64-bit digest: compare the full key so that a collision can never replay someone else's outcome.
  const row = records.find((record) => record.actor_key === slot.actorKey && record.key === slot.key);
  if (!row) return null;
  if (row.fingerprint !== slot.fingerprint) {
    throw new DomainError('IDEMPOTENCY_CONFLICT', 'This Idempotency-Key was already used with a different request.', {
      details: { operation: row.operation },
    });
  }
  return row.outcome;
}

/**
 * The INSERT of a record, `FROM source` when given (see IdempotentTransaction.recordWith). `replace` overwrites an
 * expired record of the same key; without it, any record of the key makes the INSERT fail (see OneStatementWrite).
 */
export function recordSql(slot: Slot, outcome: Outcome, params: Params, source?: string, replace = true): string {
  // One clock for both instants, so the retention is exactly the configured TTL.
  const createdAt = new Date();
  const values = [
    params.add(slot.actorKey, 'text'),
    params.add(slot.key, 'text'),
    params.add(slot.number, 'bigint'),
    params.add(slot.operation, 'text'),
    params.add(slot.fingerprint, 'text'),
    params.add(JSON.stringify(outcome), 'jsonb'),
    params.add(createdAt.toISOString(), 'timestamptz'),
    params.add(new Date(createdAt.getTime() + slot.ttlMs).toISOString(), 'timestamptz'),
  ].join(', ');
  return `INSERT INTO idempotency_records (actor_key, key, slot, operation, fingerprint, outcome, created_at, expires_at)
    SELECT ${values}${source ? ` FROM ${source}` : ''}${
      replace
        ? `
    ON CONFLICT (actor_key, key) DO UPDATE SET operation = EXCLUDED.operation, fingerprint = EXCLUDED.fingerprint,
      outcome = EXCLUDED.outcome, created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at`
        : ''
    }`;
}

export async function save(executor: SqlExecutor, slot: Slot, outcome: Outcome): Promise<void> {
  const params = new Params();
  await executor.query(recordSql(slot, outcome, params), params.values);
}
