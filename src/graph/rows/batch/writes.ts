import type { CellValue } from '../../../data/field-types.ts';
import type { RowShape } from '../../../data/rows.ts';
import { DomainError } from '../../../kernel/errors.ts';
import { newId } from '../../../kernel/ids.ts';
import type { TableSchema } from '../../../catalog/table-schema.ts';
import { checkRowSize } from '../row-values.ts';
import type { BatchFailures } from './failures.ts';
import type { PlannedOperation } from './plan.ts';

/** What the batch will write, decided from the checked operations and the locked rows. */
export interface Writes {
  /** New rows get their id here; their autoNumber values are drawn just before the write (`completeInserts`). */
  inserts: { index: number; id: string; values: Map<string, CellValue> }[];
  changes: { index: number; row: RowShape; values: Map<string, CellValue>; changed: string[] }[];
  deletes: { index: number; row: RowShape }[];
  unchanged: { index: number; row: RowShape }[];
}

export const valuesOf = (row: RowShape) => new Map(Object.entries(row.values));
const same = (a: CellValue | undefined, b: CellValue | undefined) =>
  JSON.stringify(a ?? null) === JSON.stringify(b ?? null);

function changeOf(
  schema: TableSchema,
  index: number,
  current: RowShape,
  patch: ReadonlyMap<string, CellValue>,
  writes: Writes,
): void {
  const values = valuesOf(current);
  for (const [fieldId, value] of patch) values.set(fieldId, value);
  const changed = schema.fields
    .filter((field) => !same(current.values[field.id], values.get(field.id)))
    .map((field) => field.id);
  if (changed.length === 0) writes.unchanged.push({ index, row: current });
  else writes.changes.push({ index, row: current, values, changed });
}

/** Decides every operation's write from the locked rows; a row named twice (through an upsert) is refused. */
export function decideWrites(
  schema: TableSchema,
  planned: readonly PlannedOperation[],
  targets: Map<string, RowShape>,
  matched: Map<number, RowShape>,
  failures: BatchFailures,
  rowSizeLimit: number,
): Writes {
  const writes: Writes = { inserts: [], changes: [], deletes: [], unchanged: [] };
  const claimedBy = new Map<string, number>(
    planned.flatMap((operation) =>
      operation.op === 'update' || operation.op === 'delete' ? [[operation.rowId, operation.index] as const] : [],
    ),
  );
  for (const operation of planned) {
    if (failures.has(operation.index)) continue;
    if (operation.op === 'create')
      writes.inserts.push({ index: operation.index, id: newId(), values: operation.values });
    else if (operation.op === 'delete')
      writes.deletes.push({ index: operation.index, row: targets.get(operation.rowId)! });
    else if (operation.op === 'update')
      changeOf(schema, operation.index, targets.get(operation.rowId)!, operation.values, writes);
    else {
      const current = matched.get(operation.index);
      if (!current) {
        writes.inserts.push({ index: operation.index, id: newId(), values: operation.values });
        continue;
      }
      const earlier = claimedBy.get(current.id);
      if (earlier !== undefined) {
        failures.invalid(
          operation.index,
          ['values'],
          `matches row ${current.id}, which operation ${earlier} of this batch also changes; a batch names each row once`,
        );
        continue;
      }
      claimedBy.set(current.id, operation.index);
      changeOf(
        schema,
        operation.index,
        current,
        new Map([...operation.values].filter(([fieldId]) => operation.named.has(fieldId))),
        writes,
      );
    }
  }
  for (const change of writes.changes) {
    try {
      checkRowSize(change.values, rowSizeLimit);
    } catch (error) {
      if (error instanceof DomainError) failures.add(change.index, error);
      else throw error;
    }
  }
  return writes;
}
