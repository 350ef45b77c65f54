import { createHash } from 'node:crypto';
import { z } from 'zod';
import { sqlPoolOf, type TransactionClient } from '../db/prisma.ts';
import { inPgTransaction, prismaExecutor, type SqlExecutor } from '../db/sql.ts';
import type { Statement } from '../data/sql.ts';
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

function failureOf(error: DomainError): Outcome {
  const details = error.details === undefined ? {} : { details: error.details as Json };
  return { ok: false, error: { code: error.code, message: error.message, ...details } };
}

/** An expected failure (a 4xx): the transaction is rolled back and the outcome recorded in a fresh one. */
const isExpected = (error: unknown): error is DomainError => error instanceof DomainError && httpStatusOf(error.code) < 500;

/**
 * A last statement an effect may hand over to run together with the idempotency record, immediately before
 * COMMIT. Row writes put their capacity/schema guard here: its row lock is then held for the COMMIT alone
 * rather than across further round trips, which is what lets parallel creates into one table scale.
 */
export interface CommitGuard {
  /** An UPDATE … RETURNING that returns a row when the write may commit and none when it must not. */
  statement: Statement;
  /** Why it refused (the transaction is then rolled back). */
  explain: () => Promise<DomainError>;
}

export interface IdempotentTransaction {
  executor: SqlExecutor;
  guardCommit(guard: CommitGuard): void;
}

interface Slot {
  actorKey: string;
  key: string;
  fingerprint: string;
  operation: string;
  ttlMs: number;
}

async function claim(executor: SqlExecutor, slot: Slot): Promise<void> {
  // A transaction-scoped advisory lock marks the key as in flight; a duplicate that arrives meanwhile is told
  // to retry instead of queueing behind the first (DESIGN §4). The lock ends with the transaction.
  const [row] = await executor.query<{ locked: boolean }>(
    'SELECT pg_try_advisory_xact_lock(hashtextextended($1::text, 0)) AS locked', [`${slot.actorKey}\n${slot.key}`]);
  if (!row?.locked) {
    throw new DomainError('IDEMPOTENCY_IN_PROGRESS', 'A request with this Idempotency-Key is still being processed.', { retryAfter: 1 });
  }
}

/** The stored outcome for this key, read after the lock is held (a new snapshot, so a just-committed record counts). */
async function storedOutcome(executor: SqlExecutor, slot: Slot): Promise<Outcome | null> {
  const [row] = await executor.query<{ fingerprint: string; operation: string; outcome: Outcome }>(
    `SELECT fingerprint, operation, outcome FROM idempotency_records
      WHERE actor_key = $1::text AND key = $2::text AND expires_at > now()`, [slot.actorKey, slot.key]);
  if (!row) return null;
  if (row.fingerprint !== slot.fingerprint) {
    throw new DomainError('IDEMPOTENCY_CONFLICT', 'This Idempotency-Key was already used with a different request.', {
      details: { operation: row.operation },
    });
  }
  return row.outcome;
}

/** Saves the record; with a guard, only if the guard lets the write commit. Returns false when it refused. */
async function save(executor: SqlExecutor, slot: Slot, outcome: Outcome, guard?: CommitGuard): Promise<boolean> {
  const params = [...(guard?.statement.params ?? [])];
  const bind = (value: unknown, cast: string) => `$${params.push(value)}::${cast}`;
  // One clock for both instants, so the retention is exactly the configured TTL.
  const createdAt = new Date();
  const values = [
    bind(slot.actorKey, 'text'), bind(slot.key, 'text'), bind(slot.operation, 'text'), bind(slot.fingerprint, 'text'),
    bind(JSON.stringify(outcome), 'jsonb'), bind(createdAt.toISOString(), 'timestamptz'),
    bind(new Date(createdAt.getTime() + slot.ttlMs).toISOString(), 'timestamptz'),
  ].join(', ');
  const [prefix, source] = guard ? [`WITH guard AS (${guard.statement.sql})`, `SELECT ${values} FROM guard LIMIT 1`] : ['', `SELECT ${values}`];
  const saved = await executor.query(
    `${prefix} INSERT INTO idempotency_records (actor_key, key, operation, fingerprint, outcome, created_at, expires_at) ${source}
     ON CONFLICT (actor_key, key) DO UPDATE SET operation = EXCLUDED.operation, fingerprint = EXCLUDED.fingerprint,
       outcome = EXCLUDED.outcome, created_at = EXCLUDED.created_at, expires_at = EXCLUDED.expires_at
     RETURNING 1 AS saved`, params);
  return saved.length > 0;
}

class ExpectedFailure extends Error {
  constructor(readonly outcome: Outcome) {
    super('expected failure');
  }
}

type Transaction = <T>(work: (executor: SqlExecutor) => Promise<T>) => Promise<T>;

async function runOnce(transaction: Transaction, slot: Slot, effect: (tx: IdempotentTransaction) => Promise<Json>): Promise<Outcome> {
  try {
    return await transaction(async (executor) => {
      await claim(executor, slot);
      const stored = await storedOutcome(executor, slot);
      if (stored) return stored;
      let guard: CommitGuard | undefined;
      let data: Json;
      try {
        data = await effect({ executor, guardCommit: (next) => { guard = next; } });
      } catch (error) {
        if (isExpected(error)) throw new ExpectedFailure(failureOf(error));
        throw error;
      }
      const outcome: Outcome = { ok: true, data };
      if (await save(executor, slot, outcome, guard)) return outcome;
      throw new ExpectedFailure(failureOf(await guard!.explain()));
    });
  } catch (error) {
    if (!(error instanceof ExpectedFailure)) throw error;
    // The effect's partial work is rolled back; record the 4xx so that a retry replays it. Someone else may
    // have recorded an outcome for this key in between: theirs wins, as it was committed first.
    return transaction(async (executor) => {
      await claim(executor, slot);
      const stored = await storedOutcome(executor, slot);
      if (stored) return stored;
      await save(executor, slot, error.outcome);
      return error.outcome;
    });
  }
}

function slotOf(context: Context, call: IdempotentCall): Slot {
  const { actorKey } = requireCaller(context);
  return {
    actorKey,
    key: validKey(call.key),
    fingerprint: fingerprintOf(call),
    operation: call.operation,
    ttlMs: context.config.IDEMPOTENCY_TTL_HOURS * 3_600_000,
  };
}

/**
 * Runs a mutation at most once per (actor, key) inside a Prisma transaction (for catalog changes written with
 * Prisma models). The record commits in the same transaction as the effect; the same key with the same
 * fingerprint replays the stored outcome, with another fingerprint it is a 409. Unexpected errors (5xx) roll
 * everything back and leave the key unused, so a retry may succeed.
 */
export async function idempotent<T extends Json>(context: Context, call: IdempotentCall, effect: (tx: TransactionClient) => Promise<T>): Promise<T> {
  const slot = slotOf(context, call);
  let current: TransactionClient | undefined;
  const transaction: Transaction = (work) => context.prisma.$transaction((tx) => {
    current = tx;
    return work(prismaExecutor(tx));
  }, { timeout: 30_000, maxWait: 10_000 });
  return replay(await runOnce(transaction, slot, () => effect(current!))) as T;
}

/**
 * The same guarantees on a `pg` connection, for the data plane's hot paths (row writes): plain SQL, and an
 * optional commit guard that runs in the record's statement.
 */
export async function idempotentSql<T extends Json>(context: Context, call: IdempotentCall, effect: (tx: IdempotentTransaction) => Promise<T>): Promise<T> {
  const slot = slotOf(context, call);
  const pool = sqlPoolOf(context.prisma);
  return replay(await runOnce((work) => inPgTransaction(pool, work), slot, effect)) as T;
}
