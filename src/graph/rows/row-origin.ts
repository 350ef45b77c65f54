import type { RowAnswer } from '../../data/rows.ts';
import type { TableSchema } from '../../catalog/table-schema.ts';

/**
 * The table each row read through the graph came from, so that `Row.history` can follow it. Kept beside the row's
 * fields under a symbol, not in them: the row's shape is the spec's, and neither the GraphQL executor nor
 * JSON.stringify sees symbol keys. A WeakMap did this before, at 1.8 % of a view page's CPU (one ephemeron per row
 * for the collector to trace; issue 14, round 3).
 */
const TABLE = Symbol('table');

type TracedRow = RowAnswer & { [TABLE]?: TableSchema };

export function rowFromTable<Row extends RowAnswer>(schema: TableSchema, row: Row): Row {
  (row as TracedRow)[TABLE] = schema;
  return row;
}

/** The table a row was read from; undefined for rows answered by a mutation. */
export function tableOfRowRead(row: RowAnswer): TableSchema | undefined {
  return (row as TracedRow)[TABLE];
}
