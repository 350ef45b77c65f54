import { createHash } from 'node:crypto';
import { z } from 'zod';
import type pg from 'pg';
import { setChangeActor } from '../catalog/changes.ts';
import { sqlPoolOf, type PrismaClient, type TransactionClient } from '../db/prisma.ts';
import {
  inPgTransactionOn,
  pgExecutor,
  prismaExecutor,
  withPgConnection,
  type SqlExecutor,
  type TransactionResult,
} from '../db/sql.ts';
import { isStatementTimeout } from '../db/statement-budget.ts';
import { Params } from '../data/statement.ts';
import { credentialRequired, DomainError, httpStatusOf, type ErrorCode } from '../kernel/errors.ts';
import type { Json } from '../kernel/formats.ts';
import { newId } from '../kernel/ids.ts';
import { storableJson, storableText } from '../kernel/input-hygiene.ts';
import { requireCsrfProof } from '../identity/csrf.ts';
import type { Caller } from '../kernel/caller.ts';
import type { Config } from '../kernel/config.ts';
import { SQLSTATE, sqlStateOf } from '../db/pg-errors.ts';

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

type Outcome = { ok: true; data: Json } | { ok: false; error: { code: ErrorCode; message: string; details?: Json } };

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

function fingerprintOf(call: IdempotentCall): string {
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

function replay(outcome: Outcome): Json {
  if (outcome.ok) return outcome.data;
  const { code, message, details } = outcome.error;
  throw new DomainError(code, message, details === undefined ? {} : { details });
}

/**
 * The outcome of a refusal, as recorded and as answered. A refusal may echo what the caller sent; whatever it
 * echoes is made storable (U+FFFD for U+0000 and unpaired surrogates), or the jsonb record could not be written.
 * The first answer is built from the same outcome, so it and every replay are identical.
 */
function failureOf(error: DomainError): Outcome {
  const details = error.details === undefined ? {} : { details: storableJson(error.details as Json) };
  return { ok: false, error: { code: error.code, message: storableText(error.message), ...details } };
}

/** An expected failure (a 4xx): the transaction is rolled back and the outcome recorded in a fresh one. */
const isExpected = (error: unknown): error is DomainError =>
  error instanceof DomainError && httpStatusOf(error.code) < 500;

/**
 * A last statement an effect may hand over to run in the same round trip as COMMIT. Row writes put their capacity
 * guard here: the lock it takes on the table's counter row is then held for the COMMIT alone, not across further
 * round trips and event-loop turns, which is what lets parallel creates into one table scale (docs/decisions/data-plane.md).
 */
export interface CommitGuard {
  /** Parameter-free SQL from IDs and integers only; it must RAISE when the write must not commit. */
  sql: string;
  /** The domain error for what the guard raised, or null when the error is not the guard's. */
  explain: (error: unknown) => Promise<DomainError | null>;
}

export interface IdempotentTransaction {
  executor: SqlExecutor;
  guardCommit(guard: CommitGuard): void;
  /**
   * For an effect that knows its result before its last statement: the SQL of an INSERT that records `data` as
   * this request's outcome, once per row of `source` (a CTE of that statement that yields a row only when the
   * effect happened), binding through `params`. The effect embeds it in its statement and saves a round trip.
   */
  recordWith(data: Json, params: Params, source: string): string;
}

interface Slot {
  actorKey: string;
  key: string;
  /** First 64 bits of sha256(actorKey \n key), signed, as decimal: the advisory lock id and lookup column. */
  number: string;
  fingerprint: string;
  operation: string;
  ttlMs: number;
}

function slotNumber(actorKey: string, key: string): string {
  return createHash('sha256').update(`${actorKey}\n${key}`, 'utf8').digest().readBigInt64BE(0).toString();
}

/**
 * Two statements that open every idempotent transaction, parameter-free so that they travel with BEGIN:
 * a transaction-scoped advisory lock that marks the key as in flight (a duplicate arriving meanwhile is told to
 * retry instead of queueing behind the first, DESIGN §4), then the stored record, read in its own snapshot
 * after the lock is held, so a record committed just before counts.
 */
function openingOf(slot: Slot): string[] {
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
function storedOutcome(slot: Slot, opened: Record<string, unknown>[][]): Outcome | null {
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
function recordSql(slot: Slot, outcome: Outcome, params: Params, source?: string, replace = true): string {
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

async function save(executor: SqlExecutor, slot: Slot, outcome: Outcome): Promise<void> {
  const params = new Params();
  await executor.query(recordSql(slot, outcome, params), params.values);
}

class ExpectedFailure extends Error {
  constructor(readonly outcome: Outcome) {
    super('expected failure');
  }
}

/** Runs work in a transaction opened with `opening` (see inPgTransaction); `finalStatement` goes with the COMMIT. */
type Transaction = <T>(
  opening: readonly string[],
  work: (executor: SqlExecutor, opened: Record<string, unknown>[][]) => Promise<TransactionResult<T>>,
) => Promise<T>;

async function expectedFailureOf(error: unknown, guard: CommitGuard | undefined): Promise<Outcome | null> {
  if (error instanceof ExpectedFailure) return error.outcome;
  const refusal = guard ? await guard.explain(error) : null;
  return refusal ? failureOf(refusal) : null;
}

async function runOnce(
  transaction: Transaction,
  slot: Slot,
  effect: (tx: IdempotentTransaction) => Promise<Json>,
): Promise<Outcome> {
  let guard: CommitGuard | undefined;
  try {
    return await transaction(openingOf(slot), async (executor, opened) => {
      const stored = storedOutcome(slot, opened);
      if (stored) return { value: stored };
      let data: Json;
      let recorded: Json | undefined;
      const recordWith = (result: Json, params: Params, source: string) => {
        recorded = result;
        return recordSql(slot, { ok: true, data: result }, params, source);
      };
      try {
        data = await effect({
          executor,
          guardCommit: (next) => {
            guard = next;
          },
          recordWith,
        });
      } catch (error) {
        // A refusal that says when to come back (Retry-After, e.g. SCHEMA_MAINTENANCE) is transient: it is not
        // recorded, so a retry with the same key gets a fresh answer once the obstacle has gone.
        if (isExpected(error) && error.retryAfter === undefined) throw new ExpectedFailure(failureOf(error));
        throw error;
      }
      const outcome: Outcome = { ok: true, data };
      if (recorded !== data) await save(executor, slot, outcome);
      return guard ? { value: outcome, finalStatement: guard.sql } : { value: outcome };
    });
  } catch (error) {
    const failure = await expectedFailureOf(error, guard);
    if (!failure) throw error;
    // The effect's partial work is rolled back; record the 4xx so that a retry replays it. Someone else may
    // have recorded an outcome for this key in between: theirs wins, as it was committed first.
    return transaction(openingOf(slot), async (executor, opened) => {
      const stored = storedOutcome(slot, opened);
      if (stored) return { value: stored };
      await save(executor, slot, failure);
      return { value: failure };
    });
  }
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

function slotOf(scope: IdempotencyScope, call: IdempotentCall): Slot {
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

/**
 * Runs a mutation at most once per (actor, key) inside a Prisma transaction (for catalog changes written with
 * Prisma models). The record commits in the same transaction as the effect; the same key with the same
 * fingerprint replays the stored outcome, with another fingerprint it is a 409. Unexpected errors (5xx) roll
 * everything back and leave the key unused, so a retry may succeed.
 */
export async function idempotent<T extends Json>(
  scope: IdempotencyScope,
  call: IdempotentCall,
  effect: (tx: TransactionClient) => Promise<T>,
): Promise<T> {
  const slot = slotOf(scope, call);
  let current: TransactionClient | undefined;
  const transaction: Transaction = (opening, work) =>
    scope.prisma.$transaction(
      async (tx) => {
        current = tx;
        const executor = prismaExecutor(tx);
        // Table and schema changes this transaction makes reach the change feed under the caller's name (issue 27);
        // a sign-up (accepting an invitation) has no caller and changes no table.
        if (scope.caller) {
          const actor = setChangeActor({ id: scope.caller.actorId, kind: scope.caller.kind }, newId());
          await executor.run(actor);
        }
        const opened: Record<string, unknown>[][] = [];
        for (const statement of opening) opened.push(await executor.query(statement));
        const { value, finalStatement } = await work(executor, opened);
        if (finalStatement) await tx.$executeRawUnsafe(finalStatement);
        return value;
      },
      { timeout: 30_000, maxWait: 10_000 },
    );
  return replay(await runOnce(transaction, slot, () => effect(current!))) as T;
}

/**
 * For an effect that is one statement: that statement alone, in its own implicit transaction, claims the key and
 * records the outcome — one round trip instead of three (BEGIN + lock + lookup, the write, COMMIT).
 */
export interface OneStatementWrite {
  /** Runs each statement in its own (implicit) transaction. */
  executor: SqlExecutor;
  /**
   * A condition for the write, evaluated once: this request holds the key's advisory lock and the key has no
   * record in the statement's snapshot. A record committed after that snapshot is caught by `recordWith`.
   */
  gate(params: Params): string;
  /**
   * Like IdempotentTransaction.recordWith, but a plain INSERT: any record of this key, even one committed after
   * the statement's snapshot, makes the whole statement fail on the primary key, and the request takes the
   * transactional path, which replays, refuses or overwrites an expired record exactly as before.
   */
  recordWith(data: Json, params: Params, source: string): string;
}

/**
 * The one-statement attempt: its value when it wrote, null when it did not or failed. Any failure (a refusal, a
 * violated rule, a key in use) rolled back everything it did, so the transactional path runs the request afresh
 * and answers, or records, exactly what it always did. Only a spent statement budget is answered at once: running
 * the request again would double the work of a caller that is already too slow.
 */
async function attemptOneStatement<T extends Json>(
  connection: pg.PoolClient,
  slot: Slot,
  write: (once: OneStatementWrite) => Promise<T | null>,
): Promise<T | null> {
  const once: OneStatementWrite = {
    executor: pgExecutor(connection),
    gate: (params) => {
      const number = params.add(slot.number, 'bigint');
      return `(SELECT pg_try_advisory_xact_lock(${number}) AND NOT EXISTS (SELECT 1 FROM idempotency_records
        WHERE actor_key = ${params.add(slot.actorKey, 'text')} AND key = ${params.add(slot.key, 'text')}))`;
    },
    recordWith: (data, params, source) => recordSql(slot, { ok: true, data }, params, source, false),
  };
  try {
    return await write(once);
  } catch (error) {
    if (isStatementTimeout(error)) throw error;
    return null;
  }
}

/**
 * The same guarantees on a `pg` connection, for the data plane's hot paths (row writes): plain SQL, and an
 * optional commit guard sent with the COMMIT. With `oneStatement`, that is tried first (see OneStatementWrite).
 */
export async function idempotentSql<T extends Json>(
  scope: IdempotencyScope,
  call: IdempotentCall,
  effect: (tx: IdempotentTransaction) => Promise<T>,
  oneStatement?: (once: OneStatementWrite) => Promise<T | null>,
): Promise<T> {
  const slot = slotOf(scope, call);
  // One connection for both attempts. PostgreSQL reports a failed statement before it releases that statement's
  // locks, so the transactional rerun, on another connection, could find the one-statement attempt's advisory
  // lock still held and answer IDEMPOTENCY_IN_PROGRESS to a request that has no duplicate. On the same connection
  // the rerun starts only once the failed statement's transaction has ended.
  return withPgConnection(sqlPoolOf(scope.prisma), async (held) => {
    const written = oneStatement ? await attemptOneStatement(held.client, slot, oneStatement) : null;
    if (written !== null) return written;
    for (let attempt = 1; ; attempt += 1) {
      try {
        return replay(await runOnce((opening, work) => inPgTransactionOn(held, opening, work), slot, effect)) as T;
      } catch (error) {
        if (attempt >= TRANSIENT_ABORT_ATTEMPTS || !isTransientAbort(error)) throw error;
      }
    }
  });
}

const TRANSIENT_ABORT_ATTEMPTS = 3;

/**
 * PostgreSQL aborted the whole transaction to break a deadlock (40P01) or a serialization conflict (40001): none
 * of it stays, so running it again is safe, and the rerun sees what the other transaction committed. Concurrent
 * writes of one key under a hashed unique rule meet this: exclusion constraints can deadlock where a unique index
 * would wait, and the rerun then answers UNIQUE_CONFLICT as the index would have.
 */
function isTransientAbort(error: unknown): boolean {
  const code = sqlStateOf(error);
  return code === SQLSTATE.deadlockDetected || code === SQLSTATE.serializationFailure;
}
