import type pg from 'pg';
import type { TransactionClient } from './prisma.ts';

/**
 * The smallest interface both of our SQL paths share: a Prisma transaction and a `pg` client both run a statement
 * with bound parameters and return its rows. Idempotency bookkeeping is written once against it.
 */
export interface SqlExecutor {
  query<Row = Record<string, unknown>>(sql: string, params?: readonly unknown[]): Promise<Row[]>;
}

export function prismaExecutor(tx: TransactionClient): SqlExecutor {
  return { query: (sql, params = []) => tx.$queryRawUnsafe(sql, ...params) };
}

export function pgExecutor(client: pg.PoolClient | pg.Pool): SqlExecutor {
  return { query: async <Row>(sql: string, params: readonly unknown[] = []) => (await client.query(sql, params as unknown[])).rows as Row[] };
}

/** BEGIN … COMMIT on one pooled connection; any error rolls back and is rethrown. */
export async function inPgTransaction<T>(pool: pg.Pool, work: (executor: SqlExecutor) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await work(pgExecutor(client));
    await client.query('COMMIT');
    return result;
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw error;
  } finally {
    client.release();
  }
}
