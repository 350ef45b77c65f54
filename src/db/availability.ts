import type pg from 'pg';
import { DomainError } from '../kernel/errors.ts';
import type { Logger } from '../kernel/log.ts';
import { SQLSTATE } from './pg-errors.ts';

/**
 * Whether the database could be reached at all (docs/decisions/faults.md). A restart, a failover, a crash, a full
 * `max_connections` or a process out of file descriptors is not the request's fault nor a bug of ours: the request
 * gets 503 DEPENDENCY_UNAVAILABLE with Retry-After, and the same request succeeds once PostgreSQL is back.
 */

/** Whole seconds a client should wait before retrying while the database is unreachable. */
export const DATABASE_RETRY_AFTER_SECONDS = 2;

// SQLSTATE class 08 (connection exception), 57P01-57P03 (admin/crash shutdown, cannot connect now), 53300 (too many
// connections), 53100 is disk full: not a reachability problem, so left out.
const SQLSTATES = /^(08\d{3}|08P01|57P0[123]|53300)$/;
// Socket-level failures of `pg` (Node errno codes), including running out of descriptors when it opens a socket.
const ERRNOS = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EMFILE',
  'ENFILE',
]);
// Prisma's codes and its driver adapter's error kinds for the same situations.
const PRISMA_CODES = new Set(['P1001', 'P1002', 'P1017', 'P2024']);
const ADAPTER_KINDS = new Set(['DatabaseNotReachable', 'ConnectionClosed', 'SocketTimeout', 'TooManyConnections']);
// `pg` reports a lost or unusable connection only in its message text (these texts are the library's, not the server's).
/**
 * SQLSTATE 55000 (object not in prerequisite state) at connection start: PostgreSQL refuses a session to a database
 * that does not allow connections (`ALTER DATABASE … ALLOW_CONNECTIONS false`, as during a restore or maintenance).
 * Only the FATAL one counts: the same code is an ordinary statement ERROR elsewhere (`currval` before `nextval`,
 * a replication slot in use, logical decoding without `wal_level = logical`), and those are bugs, not outages.
 * The severity, unlike the message, ignores `lc_messages`.
 */
function refusedConnection(record: Record<string, unknown>): boolean {
  const code = typeof record.originalCode === 'string' ? record.originalCode : record.code;
  return code === SQLSTATE.objectNotInPrerequisiteState && record.severity === 'FATAL';
}
const PG_MESSAGES =
  /^(Connection terminated|Client has encountered a connection error|Client was closed|timeout exceeded when trying to connect|Connection terminated due to connection timeout)/;

export function isDatabaseUnavailable(error: unknown): boolean {
  const seen = new Set<unknown>();
  const pending = [error];
  while (pending.length > 0) {
    const next = pending.pop();
    if (next === null || typeof next !== 'object' || seen.has(next)) continue;
    seen.add(next);
    const record = next as Record<string, unknown>;
    for (const code of [record.code, record.originalCode, record.errno]) {
      if (typeof code !== 'string') continue;
      if (SQLSTATES.test(code) || ERRNOS.has(code) || PRISMA_CODES.has(code)) return true;
    }
    if (typeof record.kind === 'string' && ADAPTER_KINDS.has(record.kind)) return true;
    if (refusedConnection(record)) return true;
    if (typeof record.message === 'string' && PG_MESSAGES.test(record.message)) return true;
    const meta = record.meta as Record<string, unknown> | undefined;
    pending.push(record.cause, record.originalError, meta, meta?.driverAdapterError);
    if (Array.isArray(record.errors)) pending.push(...(record.errors as unknown[]));
  }
  return false;
}

export function databaseUnavailableError(): DomainError {
  return new DomainError('DEPENDENCY_UNAVAILABLE', 'The database is unavailable; retry shortly.', {
    details: { dependency: 'database' },
    retryAfter: DATABASE_RETRY_AFTER_SECONDS,
    status: 503,
  });
}

/**
 * A connection that ends while held (checked out of the pool for a transaction, a COPY, a job's snapshot) emits
 * 'error' on its client, and `pg-pool` removes its own listener while a client is checked out: with nobody
 * listening, Node ends the process. Every client of `pool` gets a listener for its whole life; the statement it was
 * running fails with the same error, which its caller handles (a job retries from its checkpoint).
 */
export function guardPool(pool: pg.Pool, log: Logger | undefined, what: string): pg.Pool {
  pool.on('connect', (client) => {
    client.on('error', (error) => log?.warn({ err: error, pool: what }, 'a database connection failed'));
  });
  pool.on('error', (error) => log?.warn({ err: error, pool: what }, 'the database ended an idle connection'));
  return pool;
}
