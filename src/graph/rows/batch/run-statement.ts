import type { SqlExecutor } from '../../../db/sql.ts';
import { SQLSTATE, sqlStateOf } from '../../../db/pg-errors.ts';
import type { Statement } from '../../../data/statement.ts';
import { DomainError } from '../../../kernel/errors.ts';
import type { TableSchema } from '../../../catalog/table-schema.ts';
import { run } from '../rows.ts';

/**
 * Runs a batch statement. Two batches that write overlapping keys in different orders can deadlock in PostgreSQL's
 * unique checks; the one it aborts (40P01) is told to retry — it is a transient conflict, so it is not recorded
 * for its Idempotency-Key, and a retry sees the other batch's rows.
 */
export async function runBatchStatement<T>(
  executor: SqlExecutor,
  schema: TableSchema,
  statement: Statement,
): Promise<T[]> {
  try {
    return await run<T>(executor, schema, statement);
  } catch (error) {
    if (sqlStateOf(error) !== SQLSTATE.deadlockDetected) throw error;
    throw new DomainError(
      'ROW_VERSION_CONFLICT',
      'Another write changed the same rows at the same time; read them again and retry.',
      {
        details: { reason: 'concurrent_write' },
        retryAfter: 1,
      },
    );
  }
}
