import { PrismaPg } from '@prisma/adapter-pg';
import pg from 'pg';
import { PrismaClient } from '../generated/prisma/client.ts';
import type { Logger } from '../kernel/log.ts';
import { guardPool } from './availability.ts';

export type { PrismaClient };
export type TransactionClient = Parameters<Parameters<PrismaClient['$transaction']>[0]>[0];

const pools = new WeakMap<PrismaClient, pg.Pool>();

/**
 * Startup options of every pooled session. On a Citus cluster a workspace table is distributed (its schema is a
 * distributed schema) and Citus refuses CREATE TRIGGER on it unless `citus.enable_unsafe_triggers` is on; the
 * service's triggers (a hashed unique rule's key lock) only touch their own table's shard, which Citus places
 * with the table. `citus.propagate_set_commands = local` carries a transaction's SET LOCAL (an export's time zone
 * and bound filter values) to the worker that runs its statements. `citus.enable_repartition_joins` lets an
 * import's staging tables (schema `wds_jobs`, which Citus may place on another worker) join the table they check
 * (docs/decisions/citus.md). Without Citus these are inert placeholder settings.
 */
export const SESSION_OPTIONS = {
  options:
    '-c citus.enable_unsafe_triggers=on -c citus.propagate_set_commands=local -c citus.enable_repartition_joins=on',
} as const;

/**
 * The catalog client. Prisma's pg adapter runs on a pool we create, so that the hot paths (credential lookup, row
 * writes) can use the same connections through `pg` directly (`sqlPoolOf`) without Prisma's per-query overhead,
 * which measured as the largest CPU cost of a row write (docs/decisions/data-plane.md). `$disconnect` ends the pool.
 * `statementTimeoutMs` is the per-statement budget of every connection (QUERY_TIMEOUT_MS).
 */
export function createPrisma(
  connectionString: string,
  poolSize = 10,
  statementTimeoutMs = 0,
  log?: Logger,
): PrismaClient {
  // The request budget rides on every connection as a startup parameter (src/db/statement-budget.ts); 0 = none.
  const pool = new pg.Pool({
    connectionString,
    ...SESSION_OPTIONS,
    max: poolSize,
    ...(statementTimeoutMs > 0 ? { statement_timeout: statementTimeoutMs } : {}),
  });
  // PostgreSQL may end an idle connection (a restart, a failover, idle_session_timeout): the pool drops it, the
  // next query opens another, and the pool emits 'error'. An 'error' nobody listens to ends a Node process, and
  // Prisma's adapter only listens once its first query has run; the hot paths use this pool before that.
  // Held connections get one too (src/db/availability.ts).
  guardPool(pool, log, 'requests');
  const prisma = new PrismaClient({ adapter: new PrismaPg(pool, { disposeExternalPool: true }) });
  pools.set(prisma, pool);
  return prisma;
}

/** The server address of this client's pool, for connections that must stay outside it (LISTEN). */
export function connectionStringOf(prisma: PrismaClient): string | undefined {
  return (sqlPoolOf(prisma) as unknown as { options: { connectionString?: string } }).options.connectionString;
}

export function sqlPoolOf(prisma: PrismaClient): pg.Pool {
  const pool = pools.get(prisma);
  if (!pool) throw new Error('This PrismaClient was not made by createPrisma');
  return pool;
}
