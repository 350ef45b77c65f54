import { DomainError } from '../kernel/errors.ts';
import { SQLSTATE } from './pg-errors.ts';

/**
 * Statement time budgets (DESIGN §5). Every pooled connection starts with the request budget as its
 * `statement_timeout` (a startup parameter, so `RESET statement_timeout` returns to it); job steps raise it for
 * their own transaction or session only, so a connection handed back to the pool always carries the request budget.
 */

/** Whole seconds a client should wait before retrying a query that ran out of time. */
export const QUERY_TIMEOUT_RETRY_AFTER_SECONDS = 5;

/** `SET LOCAL statement_timeout` for a job step's transaction (parameter-free: it travels with BEGIN). */
export function jobBudgetLocal(milliseconds: number): string {
  return `SET LOCAL statement_timeout = ${Math.trunc(milliseconds)}`;
}

/** For job work that must run outside a transaction (CREATE INDEX CONCURRENTLY); undo with `RESET statement_timeout`. */
export function jobBudgetSession(milliseconds: number): string {
  return `SET statement_timeout = ${Math.trunc(milliseconds)}`;
}

/**
 * Whether an error (from `pg`, or from Prisma's pg adapter, which keeps the driver's error as a cause) is PostgreSQL
 * cancelling a statement: SQLSTATE 57014. The service never cancels statements otherwise (no pg_cancel_backend), so
 * that is the statement budget; the code, unlike the message, does not depend on the server's lc_messages.
 */
export function isStatementTimeout(error: unknown): boolean {
  const seen = new Set<unknown>();
  const pending = [error];
  while (pending.length > 0) {
    const next = pending.pop();
    if (next === null || typeof next !== 'object' || seen.has(next)) continue;
    seen.add(next);
    const record = next as Record<string, unknown>;
    if (record.code === SQLSTATE.queryCanceled || record.originalCode === SQLSTATE.queryCanceled) return true;
    const meta = record.meta as Record<string, unknown> | undefined;
    pending.push(record.cause, record.originalError, meta, meta?.driverAdapterError);
  }
  return false;
}

export function queryTimeoutError(): DomainError {
  return new DomainError('QUERY_TIMEOUT', 'The query ran out of its time budget; narrow the filter or retry later.', {
    retryAfter: QUERY_TIMEOUT_RETRY_AFTER_SECONDS,
  });
}
