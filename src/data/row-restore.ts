import type { CellValue } from './field-types.ts';
import { columnOf, historyTableOf, rowsTableOf } from './identifiers.ts';
import {
  activityInsert,
  bindEvent,
  cellValueSql,
  historyInsert,
  schemaGuard,
  type PhysicalTable,
  type RowEvent,
} from './rows.ts';
import { ID, Params, utcTimestamp, type Statement } from './statement.ts';

/**
 * Row restore (docs/decisions/lifecycle.md, "Row restore"): a deleted row comes back from its cell
 * history under its old id, as the version after its deletion. The write is the row insert's statement shape —
 * schema guard, row, one history entry per cell (operation `restore`), `records.changed` — so the same unique
 * indexes, foreign keys, capacity guard and idempotency record apply.
 */

/**
 * The newest history entry of a row (is it deleted, at which version?) and when the row was first created, so a
 * restored row keeps the age it had.
 */
export interface LastEntryRecord {
  version: string;
  operation: string;
  created_at: string;
}

export function selectLastEntry(table: PhysicalTable, rowId: string): Statement {
  const history = historyTableOf(table.databaseId, table.tableId);
  return {
    sql: `SELECT version::text AS version, operation,
                 (SELECT ${utcTimestamp('min(changed_at)')} FROM ${history} WHERE row_id = $1::${ID}) AS created_at
            FROM ${history} WHERE row_id = $1::${ID} ORDER BY version DESC LIMIT 1`,
    params: [rowId],
  };
}

export interface LastCellRecord {
  field_id: string;
  value: CellValue;
}

/**
 * Each field's last value before the row was deleted: its newest entry that is not a deletion (an update writes
 * only the cells it changed, so the newest entry differs per field). Fields deleted since are still in the
 * history; the caller keeps only today's fields.
 */
export function selectLastCells(table: PhysicalTable, rowId: string): Statement {
  return {
    sql: `SELECT DISTINCT ON (field_id) field_id, value FROM ${historyTableOf(table.databaseId, table.tableId)}
           WHERE row_id = $1::${ID} AND operation <> 'delete' ORDER BY field_id, version DESC`,
    params: [rowId],
  };
}

export interface RestoreRow {
  rowId: string;
  /** The version of the deletion, as its history shows it; the row comes back at the version after it. */
  deletedVersion: bigint;
  schemaVersion: number;
  createdAt: string;
  /** Every field's value for today's schema (null when empty), generated ones included. */
  values: ReadonlyMap<string, CellValue>;
  event: RowEvent;
}

/**
 * Inserts the row back when its newest history entry is still the deletion at `deletedVersion` and the table is
 * at `schemaVersion`; otherwise nothing. `ON CONFLICT (id) DO NOTHING`: a concurrent restore of the same row
 * that committed first makes this one insert nothing (a version conflict) instead of failing on the primary key.
 */
export function restoreRow(
  table: PhysicalTable,
  input: RestoreRow,
  also?: (params: Params, source: string) => string,
): Statement {
  const params = new Params();
  const bound = bindEvent(params, input.event);
  const history = historyTableOf(table.databaseId, table.tableId);
  const rowId = params.add(input.rowId, ID);
  const deleted = params.add(input.deletedVersion.toString(), 'bigint');
  const columns = ['id', 'version', 'created_at', 'updated_at', ...table.fields.map((field) => columnOf(field.id))];
  const values = [
    rowId,
    `${deleted} + 1`,
    params.add(input.createdAt, 'timestamptz'),
    bound.at,
    ...table.fields.map((field) => cellValueSql(params, field, input.values.get(field.id) ?? null)),
  ];
  const cells = table.fields.map(
    (field) =>
      `(${params.add(field.id, 'text')}, ${params.add(JSON.stringify(input.values.get(field.id) ?? null), 'jsonb')})`,
  );
  const sql = `WITH inserted AS (
      INSERT INTO ${rowsTableOf(table.databaseId, table.tableId)} (${columns.join(', ')})
      SELECT ${values.join(', ')}
       WHERE ${schemaGuard(params, table.tableId, input.schemaVersion)}
         AND (SELECT h.operation = 'delete' AND h.version = ${deleted} FROM ${history} h
               WHERE h.row_id = ${rowId} ORDER BY h.version DESC LIMIT 1)
      ON CONFLICT (id) DO NOTHING
      RETURNING id, version
    ), history AS (${historyInsert(table, bound, 'restore', 'inserted', `VALUES ${cells.join(', ')}`)}
    ), activity AS (${activityInsert(params, table, input.event, bound, 'inserted')})${also ? `, also AS (${also(params, 'inserted')})` : ''}
    SELECT id FROM inserted`;
  return { sql, params: params.values };
}
