import type pg from 'pg';
import { setChangeActor } from '../catalog/changes.ts';
import { sqlPoolOf, type TransactionClient } from '../db/prisma.ts';
import {
  inPgTransactionOn,
  pgExecutor,
  prismaExecutor,
  withPgConnection,
  type SqlExecutor,
  type TransactionResult,
} from '../db/sql.ts';
import { isStatementTimeout } from '../db/statement-budget.ts';
import type { Params } from '../data/statement.ts';
import { DomainError, httpStatusOf } from '../kernel/errors.ts';
import type { ErrorDetailsOf } from '../kernel/error-details.ts';
import type { Json } from '../kernel/formats.ts';
import { newId } from '../kernel/ids.ts';
import { storableJson, storableText } from '../kernel/input-hygiene.ts';
import { SQLSTATE, sqlStateOf } from '../db/pg-errors.ts';
import { slotOf, type IdempotencyScope, type IdempotentCall, type Slot } from './key.ts';
import { openingOf, recordSql, save, storedOutcome, type Outcome } from './records.ts';

/** Runs a mutation at most once per key: the transaction that holds the key, the effect, and its recorded outcome. */

function replay(outcome: Outcome): Json {
  if (outcome.ok) return outcome.data;
  const { code, message, details } = outcome.error;
  // The details were typed by their code when the first request raised them; the record stores them as JSON.
  throw new DomainError(
    code,
    message,
    details === undefined ? {} : { details: details as ErrorDetailsOf<typeof code> },
  );
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
