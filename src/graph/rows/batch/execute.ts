import type { SqlExecutor } from '../../../db/sql.ts';
import { typeSpecOf } from '../../../data/field-types.ts';
import {
  allocateGeneratedBatch,
  batchActivity,
  deleteRows,
  insertRows,
  rowPayload,
  updateRows,
  type ChangedRow,
} from '../../../data/row-batch.ts';
import type { RowEvent } from '../../../data/rows.ts';
import { DomainError } from '../../../kernel/errors.ts';
import type { TableSchema } from '../../../catalog/table-schema.ts';
import { explainRefusedInsert } from '../rows.ts';
import { BatchFailures } from './failures.ts';
import { runBatchStatement } from './run-statement.ts';
import { checkAgainstTables } from './table-checks.ts';
import type { Writes } from './writes.ts';

/**
 * Writes, and when the database still refuses a key (one a concurrent transaction committed after the checks, or a
 * case the checks leave to the indexes), rolls the writes back and checks again: the new statements see the other
 * transaction's rows, so the failure is reported with its operation's index. If the checks find nothing, the
 * database's own error stands.
 */
export async function writeChecked(
  executor: SqlExecutor,
  schema: TableSchema,
  writes: Writes,
  event: RowEvent,
  total: number,
): Promise<void> {
  await executor.query('SAVEPOINT batch_write', []);
  try {
    await write(executor, schema, writes, event);
  } catch (error) {
    if (!(error instanceof DomainError) || (error.code !== 'UNIQUE_CONFLICT' && error.code !== 'FOREIGN_KEY_CONFLICT'))
      throw error;
    await executor.query('ROLLBACK TO SAVEPOINT batch_write', []);
    const again = new BatchFailures();
    await checkAgainstTables(executor, schema, writes, again);
    again.throwIfAny(total);
    throw error;
  }
}

/** Draws the autoNumber values of the new rows. */
export async function completeInserts(executor: SqlExecutor, schema: TableSchema, writes: Writes): Promise<void> {
  const statement = allocateGeneratedBatch(schema, writes.inserts.length);
  const drawn = statement ? await runBatchStatement<Record<string, string>>(executor, schema, statement) : [];
  const generated = schema.fields.filter((field) => typeSpecOf(field.type).generated);
  writes.inserts.forEach((insert, position) => {
    generated.forEach((field, index) => insert.values.set(field.id, Number(drawn[position]![`g${index}`])));
  });
}

async function expectWritten(
  executor: SqlExecutor,
  schema: TableSchema,
  written: number,
  expected: number,
): Promise<void> {
  if (written !== expected) await explainRefusedInsert(executor, schema);
}

async function write(executor: SqlExecutor, schema: TableSchema, writes: Writes, event: RowEvent): Promise<void> {
  const batch = { schemaVersion: schema.schemaVersion, event };
  if (writes.deletes.length > 0) {
    const removed = await runBatchStatement(
      executor,
      schema,
      deleteRows(
        schema,
        batch,
        writes.deletes.map((remove) => remove.row.id),
      ),
    );
    await expectWritten(executor, schema, removed.length, writes.deletes.length);
  }
  if (writes.changes.length > 0) {
    const rows: ChangedRow[] = writes.changes.map((change) => ({
      payload: rowPayload(
        schema.fields.filter((field) => !typeSpecOf(field.type).generated),
        change.row.id,
        change.values,
        { version: String(BigInt(change.row.version) + 1n) },
      ),
      changedFieldIds: change.changed,
    }));
    const updated = await runBatchStatement(executor, schema, updateRows(schema, batch, rows));
    await expectWritten(executor, schema, updated.length, writes.changes.length);
  }
  if (writes.inserts.length > 0) {
    const [inserted] = await runBatchStatement<{ count: number }>(
      executor,
      schema,
      insertRows(
        schema,
        batch,
        writes.inserts.map((insert) => rowPayload(schema.fields, insert.id, insert.values)),
      ),
    );
    await expectWritten(executor, schema, inserted!.count, writes.inserts.length);
  }
  const affected = writes.inserts.length + writes.changes.length + writes.deletes.length;
  if (affected > 0) {
    const only =
      affected === 1
        ? [
            ...writes.inserts.map((insert) => insert.id),
            ...[...writes.changes, ...writes.deletes].map((write) => write.row.id),
          ][0]!
        : null;
    await runBatchStatement(executor, schema, batchActivity(schema, event, affected, only));
  }
}
